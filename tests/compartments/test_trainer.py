import dataclasses
import json

import numpy as np
import torch
from safetensors import safe_open

from preschool.compartments.dataset import CompartmentsConfig, write_compartment_val, write_compartmented
from preschool.compartments.model import CompartmentModelConfig, load_compartment_model
from preschool.compartments.trainer import CompartmentModel
from preschool.config import from_dict
from preschool.data.shards import ShardWriter
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
