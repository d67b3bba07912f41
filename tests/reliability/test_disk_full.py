"""A full disk mid-run (issue 11, item 6): a one-line error naming the file being written, the
earlier checkpoints intact and loadable, no temporary leftovers, and a rerun that resumes.

The disk is filled by patching the writers that hit it (safetensors, the trainer state, the
metrics log) to fail as they do on a full disk: an OSError(ENOSPC), or safetensors' own
``SafetensorError("... No space left on device (os error 28)")``.
"""

import errno
import io
import json

import pytest
from safetensors import SafetensorError

import preschool.io as pio
from preschool.errors import OutputError
from preschool.io import write_json
from preschool.train.callbacks.base import Callback
from preschool.train.checkpoint import STATE_FILE
from preschool.train.trainer import train

NO_SPACE = OSError(errno.ENOSPC, "No space left on device")


def _cfg(micro_cfg):
    return micro_cfg(checkpoint_every=2, eval_every=0)  # 8 steps, checkpoints at 2, 4, 6, 8


def _full_after(n_ok, real, exc):
    """A writer that works ``n_ok`` times, then fails like a full disk."""
    calls = {"n": 0}

    def write(*a, **kw):
        calls["n"] += 1
        if calls["n"] > n_ok:
            raise exc
        return real(*a, **kw)

    return write


def _assert_intact(run, upto_step):
    from safetensors.torch import load_file

    ck = run / "checkpoints"
    names = sorted(p.name for p in ck.iterdir())
    assert names == [f"step-{s:08d}" for s in range(2, upto_step + 1, 2)]  # no temp folders, no half checkpoint
    for name in names:
        load_file(str(ck / name / "model.safetensors"))
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]


def test_full_disk_while_writing_weights(tmp_path, datasets, micro_cfg, monkeypatch, capsys):
    import transformers.modeling_utils as mu


    err = SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    monkeypatch.setattr(mu, "safe_save_file", _full_after(1, mu.safe_save_file, err))
    run = tmp_path / "run"
    with pytest.raises(OutputError) as e:
        train(_cfg(micro_cfg), run, datasets)
    assert e.value.path == str(run / "checkpoints" / "step-00000004")
    assert "No space left on device" in str(e.value) and "rerun" in str(e.value)
    _assert_intact(run, 2)
    monkeypatch.undo()
    res = train(_cfg(micro_cfg), run, datasets)  # space freed: the same command resumes and finishes
    assert res["resumed_from"].endswith("step-00000002") and (run / "DONE").is_file()


def test_full_disk_while_writing_trainer_state(tmp_path, datasets, micro_cfg, monkeypatch):
    # torch reports a failed write as RuntimeError("unexpected pos ..."); the real cause must surface
    real_open = open

    def opener(path, mode="r", *a, **kw):
        fh = real_open(path, mode, *a, **kw)
        if str(path).endswith(STATE_FILE) and "w" in mode and "step-00000004" in str(path.parent):
            class Full(io.BufferedWriter):
                def write(self, b):
                    raise NO_SPACE
            fh.close()
            return Full(io.FileIO(path, "wb"))
        return fh

    monkeypatch.setattr(pio, "open", opener, raising=False)
    run = tmp_path / "run"
    with pytest.raises(OutputError, match=r"step-00000004: cannot write \(No space left on device\)"):
        train(_cfg(micro_cfg), run, datasets)
    _assert_intact(run, 2)


def test_full_disk_while_logging_metrics(tmp_path, datasets, micro_cfg):
    class FillDisk(Callback):
        def on_step_end(self, trainer):
            if trainer.step == 3:
                trainer.callbacks[0]._fh = _FullFile(trainer.out_dir / "metrics.jsonl")

    run = tmp_path / "run"
    with pytest.raises(OutputError, match=r"metrics.jsonl: cannot write \(No space left on device\)"):
        train(_cfg(micro_cfg), run, datasets, callbacks=[FillDisk()])
    _assert_intact(run, 2)
    res = train(_cfg(micro_cfg), run, datasets)
    assert res["resumed_from"].endswith("step-00000002")
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and steps[-1] == 8


class _FullFile:
    def __init__(self, path):
        self.name = str(path)

    def write(self, text):
        raise NO_SPACE

    def flush(self):
        pass

    def close(self):
        pass


def test_atomic_write_on_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    write_json(target, {"v": 1})
    monkeypatch.setattr(pio.os, "fsync", lambda fd: (_ for _ in ()).throw(NO_SPACE))
    with pytest.raises(OutputError) as e:
        write_json(target, {"v": 2})
    assert e.value.path == str(target) and str(e.value).count("\n") == 0
    assert json.loads(target.read_text()) == {"v": 1} and sorted(tmp_path.iterdir()) == [target]
