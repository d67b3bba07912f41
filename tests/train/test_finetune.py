"""The supervised fine-tune (train/finetune.py) runs through the staged trainer: its batches, its stopping
rule, and the trainer's checkpoints and exact resume."""

import json

import numpy as np
import pytest
import torch

from preschool import config as C
from preschool.data.mixture import IGNORE_INDEX
from preschool.errors import ConfigError
from preschool.layout import CKPT_WEIGHTS, checkpoint_dir, done_path, list_checkpoints, read_metrics
from preschool.train.callbacks import Callback
from preschool.train.finetune import FineTuneConfig, PairData, finetune
from preschool.train.model import ModelConfig, build_model

VOCAB = 64


def _rows(n=29, seed=0):
    """(prompt, answer) rows a model can learn: the answer continues the prompt's progression."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        start, lp, la = int(rng.integers(1, VOCAB)), int(rng.integers(3, 9)), int(rng.integers(1, 4))
        seq = [(start + 2 * k) % (VOCAB - 1) + 1 for k in range(lp + la)]
        out.append((seq[:lp], seq[lp:]))
    return out


def _model():
    cfg = C.from_dict(ModelConfig, {"preset": "micro", "overrides": {"hidden_size": 32, "intermediate_size": 64}})
    return build_model(cfg, VOCAB, seed=5)


class StopAt(Callback):
    """Stops the run after step ``n`` through the trainer's own mechanism (``should_stop``)."""

    def __init__(self, n):
        self.n = n

    def on_step_end(self, trainer):
        if trainer.step == self.n:
            trainer.should_stop = True


CFG = FineTuneConfig(epochs=2, lr=3e-3, batch_size=4, warmup_steps=2, seed=7, checkpoint_every=3)


def test_batches_pad_rows_and_put_the_loss_on_answer_tokens_only():
    rows = _rows(10)
    data = PairData(rows, batch_size=4, epochs=2, seed=1, salt=9, pad_id=0)
    assert data.steps_per_epoch == 3 and data.steps == 6  # 4 + 4 + 2 rows per pass
    seen = []
    for step in range(6):
        b = data.batch(step, 4)
        ids, att, lab = b["input_ids"], b["attention_mask"], b["labels"]
        assert len(ids) == (2 if step % 3 == 2 else 4)  # a pass's last batch holds what is left
        assert ids.shape[1] == att.sum(1).max()  # padded to the batch's longest row only
        for r in range(len(ids)):
            n = int(att[r].sum())
            p, a = next((p, a) for p, a in rows if p + a == ids[r, :n].tolist())
            seen.append((step // 3, rows.index((p, a))))
            # position t is scored on token t + 1 only where that token is an answer token (EOS included)
            assert lab[r].tolist() == [IGNORE_INDEX] * (len(p) - 1) + a + [IGNORE_INDEX] * (ids.shape[1] - n + 1)
            assert (ids[r, n:] == 0).all()
    # every pass visits every row once, each pass in its own order
    for e in (0, 1):
        assert sorted(i for ep, i in seen if ep == e) == list(range(10))
    assert [i for ep, i in seen if ep == 0] != [i for ep, i in seen if ep == 1]
    with pytest.raises(ConfigError, match="batch_size"):
        data.batch(0, 8)


def test_fine_tune_stopped_midway_resumes_to_the_same_weights(tmp_path):
    rows = _rows()
    base = _model()
    ref = base.__class__(base.config)
    ref.load_state_dict(base.state_dict())
    full = finetune(ref, rows, CFG, tmp_path / "full", pad_id=0, salt=11)
    assert full["finished"] and len(full["losses"]) == 16  # 2 passes x ceil(29 / 4)
    assert full["losses"][-1] < full["losses"][0]

    run = tmp_path / "stopped"
    first = _model()
    part = finetune(first, rows, CFG, run, pad_id=0, salt=11, callbacks=[StopAt(8)])
    assert not part["finished"] and part["steps"] == 8
    # the trainer's checkpoints: every checkpoint_every steps and at the stop, each with its checksums
    assert [s for s, _ in list_checkpoints(run)] == [3, 6, 8]
    assert (checkpoint_dir(run, 8) / "checksums.json").is_file()

    again = _model()  # a fresh process would build the same starting model
    out = finetune(again, rows, CFG, run, pad_id=0, salt=11)
    assert out["finished"] and out["resumed_from"].endswith("step-00000008")
    ref_sd, sd = ref.state_dict(), again.state_dict()
    assert all(torch.equal(ref_sd[k], sd[k]) for k in ref_sd)  # bit for bit
    assert out["losses"] == full["losses"]  # metrics.jsonl reads as one uninterrupted run
    assert [r["step"] for r in read_metrics(run, "train")] == list(range(1, 17))

    # a finished fine-tune is not trained again: its final weights are loaded (checked against checksums.json)
    done = _model()
    assert finetune(done, rows, CFG, run, pad_id=0, salt=11)["finished"]
    assert all(torch.equal(ref_sd[k], v) for k, v in done.state_dict().items())


def test_resume_passes_over_a_damaged_checkpoint_and_still_ends_the_same(tmp_path, capsys):
    rows = _rows()
    ref = _model()
    finetune(ref, rows, CFG, tmp_path / "full", pad_id=0, salt=11)
    run = tmp_path / "run"
    finetune(_model(), rows, CFG, run, pad_id=0, salt=11, callbacks=[StopAt(8)])
    weights = checkpoint_dir(run, 8) / CKPT_WEIGHTS
    raw = bytearray(weights.read_bytes())
    raw[-5] ^= 0xFF  # one flipped bit pattern in the newest checkpoint's weights
    weights.write_bytes(bytes(raw))
    m = _model()
    out = finetune(m, rows, CFG, run, pad_id=0, salt=11)
    assert out["resumed_from"].endswith("step-00000006")  # the previous intact checkpoint
    assert "model.safetensors" in capsys.readouterr().err
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in ref.state_dict().items())


def test_a_folder_of_another_fine_tune_is_refused_or_started_over(tmp_path):
    rows = _rows()
    run = tmp_path / "run"
    finetune(_model(), rows, CFG, run, pad_id=0, salt=11, callbacks=[StopAt(4)])
    # other starting weights: the run folder's data fingerprint differs
    other = _model()
    with torch.no_grad():
        next(other.parameters()).add_(1.0)
    with pytest.raises(ConfigError, match="pairs"):
        finetune(other, rows, CFG, run, pad_id=0, salt=11)
    with pytest.raises(ConfigError, match="lr"):
        finetune(_model(), rows, FineTuneConfig(**{**CFG.__dict__, "lr": 1e-3}), run, pad_id=0, salt=11)
    # restart_stale (a scratch folder): deleted and trained from the start, as in a fresh folder
    ref = _model()
    with torch.no_grad():
        next(ref.parameters()).add_(1.0)
    finetune(ref, rows, CFG, tmp_path / "fresh", pad_id=0, salt=11)
    out = finetune(other, rows, CFG, run, pad_id=0, salt=11, restart_stale=True)
    assert out["finished"] and out["resumed_from"] is None
    assert all(torch.equal(v, other.state_dict()[k]) for k, v in ref.state_dict().items())
    assert json.loads(done_path(run).read_text())["steps"] == 16


KILLED = """
import os, sys
sys.path.insert(0, sys.argv[2])
from test_finetune import CFG, _model, _rows
from preschool.train.callbacks import Callback
from preschool.train.finetune import finetune

class Die(Callback):
    def on_step_end(self, trainer):
        if trainer.step == 10:
            os._exit(17)  # a killed process: no checkpoint of step 10, no cleanup

finetune(_model(), _rows(), CFG, sys.argv[1], pad_id=0, salt=11, callbacks=[Die()])
"""


def test_fine_tune_killed_midway_resumes_to_the_same_weights(tmp_path):
    """Killed after step 10 (newest checkpoint: step 9), rerun: the rows logged after the checkpoint are
    dropped and trained again, and the weights and losses equal an uninterrupted fine-tune's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    run = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", KILLED, str(run), str(Path(__file__).parent)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 17, proc.stderr[-2000:]
    assert [s for s, _ in list_checkpoints(run)] == [3, 6, 9]
    assert [r["step"] for r in read_metrics(run, "train")] == list(range(1, 11))  # step 10 logged, not saved
    ref = _model()
    full = finetune(ref, _rows(), CFG, tmp_path / "full", pad_id=0, salt=11)
    m = _model()
    out = finetune(m, _rows(), CFG, run, pad_id=0, salt=11)
    assert out["resumed_from"].endswith("step-00000009") and out["losses"] == full["losses"]
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in ref.state_dict().items())
