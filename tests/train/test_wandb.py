"""W&B logging (train.wandb), run in offline mode: rank-0 run named experiment/arm/seed, config and data
manifest attached, every log row mirrored, the same W&B run continued on resume."""

import json
import re
from pathlib import Path

import pytest

wandb = pytest.importorskip("wandb", reason="the `wandb` extra (pip install 'preschool[wandb]')")

from preschool.config import from_dict  # noqa: E402
from preschool.errors import ConfigError  # noqa: E402
from preschool.train.callbacks.wandb import run_identity  # noqa: E402
from preschool.train.configs import WandbConfig  # noqa: E402
from preschool.train.trainer import TrainConfig, train  # noqa: E402


def _records(path: Path):
    """Payloads of a W&B transaction log (.wandb): a 7-byte header (":W&B", key, version), then
    LevelDB-style records in 32 KiB blocks: crc32c (4), length (2, little-endian), type (1: full,
    2: first, 3: middle, 4: last), payload; a block tail shorter than a record header is padding."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        payload = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            yield payload
        elif kind == 2:
            buf = payload
        elif kind == 3:
            buf += payload
        elif kind == 4:
            yield buf + payload


def _history(run_dir: Path) -> tuple[dict, list[dict]]:
    """(config, logged rows) of the offline W&B runs written under ``run_dir/wandb``."""
    from wandb.proto import wandb_internal_pb2

    files = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert files, list((run_dir / "wandb").rglob("*"))
    config, rows = {}, []
    for f in files:
        for payload in _records(f):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(payload)
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
            elif kind == "run":
                config.update({i.key: json.loads(i.value_json) for i in rec.run.config.update})
            elif kind == "config":
                config.update({i.key: json.loads(i.value_json) for i in rec.config.update})
    return config, rows


def test_offline_run_named_after_experiment_arm_seed_with_config_and_manifest(tmp_path, datasets, micro_cfg,
                                                                                monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    exp = tmp_path / "myexp"
    (exp / "data").mkdir(parents=True)
    (exp / "data" / "manifest.json").write_text('{"datasets": {}}')
    run = exp / "arms" / "ppt" / "seed3"
    cfg = micro_cfg(wandb={"project": "preschool-test", "tags": ["ci"]})
    from preschool.train.callbacks import Callback

    class Aux(Callback):  # a user callback comes after the W&B logger in the list: its value must still reach it
        def on_log(self, trainer, row):
            if row["event"] == "train":
                row["aux"] = 0.5 * row["step"]

    train(cfg, run, datasets, callbacks=[Aux()])
    assert run_identity(run) == ("myexp/ppt/seed3", "myexp")
    config, rows = _history(run)
    tree = config["train"].get("value", config["train"])
    assert tree["batch_size"] == 4 and tree["wandb"]["project"] == "preschool-test"  # config.yaml tree
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in metrics if r["event"] == "train"]
    logged = [r for r in rows if "train/loss" in r]
    assert [r["_step"] for r in logged] == [r["step"] for r in train_rows]
    assert [r["train/loss"] for r in logged] == pytest.approx([r["loss"] for r in train_rows])
    assert [r["train/aux"] for r in logged] == [r["aux"] for r in train_rows] == [0.5 * r["step"] for r in train_rows]
    assert any(k.startswith("val/") for r in rows for k in r)
    files = {p.name for p in (run / "wandb").glob("offline-run-*/files/**/*") if p.is_file()}
    assert {"config.yaml", "manifest.json"} <= files
    meta = next((run / "wandb").glob("offline-run-*/files/wandb-metadata.json"), None)
    run_id = (run / "wandb_id.txt").read_text().strip()
    assert next((run / "wandb").glob(f"offline-run-*-{run_id}"))  # the run carries the stored id
    assert meta is None or meta.is_file()


def test_resume_continues_the_same_wandb_run(tmp_path, datasets, micro_cfg, monkeypatch):
    from preschool.train.callbacks import Callback

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")

    class Stop(Callback):
        def on_step_end(self, trainer):
            if trainer.step == 4:
                trainer.should_stop = True

    run = tmp_path / "run"
    train(micro_cfg(wandb={}), run, datasets, callbacks=[Stop()])
    first = (run / "wandb_id.txt").read_text()
    train(micro_cfg(wandb={}), run, datasets)
    assert (run / "wandb_id.txt").read_text() == first
    # W&B names each start offline-run-<YYYYmmdd_HHMMSS>-<id>, adding "-1" when two starts share a second
    folders = [p.name for p in (run / "wandb").glob("offline-run-*")]
    assert len(folders) == 2 and all(re.fullmatch(rf"offline-run-\d{{8}}_\d{{6}}-{first.strip()}(-\d+)?", f)
                                     for f in folders), folders
    _, rows = _history(run)
    assert max(r["_step"] for r in rows) == 8


def test_wandb_settings_are_checked_and_free_to_change_on_resume():
    with pytest.raises(ConfigError, match="wandb"):
        from_dict(TrainConfig, {"stages": [{"name": "a", "data": "x", "tokens": 10}], "wandb": {"project": ""}})
    with pytest.raises(ConfigError, match="wandb"):
        from_dict(TrainConfig, {"stages": [{"name": "a", "data": "x", "tokens": 10}], "wandb": {"mode": "cloud"}})
    from preschool.train.run_dir import _RESUME_FREE

    assert "wandb" in _RESUME_FREE and WandbConfig().project == "preschool"
