"""Train rows carry global tokens/s and, when the device's peak is known, MFU against it."""

import json

import pytest

from preschool.train.callbacks import Callback
from preschool.train.flops import flops_per_token
from preschool.train.trainer import train


class _Peak(Callback):
    """Stands in for a GPU in the datasheet table (CPU peaks are not tabulated)."""

    def on_model_built(self, trainer):
        trainer.peak_flops = 1e9


def test_train_rows_carry_mfu_when_the_peak_is_known(tmp_path, datasets, micro_cfg):
    run = tmp_path / "run"
    train(micro_cfg(), run, datasets, callbacks=[_Peak()])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["event"] == "train"]
    from preschool.train.model import ModelConfig, describe

    cfg = micro_cfg()
    desc = describe(ModelConfig(**cfg["model"]), 64)
    for r in rows:
        assert r["mfu"] == pytest.approx(r["tokens_per_s"] * flops_per_token(desc, 16) / 1e9)


def test_no_mfu_on_cpu_without_a_peak(tmp_path, datasets, micro_cfg):
    run = tmp_path / "run"
    train(micro_cfg(), run, datasets)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert all("mfu" not in r for r in rows if r["event"] == "train")
