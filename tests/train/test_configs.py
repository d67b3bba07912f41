"""Run configs (train/configs.py): ``reserved_ids: auto`` resolved from the shard manifests."""

import pytest

from preschool.errors import ConfigError
from preschool.io import write_json
from preschool.train.configs import StageConfig, TrainConfig, resolve_reserved_ids


def test_reserved_ids_auto_reads_the_range_from_the_shard_manifests(tmp_path):
    for name, rng in (("text", None), ("dyck", [300, 308]), ("stack", [300, 316])):
        write_json(tmp_path / name / "train" / "manifest.json", {"reserved_ids": rng})
    cfg = TrainConfig(stages=[StageConfig(name="s", data="text", tokens=64)], reserved_ids="auto")
    ds = {n: tmp_path / n for n in ("text", "dyck", "stack")}
    assert resolve_reserved_ids(cfg, ds).reserved_ids == [300, 316]
    assert resolve_reserved_ids(TrainConfig(stages=cfg.stages, reserved_ids=[1, 2]), ds).reserved_ids == [1, 2]
    with pytest.raises(ConfigError, match="reserved_ids.*none of the datasets"):
        resolve_reserved_ids(cfg, {"text": tmp_path / "text"})
