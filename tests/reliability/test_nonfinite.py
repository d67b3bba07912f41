"""A non-finite loss never ends in DONE (issue 22, item 7): ``nonfinite: stop`` (the default) stops the run
naming stage, step and batch and keeps the newest checkpoint as the last good one; ``skip`` drops the batch's
update; ``rewind`` reloads the stage's newest checkpoint and skips every batch since; each is a metrics row,
the run stops after ``nonfinite_limit`` of them, and a run with skips or rewinds resumes exactly."""

import json
import math
import shutil

import pytest
import torch

import yaml

from preschool.config import load_yaml
from preschool.errors import TrainingError
from preschool.train.callbacks.base import Callback
from preschool.train.checkpoint import STATE_FILE
from preschool.train.trainer import train


class NaNAt(Callback):
    """A NaN loss term on the batches of the given steps: what a diverging step gives the trainer."""

    def __init__(self, steps):
        self.steps = set(steps)

    def on_train_start(self, trainer):
        self.trainer = trainer

    def extra_loss(self, model, batch, outputs):
        if self.trainer.step + 1 in self.steps:  # a term with a gradient: NaN reaches the parameters
            return next(model.parameters()).sum() * float("nan")
        return None


def _rows(run, event):
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r.get("event") == event]


def _adam_steps(ckpt):
    """How many updates AdamW applied up to this checkpoint."""
    st = torch.load(ckpt / STATE_FILE, weights_only=True)
    return int(st["optimizer"]["state"][0]["step"])


def test_a_nonfinite_loss_stops_the_run_naming_stage_step_and_batch(tmp_path, datasets, micro_cfg):
    cfg = micro_cfg(checkpoint_every=2, eval_every=0)  # 8 steps of batch 4
    run = tmp_path / "r"
    with pytest.raises(TrainingError) as e:
        train(cfg, run, datasets, callbacks=[NaNAt({5})])
    msg = str(e.value)
    assert "stage 'pt', step 5 (step 5 of the stage), batch 4 of the stage's data (samples 16-19)" in msg
    assert f"{run / 'checkpoints' / 'step-00000004'} stays the last good checkpoint" in msg
    assert not (run / "DONE").exists()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000002", "step-00000004"]
    assert [(r["step"], r["action"]) for r in _rows(run, "nonfinite")] == [(5, "stop")]
    # the policy may change on the same run folder (a run that never meets one is the same run): it goes on
    res = train({**cfg, "nonfinite": "skip"}, run, datasets, callbacks=[NaNAt({5})])
    assert res["nonfinite_steps"] == 1 and (run / "DONE").is_file()


def test_skip_drops_the_batch_update_counts_it_and_resumes_exactly(tmp_path, datasets, micro_cfg, stop_at):
    cfg = micro_cfg(checkpoint_every=2, eval_every=0, nonfinite="skip")
    a = tmp_path / "a"
    res = train(cfg, a, datasets, callbacks=[NaNAt({3})])
    assert res["nonfinite_steps"] == 1 and json.loads((a / "DONE").read_text())["nonfinite_steps"] == 1
    [row] = _rows(a, "nonfinite")
    assert (row["step"], row["batch"], row["action"], row["count"]) == (3, 2, "skip", 1)
    assert math.isfinite(row["loss"]) and not math.isfinite(row["grad_norm"])
    assert _adam_steps(a / "checkpoints" / "step-00000008") == 7  # 8 steps, one of them not applied
    assert all(math.isfinite(r["loss"]) for r in _rows(a, "train"))
    b = tmp_path / "b"  # stopped after the skip, before the next checkpoint would hold it, then resumed
    train(cfg, b, datasets, callbacks=[NaNAt({3}), stop_at(3)])
    assert train(cfg, b, datasets, callbacks=[NaNAt({3})])["nonfinite_steps"] == 1
    assert [r["loss"] for r in _rows(a, "train")] == pytest.approx([r["loss"] for r in _rows(b, "train")], abs=1e-6)
    assert _rows(a, "nonfinite") == _rows(b, "nonfinite")


def test_rewind_reloads_the_last_checkpoint_skips_the_batches_since_and_resumes_exactly(tmp_path, datasets,
                                                                                      micro_cfg, stop_at):
    cfg = micro_cfg(checkpoint_every=3, eval_every=0, nonfinite="rewind")  # checkpoints at 3, 6, 8
    a = tmp_path / "a"
    assert train(cfg, a, datasets, callbacks=[NaNAt({5})])["nonfinite_steps"] == 1
    [row] = _rows(a, "nonfinite")
    assert (row["step"], row["action"], row["rewound_to"], row["skipped"]) == (5, "rewind", 3, 2)
    assert _adam_steps(a / "checkpoints" / "step-00000006") == 4  # steps 1-3 and 6: 4 and 5 were skipped
    b = tmp_path / "b"  # killed after step 4, before the rewind (the replay meets the same batch), and resumed
    train(cfg, b, datasets, callbacks=[NaNAt({5}), stop_at(4)])
    shutil.rmtree(b / "checkpoints" / "step-00000004")  # a kill writes no checkpoint where it stops
    train(cfg, b, datasets, callbacks=[NaNAt({5})])
    assert [r["loss"] for r in _rows(a, "train") if r["step"] > 5] == \
        pytest.approx([r["loss"] for r in _rows(b, "train") if r["step"] > 5], abs=1e-6)
    assert _rows(a, "nonfinite") == _rows(b, "nonfinite")


def test_rewind_without_a_checkpoint_of_the_stage_stops(tmp_path, datasets, micro_cfg):
    cfg = micro_cfg(checkpoint_every=100, eval_every=0, nonfinite="rewind")
    with pytest.raises(TrainingError, match="rewind found no checkpoint of stage 'pt' to rewind to"):
        train(cfg, tmp_path / "r", datasets, callbacks=[NaNAt({2})])


def test_the_run_stops_after_nonfinite_limit_of_them(tmp_path, datasets, micro_cfg):
    cfg = micro_cfg(eval_every=0, nonfinite="skip", nonfinite_limit=2)
    run = tmp_path / "r"
    with pytest.raises(TrainingError, match=r"step 6 .*\(number 3, over nonfinite_limit 2\)"):
        train(cfg, run, datasets, callbacks=[NaNAt({2, 4, 6})])
    assert [(r["step"], r["action"]) for r in _rows(run, "nonfinite")] == [(2, "skip"), (4, "skip"), (6, "stop")]
    assert not (run / "DONE").exists()


def test_a_run_written_before_the_policy_existed_resumes(tmp_path, datasets, micro_cfg, stop_at):
    cfg = micro_cfg(checkpoint_every=2, eval_every=0)
    run = tmp_path / "r"
    train(cfg, run, datasets, callbacks=[stop_at(4)])
    tree = load_yaml(run / "config.yaml")
    del tree["train"]["nonfinite"], tree["train"]["nonfinite_limit"]
    (run / "config.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
    assert train(cfg, run, datasets)["resumed_from"].endswith("step-00000004")
