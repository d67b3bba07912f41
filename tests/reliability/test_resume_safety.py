"""Resume and evaluation on damaged or foreign checkpoints (issue 11, item 3): nothing is
unpickled beyond tensors, a damaged newest checkpoint is reported and the run resumes from
the newest intact one, and ``eval`` names a truncated weights file."""

import json

import pytest
import torch

from preschool.cli import main
from preschool.errors import DataError
from preschool.evals.runner import load_checkpoint
from preschool.train.checkpoint import STATE_FILE, record_checksums
from preschool.train.trainer import train


def _cfg(micro_cfg):
    # 8 steps, checkpoints at 2, 4, 6, 8
    return micro_cfg(checkpoint_every=2, eval_every=0, log_every=1)


def _train_rows(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]


def _stopped_run(tmp_path, datasets, micro_cfg, stop_at, at=6):
    run = tmp_path / "b"
    train(_cfg(micro_cfg), run, datasets, callbacks=[stop_at(at)])
    return run, run / "checkpoints"


def _truncate(f, keep=0.5):
    b = f.read_bytes()
    f.write_bytes(b[: int(len(b) * keep)])


def test_two_newest_checkpoints_keep_their_optimizer_state_by_default(tmp_path, datasets, micro_cfg, stop_at):
    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at)
    have = {p.name for p in ck.iterdir() if (p / STATE_FILE).is_file()}
    assert have == {"step-00000004", "step-00000006"}
    train(micro_cfg(checkpoint_every=2, eval_every=0, keep_optimizer_state=1), tmp_path / "one", datasets)
    assert {p.name for p in (tmp_path / "one" / "checkpoints").iterdir() if (p / STATE_FILE).is_file()} == {"step-00000008"}


@pytest.mark.parametrize("damage", ["weights", "state"])
def test_damaged_newest_checkpoint_falls_back_and_reproduces_the_run(tmp_path, datasets, micro_cfg, damage, capsys, stop_at):
    train(_cfg(micro_cfg), tmp_path / "a", datasets)  # uninterrupted reference
    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at)
    bad = ck / "step-00000006" / ("model.safetensors" if damage == "weights" else STATE_FILE)
    _truncate(bad)
    capsys.readouterr()
    res = train(_cfg(micro_cfg), run, datasets)
    err = capsys.readouterr().err
    assert f"{bad}: " in err and "(damaged checkpoint)" in err  # its size differs from the one recorded
    assert res["resumed_from"] == str(ck / "step-00000004") and (run / "DONE").is_file()
    # the damaged checkpoint was rewritten on the way, and the run equals the uninterrupted one
    from safetensors.torch import load_file

    load_file(str(ck / "step-00000006" / "model.safetensors"))
    ra, rb = _train_rows(tmp_path / "a"), _train_rows(run)
    assert [r["step"] for r in ra] == [r["step"] for r in rb]
    assert [r["loss"] for r in ra] == pytest.approx([r["loss"] for r in rb], abs=1e-6)


class _Payload:
    """Unpickling this creates a file: proof that code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_malicious_trainer_state_is_not_executed(tmp_path, datasets, micro_cfg, capsys, stop_at):
    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at)
    marker = tmp_path / "PWNED"
    evil = ck / "step-00000006" / STATE_FILE
    torch.save({"step": _Payload(marker)}, evil)
    record_checksums(evil.parent)  # whoever planted it recorded its checksum too: only the unpickler stands between
    capsys.readouterr()
    res = train(_cfg(micro_cfg), run, datasets)
    assert not marker.exists()
    err = capsys.readouterr().err
    assert f"{evil}: unreadable trainer state (it holds objects other than tensors and plain data; refused" in err
    assert "weights_only" not in err and "can still be loaded" not in err  # torch's hint to load it anyway: not passed on
    assert res["resumed_from"] == str(ck / "step-00000004")


def test_no_intact_checkpoint_is_an_error_naming_them(tmp_path, datasets, micro_cfg, stop_at):
    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at)
    for step in (4, 6):
        _truncate(ck / f"step-{step:08d}" / "model.safetensors")
    with pytest.raises(DataError, match="no intact checkpoint") as e:
        train(_cfg(micro_cfg), run, datasets)
    assert "step-00000004/model.safetensors" in str(e.value) and "step-00000006/model.safetensors" in str(e.value)


def test_eval_on_truncated_weights_names_the_file(tmp_path, datasets, micro_cfg, capsys, stop_at):
    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at, at=2)
    weights = ck / "step-00000002" / "model.safetensors"
    _truncate(weights)
    with pytest.raises(DataError, match=f"{weights}: damaged model weights"):
        load_checkpoint(ck / "step-00000002")
    capsys.readouterr()
    code = main(["eval", "--checkpoint", str(ck / "step-00000002"), "--evaluator", "heldout",
                 "--set", f"sources.t={datasets['text']}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"{weights}: damaged model weights" in err[0]
