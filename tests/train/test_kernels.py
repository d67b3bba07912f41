"""Liger kernel selection (CPU-testable parts) and per-decoder-block torch.compile."""

import json

import pytest
import torch

from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.train.kernels import compile_blocks, compile_mode, cpu_compile_pays_from, resolve_compile, resolve_kernels
from preschool.train.model import ModelConfig, build_model
from preschool.train.trainer import TrainConfig, train


def test_resolve_kernels_on_cpu():
    cpu = torch.device("cpu")
    assert resolve_kernels("auto", cpu) == "off"
    assert resolve_kernels("off", cpu) == "off"
    with pytest.raises(ConfigError, match="kernels.*CUDA"):
        resolve_kernels("liger", cpu)


def test_auto_leaves_compiled_models_to_inductor(monkeypatch):
    """On CUDA with Liger installed, auto picks Liger's norm/SwiGLU only for an eager model: inside a
    compiled block Inductor fuses them itself and a Triton call would be opaque to it."""
    import preschool.train.kernels as K

    monkeypatch.setattr(K, "liger_available", lambda: True)
    cuda = torch.device("cuda")
    assert resolve_kernels("auto", cuda, "off") == "liger"
    assert resolve_kernels("auto", cuda, "blocks") == "off"
    assert resolve_kernels("auto", cuda, "model") == "off"
    assert resolve_kernels("liger", cuda, "blocks") == "liger"  # asked for explicitly: given


def test_compile_setting_values(micro_cfg):
    assert compile_mode(from_dict(TrainConfig, micro_cfg(compile="blocks")).compile) == "blocks"
    assert compile_mode(from_dict(TrainConfig, micro_cfg(compile=True)).compile) == "model"
    assert compile_mode(from_dict(TrainConfig, micro_cfg()).compile) == "off"
    with pytest.raises(ConfigError, match="compile"):
        from_dict(TrainConfig, micro_cfg(compile="layers"))


def test_compile_auto_compiles_on_a_cpu_only_runs_long_enough_to_pay(monkeypatch):
    """auto: the blocks compiled on a CPU once the run's FLOPs pay for the compiling; off below that, off
    on another device, off without a C++ compiler for Inductor, off for a model of no known shape."""
    import preschool.train.kernels as K

    cpu, pays = torch.device("cpu"), cpu_compile_pays_from()
    monkeypatch.setattr(K.shutil, "which", lambda name: f"/usr/bin/{name}")
    quickstart_arm = 1_050_000 * 6.9e6  # tiny-1m, ~1M tokens at seq 128
    mode, why = resolve_compile("auto", cpu, quickstart_arm)
    assert mode == "off" and "compiling" in why and quickstart_arm < pays / 5
    assert resolve_compile("auto", cpu, 2 * pays)[0] == "blocks"
    assert resolve_compile("auto", torch.device("cuda"), 2 * pays)[0] == "off"
    assert resolve_compile("auto", cpu, None)[0] == "off"
    assert resolve_compile(True, cpu, 1.0)[0] == "model" and resolve_compile(False, cpu, 2 * pays)[0] == "off"
    monkeypatch.setattr(K.shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    assert resolve_compile("auto", cpu, 2 * pays) == ("off", "compile: auto is off: no C++ compiler on PATH for "
                                                             "Inductor's CPU code")


def test_compile_auto_trains_a_short_run_eagerly_and_says_why(tmp_path, datasets, micro_cfg, capsys):
    stages = [{"name": "pt", "data": "synth", "tokens": 4 * 16 * 3}]
    cfg = micro_cfg(stages=stages, checkpoint_every=100, eval_every=0, device="cpu")
    train({**cfg, "compile": "auto"}, tmp_path / "auto", datasets)
    assert "compile: auto is off" in capsys.readouterr().out
    train(cfg, tmp_path / "eager", datasets)
    assert _losses(tmp_path / "auto") == _losses(tmp_path / "eager")  # the same eager steps, bit for bit


def test_compile_blocks_keeps_parameter_names():
    model = build_model(ModelConfig("micro"), 50, seed=0)
    names = [n for n, _ in model.named_parameters()]
    assert compile_blocks(model) == 2
    assert [n for n, _ in model.named_parameters()] == names  # checkpoints stay plain HF


def _losses(run):
    return [json.loads(l)["loss"] for l in (run / "metrics.jsonl").read_text().splitlines()
            if json.loads(l)["event"] == "train"]


@pytest.mark.slow
def test_blocks_compiled_training_matches_eager(tmp_path, datasets, micro_cfg):
    """Loss over 5 steps with each decoder block compiled equals eager (Inductor on CPU: ~1 min)."""
    stages = [{"name": "pt", "data": "synth", "tokens": 4 * 16 * 5}]
    cfg = micro_cfg(stages=stages, checkpoint_every=100, eval_every=0, device="cpu")
    train(cfg, tmp_path / "eager", datasets)
    train({**cfg, "compile": "blocks"}, tmp_path / "blocks", datasets)
    a, b = _losses(tmp_path / "eager"), _losses(tmp_path / "blocks")
    assert len(a) == 5 and a[-1] < a[0]
    torch.testing.assert_close(torch.tensor(b), torch.tensor(a), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_blocks_compiled_run_is_deterministic_and_resumes_exactly(tmp_path, datasets, micro_cfg, stop_at):
    """What compile: auto turns on for a long CPU run: two compiled runs give the same steps bit for bit,
    and one stopped midway and resumed ends with the uninterrupted one's losses and weights (~2 min)."""
    from safetensors.torch import load_file

    stages = [{"name": "pt", "data": "synth", "tokens": 4 * 16 * 6}]
    cfg = {**micro_cfg(stages=stages, checkpoint_every=3, eval_every=0, device="cpu"), "compile": "blocks"}
    train(cfg, tmp_path / "a", datasets)
    train(cfg, tmp_path / "b", datasets, callbacks=[stop_at(3)])
    assert train(cfg, tmp_path / "b", datasets)["resumed_from"].endswith("step-00000003")
    assert _losses(tmp_path / "a") == _losses(tmp_path / "b") and len(_losses(tmp_path / "a")) == 6
    wa, wb = (load_file(str(tmp_path / r / "checkpoints" / "step-00000006" / "model.safetensors")) for r in "ab")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


# A stand-in for liger-kernel 0.8.5 (liger_kernel/transformers/monkey_patch.py), written for these tests:
# apply_liger_kernel_to_qwen2 / _llama rebind the family's modeling module attributes (apply_rotary_pos_emb,
# <Family>RMSNorm, <Family>MLP) exactly as 0.8.5 does, and with model= also bind the kernels' forward into
# the instance's norms and MLPs. The "kernels" are exact PyTorch math that count their calls, so a model
# runs on CPU and a test can see which modules it went through.
FAKE_LIGER = '''
import importlib
import torch

CALLS = {"rms_norm": 0, "swiglu": 0, "rope": 0}


class LigerRMSNorm(torch.nn.Module):
    def __init__(self, hidden_size, eps=1e-6, **kw):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        CALLS["rms_norm"] += 1
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(x.dtype)


class LigerSwiGLUMLP(torch.nn.Module):
    def forward(self, x):
        CALLS["swiglu"] += 1
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


def liger_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    CALLS["rope"] += 1
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)

    def rot(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


def _bind(module, name, fn):
    module.__dict__[name] = fn.__get__(module, module.__class__)


def _patch(family, prefix, rope, rms_norm, swiglu, model):
    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    if rope:
        modeling.apply_rotary_pos_emb = liger_rotary_pos_emb
    if rms_norm:
        setattr(modeling, f"{prefix}RMSNorm", LigerRMSNorm)
    if swiglu:
        setattr(modeling, f"{prefix}MLP", LigerSwiGLUMLP)
    if model is not None:
        base = getattr(model, model.base_model_prefix, model)
        norms = [base.norm] if rms_norm else []
        for layer in base.layers:
            if swiglu:
                _bind(layer.mlp, "forward", LigerSwiGLUMLP.forward)
            if rms_norm:
                norms += [layer.input_layernorm, layer.post_attention_layernorm]
        for n in norms:
            _bind(n, "forward", LigerRMSNorm.forward)


def apply_liger_kernel_to_qwen2(rope=True, cross_entropy=False, fused_linear_cross_entropy=True, rms_norm=True,
                                swiglu=True, model=None):
    _patch("qwen2", "Qwen2", rope, rms_norm, swiglu, model)


def apply_liger_kernel_to_llama(rope=True, cross_entropy=False, fused_linear_cross_entropy=True, rms_norm=True,
                                swiglu=True, model=None):
    _patch("llama", "Llama", rope, rms_norm, swiglu, model)
'''


@pytest.fixture
def fake_liger(tmp_path, monkeypatch):
    """The stand-in package on sys.path as ``liger_kernel``; transformers' modules restored afterwards
    whatever the code under test did to them (so a failing test does not leak into the next)."""
    import importlib
    import sys

    pkg = tmp_path / "fake_liger" / "liger_kernel"
    (pkg / "transformers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "transformers" / "__init__.py").write_text(FAKE_LIGER)
    monkeypatch.syspath_prepend(str(tmp_path / "fake_liger"))
    for name in [m for m in sys.modules if m.startswith("liger_kernel")]:
        monkeypatch.delitem(sys.modules, name)
    for family in ("qwen2", "llama"):
        modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        for name, value in list(vars(modeling).items()):
            monkeypatch.setattr(modeling, name, value)
    return importlib.import_module("liger_kernel.transformers")


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_liger_changes_the_instance_only(fake_liger, family):
    """After apply_liger(model) a freshly built model of the same family runs HF's stock modules
    (no kernel nobody asked for in the evaluator's copy, the next arm, a rung), while the patched
    instance runs the kernels and computes the same function."""
    import importlib

    from preschool.train.kernels import apply_liger

    cfg = ModelConfig("micro", family=family, overrides={"hidden_size": 32, "intermediate_size": 64})
    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    prefix = {"qwen2": "Qwen2", "llama": "Llama"}[family]
    stock = {n: getattr(modeling, n) for n in (f"{prefix}RMSNorm", f"{prefix}MLP", "apply_rotary_pos_emb")}
    patched = build_model(cfg, 50, seed=0)
    apply_liger(patched)
    assert {n: getattr(modeling, n) for n in stock} == stock
    fresh = build_model(cfg, 50, seed=0)
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(0))
    calls = fake_liger.CALLS
    before = dict(calls)
    with torch.no_grad():
        want = fresh(input_ids=ids, use_cache=False).logits
    assert calls == before  # the fresh model went through no kernel
    assert type(fresh.model.norm) is stock[f"{prefix}RMSNorm"] and type(fresh.model.layers[0].mlp) is stock[f"{prefix}MLP"]
    with torch.no_grad():
        got = patched(input_ids=ids, use_cache=False).logits
    layers = len(patched.model.layers)
    assert calls["rms_norm"] - before["rms_norm"] == 2 * layers + 1 and calls["swiglu"] - before["swiglu"] == layers
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fused_loss", ["auto", "chunked"])
def test_compiled_blocks_train_without_graph_breaks(tmp_path, datasets, micro_cfg, monkeypatch, fused_loss):
    """The trainer's steps (and its validation) with every decoder block compiled, in the settings auto
    picks (and with the fused loss, which auto picks at scale): Dynamo traces each block whole, 0 graph
    breaks. Dynamo's eager backend: the breaks are Dynamo's, whatever backend compiles the graphs after."""
    import preschool.train.kernels as K
    import preschool.train.trainer as T
    from torch._dynamo.utils import counters

    monkeypatch.setattr(T, "compile_blocks", lambda model: K.compile_blocks(model, backend="eager"))
    torch._dynamo.reset()
    counters.clear()
    stages = [{"name": "pt", "data": "synth", "tokens": 4 * 16 * 3}]
    train(micro_cfg(stages=stages, compile="blocks", kernels="auto", fused_loss=fused_loss, eval_every=2,
                    checkpoint_every=100, device="cpu"), tmp_path / "run", datasets)
    assert counters["stats"]["unique_graphs"] > 0  # the blocks were compiled at all
    assert dict(counters["graph_break"]) == {}
    torch._dynamo.reset()
