"""Liger kernel selection (CPU-testable parts) and per-decoder-block torch.compile."""

import json

import pytest
import torch

from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.train.kernels import compile_blocks, compile_mode, resolve_kernels
from preschool.train.model import ModelConfig, build_model
from preschool.train.trainer import TrainConfig, train


def test_resolve_kernels_on_cpu():
    cpu = torch.device("cpu")
    assert resolve_kernels("auto", cpu) == "off"
    assert resolve_kernels("off", cpu) == "off"
    with pytest.raises(ConfigError, match="kernels.*CUDA"):
        resolve_kernels("liger", cpu)


def test_compile_setting_values(micro_cfg):
    assert compile_mode(from_dict(TrainConfig, micro_cfg(compile="blocks")).compile) == "blocks"
    assert compile_mode(from_dict(TrainConfig, micro_cfg(compile=True)).compile) == "model"
    assert compile_mode(from_dict(TrainConfig, micro_cfg()).compile) == "off"
    with pytest.raises(ConfigError, match="compile"):
        from_dict(TrainConfig, micro_cfg(compile="layers"))


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
