import dataclasses
import json

import numpy as np
import pytest
import torch
from safetensors import safe_open

from preschool.compartments.dataset import CompartmentsConfig, write_compartment_val, write_compartmented
from preschool.compartments.model import CompartmentModelConfig, load_compartment_model
from preschool.compartments.model_callback import CompartmentModel
from preschool.config import from_dict
from preschool.data.shards import ShardWriter
from preschool.train.callbacks.base import Callback
from preschool.train.trainer import TrainConfig, train

V, C = 20, 2


def _data(tmp_path):
    rng = np.random.default_rng(0)
    for split, n in (("train", 64), ("val", 8)):
        with ShardWriter(tmp_path / "base" / split, 9, V) as w:
            w.add_rows(rng.integers(0, V, (n, 9)))
    cfg = CompartmentsConfig(n_compartments=C)
    write_compartmented(tmp_path / "base" / "train", tmp_path / "main" / "train", cfg)
    paths = write_compartment_val(tmp_path / "base" / "val", tmp_path / "vals", cfg)
    ds = {"main": tmp_path / "main"}
    for name, p in paths.items():
        (tmp_path / name).mkdir()
        p.rename(tmp_path / name / "val")
        ds[name] = tmp_path / name
    return ds


def _cfg(tokens):
    return from_dict(TrainConfig, {
        "model": {"preset": "micro", "tie_embeddings": False}, "batch_size": 4, "lr": 1e-2, "progress": False,
        "eval_every": 0, "eval_schedule": "log", "evals_per_decade": 2, "checkpoint_schedule": "log", "checkpoints_per_decade": 1, "val": ["c0", "c1"],
        "val_rows": 4, "stages": [{"name": "s", "data": "main", "tokens": tokens, "schedule": "constant"}]})


def test_compartment_trainer_trains_saves_and_resumes(tmp_path):
    ds = _data(tmp_path)
    opts = CompartmentModelConfig(copy_init=["embeddings", "lm_head"])
    run = tmp_path / "run"
    train(_cfg(8 * 4 * 6), run, ds, None, [CompartmentModel(C, V, opts)])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    val_steps = [r["step"] for r in rows if r["event"] == "val"]
    assert val_steps == [0, 1, 3, 6] and all("val/c1" in r for r in rows if r["event"] == "val")
    ck = sorted((run / "checkpoints").glob("step-*"))[-1]
    with safe_open(str(ck / "model.safetensors"), framework="pt") as fh:
        w = fh.get_tensor("compartment_embedding.weight")
    assert w.shape == (C, 64)
    m = load_compartment_model(ck)
    torch.testing.assert_close(m.compartment_embedding.weight, w)
    # extend the budget: resumes from the last checkpoint (compartment vector included), no error
    (run / "DONE").unlink()
    cfg2 = _cfg(8 * 4 * 8)
    (run / "config.yaml").unlink()  # a longer run is a config change; the test only checks the weights load
    train(cfg2, run, ds, None, [CompartmentModel(C, V, opts)])
    assert (run / "checkpoints" / "step-00000008").is_dir()


def test_infonce_values_reach_metrics_jsonl(tmp_path):
    """The InfoNCE callback comes after the built-in metrics logger in the callback list; its value must
    still be in every train row of metrics.jsonl (values are added before any writer writes)."""
    from preschool.compartments.infonce import InfoNCECallback, InfoNCEConfig

    ds = _data(tmp_path)
    run = tmp_path / "run"
    cb = InfoNCECallback(InfoNCEConfig(pair_batch=4, weight=0.5, span_len=8), C, V,
                         train_shards=tmp_path / "base" / "train")
    cfg = dataclasses.replace(_cfg(8 * 4 * 3), log_every=1)
    train(cfg, run, ds, None, [CompartmentModel(C, V, CompartmentModelConfig()), cb])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r["event"] == "train"]
    assert len(train_rows) == 3
    assert all(r["infonce"] > 0 for r in train_rows)
    assert train_rows[-1]["infonce"] == cb.last


class _ParamDtypes(Callback):
    """Records the dtypes of the parameters the trainer trains, after its first step."""

    def __init__(self):
        self.dtypes = None

    def on_step_end(self, trainer):
        if self.dtypes is None:
            self.dtypes = {n: p.dtype for n, p in trainer.model.named_parameters()}


@pytest.mark.parametrize("c1_precision,precision", [("fp32", "pure_bf16"), ("pure_bf16", "fp32")])
def test_the_run_precision_holds_for_every_compartment_parameter(tmp_path, c1_precision, precision):
    """The run's ``precision`` decides the dtype of every trained parameter with the compartment options too:
    the compartment vectors the callback adds and the c=1 model an ``init_from`` run expands, whatever
    precision that model was trained (so saved) in (it came after the trainer's cast and kept its saved
    dtype: an fp32 c=1 model trained on in fp32 under ``pure_bf16``, a bf16 one in bf16 under ``fp32``)."""
    ds = _data(tmp_path)
    for split in ("train", "val"):
        write_compartmented(tmp_path / "base" / split, tmp_path / "c1" / split, CompartmentsConfig(n_compartments=1))
    cfg = dataclasses.replace(_cfg(8 * 4 * 2), checkpoint_schedule="final")
    want = {"fp32": torch.float32, "pure_bf16": torch.bfloat16}
    seen = _ParamDtypes()
    train(dataclasses.replace(cfg, val=[], precision=c1_precision), tmp_path / "c1run", {"main": tmp_path / "c1"},
          None, [CompartmentModel(1, V, CompartmentModelConfig()), seen])
    assert seen.dtypes and set(seen.dtypes.values()) == {want[c1_precision]}, seen.dtypes
    c1 = sorted((tmp_path / "c1run" / "checkpoints").glob("step-*"))[-1]
    seen = _ParamDtypes()
    train(dataclasses.replace(cfg, precision=precision), tmp_path / "c2run", ds, None,
          [CompartmentModel(C, V, CompartmentModelConfig(), init_from=c1), seen])
    assert "compartment_embedding.weight" in seen.dtypes and set(seen.dtypes.values()) == {want[precision]}, seen.dtypes
