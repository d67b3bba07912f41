"""CPU bf16 autocast: capability detection, the warning without native bf16, and a run that trains and resumes."""

import json
import warnings

import pytest
import torch

from preschool.train import precision
from preschool.train.precision import autocast_dtype
from preschool.train.trainer import train

from .test_trainer import Crash, rows


def test_autocast_dtype_defaults():
    cpu = torch.device("cpu")
    assert autocast_dtype("auto", cpu) is None  # fp32 stays the CPU default
    assert autocast_dtype("fp32", cpu) is None
    assert autocast_dtype("auto", torch.device("cuda", 0)) is torch.bfloat16


def test_capability_read_from_cpuinfo_and_warning(monkeypatch, tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n")
    real_path = precision.Path
    monkeypatch.setattr(precision, "Path", lambda p: real_path(fake) if p == "/proc/cpuinfo" else real_path(p))
    precision.cpu_bf16_capability.cache_clear()
    try:
        assert precision.cpu_bf16_capability() is None
        with pytest.warns(UserWarning, match="amx_bf16"):
            assert autocast_dtype("bf16", torch.device("cpu")) is torch.bfloat16
        fake.write_text("flags\t\t: fpu avx512f avx512_bf16 amx_tile amx_bf16\n")
        precision.cpu_bf16_capability.cache_clear()
        assert precision.cpu_bf16_capability() == "amx_bf16"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert autocast_dtype("bf16", torch.device("cpu")) is torch.bfloat16
    finally:
        precision.cpu_bf16_capability.cache_clear()


def test_cpu_bf16_run_trains_and_resumes(tmp_path, datasets, micro_cfg):
    cfg = micro_cfg(stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 8}], lr=2e-2, precision="bf16",
                    device="cpu", checkpoint_every=4, eval_every=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CPU without native bf16 warns; the run is the same
        train(cfg, tmp_path / "a", datasets)
        with pytest.raises(RuntimeError, match="simulated"):
            train(cfg, tmp_path / "b", datasets, callbacks=[Crash(6)])  # last checkpoint: step 4
        r = train(cfg, tmp_path / "b", datasets)
    assert r["resumed_from"].endswith("step-00000004")
    la, lb = [x["loss"] for x in rows(tmp_path / "a")], [x["loss"] for x in rows(tmp_path / "b")]
    assert la[-1] < la[0] - 0.3  # it learns in bf16
    assert la == pytest.approx(lb, abs=1e-6)  # and the resumed curve is the uninterrupted one
    # the weights stay fp32 (autocast, not a bf16 model)
    meta = json.loads((tmp_path / "a" / "checkpoints" / "step-00000008" / "config.json").read_text())
    assert meta.get("dtype", meta.get("torch_dtype")) in ("float32", None)
    # and bf16 autocast really changes the numbers (the setting took effect)
    train({**cfg, "precision": "fp32"}, tmp_path / "c", datasets)
    assert [x["loss"] for x in rows(tmp_path / "c")] != pytest.approx(la, abs=1e-6)


def test_pure_bf16_run_keeps_weights_gradients_and_adamw_state_in_bf16(tmp_path, datasets, micro_cfg):
    """``precision: pure_bf16`` (the L2T runs): a bf16 model, no autocast; it learns, resumes and saves bf16."""
    from preschool.train.callbacks import Callback

    class Dtypes(Callback):
        def on_step_end(self, trainer):
            opt = trainer.optimizer
            self.params = {p.dtype for p in trainer.model.parameters()}
            self.grads = {p.grad.dtype for p in trainer.model.parameters() if p.grad is not None}
            self.state = {v.dtype for s in opt.state.values() for k, v in s.items() if k != "step"}
            self.amp = trainer.amp_dtype

    cfg = micro_cfg(stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 8}], lr=2e-2, precision="pure_bf16",
                    device="cpu", checkpoint_every=4, eval_every=0)
    cb = Dtypes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CPU without native bf16 warns
        train(cfg, tmp_path / "a", datasets, callbacks=[cb])
        with pytest.raises(RuntimeError, match="simulated"):
            train(cfg, tmp_path / "b", datasets, callbacks=[Crash(6)])
        r = train(cfg, tmp_path / "b", datasets)
    assert cb.params == {torch.bfloat16} and cb.state == {torch.bfloat16} and cb.amp is None
    assert cb.grads in (set(), {torch.bfloat16})  # zeroed with set_to_none after the step, or bf16
    la, lb = [x["loss"] for x in rows(tmp_path / "a")], [x["loss"] for x in rows(tmp_path / "b")]
    assert la[-1] < la[0] - 0.3 and r["resumed_from"].endswith("step-00000004")
    assert la == pytest.approx(lb, abs=1e-6)
    meta = json.loads((tmp_path / "a" / "checkpoints" / "step-00000008" / "config.json").read_text())
    assert meta.get("dtype", meta.get("torch_dtype")) == "bfloat16"
