"""Resume and evaluation on damaged or foreign checkpoints (issue 11, item 3; issue 22, items 1, 6, 14):
nothing is unpickled beyond tensors and DCP's metadata classes, every file is checked against the sha256
recorded when it was written before anything is deserialised, a damaged newest checkpoint (cut short or
a same-size byte flip, plain or FSDP) is reported and the run resumes from the newest intact one, ``eval``
names a truncated weights file, and the temp folder of an interrupted checkpoint write is removed by the
next run (nothing that is not ours)."""

import json
import math
import os
import pickle
import socket

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


# -- issue 22: files verified by content before anything is deserialised (items 1, 6), interrupted writes
# removed by the next run (item 14)

def _flip(f, at=0.5):
    """Change one byte in place (same size): what a bad disk or a copy gone wrong does."""
    b = bytearray(f.read_bytes())
    b[int(len(b) * at)] ^= 0x5A
    f.write_bytes(bytes(b))


@pytest.mark.parametrize("name", ["model.safetensors", "trainer_state.pt"])
def test_a_flipped_byte_in_a_plain_checkpoint_is_named_and_passed_over(tmp_path, datasets, micro_cfg, stop_at,
                                                                       capsys, name):
    train(_cfg(micro_cfg), tmp_path / "a", datasets)  # uninterrupted reference
    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at)
    bad = ck / "step-00000006" / name
    _flip(bad, at=0.9 if name == "model.safetensors" else 0.5)  # in the tensor data: loads fine on its own
    capsys.readouterr()
    res = train(_cfg(micro_cfg), run, datasets)
    err = capsys.readouterr().err
    assert f"{bad}: sha256 differs from the one recorded when it was written (damaged checkpoint)" in err
    assert res["resumed_from"] == str(ck / "step-00000004") and (run / "DONE").is_file()
    ra, rb = _train_rows(tmp_path / "a"), _train_rows(run)
    assert [r["loss"] for r in ra] == pytest.approx([r["loss"] for r in rb], abs=1e-6)


def _fsdp_run(tmp_path, datasets, micro_cfg, stop_at):
    cfg = {**_cfg(micro_cfg), "parallel": "fsdp", "device": "cpu"}
    run = tmp_path / "f"
    train(cfg, run, datasets, callbacks=[stop_at(6)])
    return cfg, run, run / "checkpoints"


@pytest.mark.parametrize("name", ["__0_0.distcp", ".metadata"])
def test_a_flipped_byte_in_an_fsdp_checkpoint_is_named_and_passed_over(tmp_path, datasets, micro_cfg, stop_at,
                                                                      capfd, name):
    cfg, run, ck = _fsdp_run(tmp_path, datasets, micro_cfg, stop_at)
    bad = ck / "step-00000006" / "sharded" / name
    _flip(bad)
    capfd.readouterr()
    res = train(cfg, run, datasets)
    err = capfd.readouterr().err
    assert f"{bad}: sha256 differs from the one recorded when it was written (damaged checkpoint)" in err
    assert "Traceback" not in err
    assert res["resumed_from"] == str(ck / "step-00000004") and (run / "DONE").is_file()
    assert all(math.isfinite(r["loss"]) for r in _train_rows(run))


def _planted_metadata(meta, marker):
    """A .metadata pickle that would create ``marker`` when unpickled, padded to the original's size."""
    size = meta.stat().st_size
    evil = pickle.dumps(_Payload(marker), protocol=2)
    assert len(evil) < size
    meta.write_bytes(evil + b"\0" * (size - len(evil)))  # pickle stops at STOP: the padding is never read


def test_a_planted_dcp_metadata_pickle_does_not_run(tmp_path, datasets, micro_cfg, stop_at, capfd):
    cfg, run, ck = _fsdp_run(tmp_path, datasets, micro_cfg, stop_at)
    meta = ck / "step-00000006" / "sharded" / ".metadata"
    marker = tmp_path / "PWNED"
    _planted_metadata(meta, marker)
    capfd.readouterr()
    res = train(cfg, run, datasets)
    assert not marker.exists()
    assert f"{meta}: sha256 differs" in capfd.readouterr().err
    assert res["resumed_from"] == str(ck / "step-00000004")


def test_a_planted_dcp_metadata_pickle_with_forged_checksums_is_refused(tmp_path, datasets, micro_cfg, stop_at, capfd):
    from preschool.io import sha256_file, write_json
    from preschool.train.checkpoint import record_checksums

    cfg, run, ck = _fsdp_run(tmp_path, datasets, micro_cfg, stop_at)
    meta = ck / "step-00000006" / "sharded" / ".metadata"
    marker = tmp_path / "PWNED"
    _planted_metadata(meta, marker)
    # whoever planted it also rewrote both manifests: only the unpickler stands between
    man_path = meta.parent / "manifest.json"
    man = json.loads(man_path.read_text())
    man["files"][".metadata"]["sha256"] = sha256_file(meta)
    write_json(man_path, man)
    record_checksums(meta.parent.parent)
    capfd.readouterr()
    res = train(cfg, run, datasets)
    assert not marker.exists()
    err = capfd.readouterr().err
    # the payload's callable as pickle names it: io.open up to Python 3.11, _io.open from 3.12
    called = f"{open.__module__}.{open.__qualname__}"
    assert f"{meta}: unreadable checkpoint metadata ({called} is not part of torch's checkpoint metadata)" in err
    assert res["resumed_from"] == str(ck / "step-00000004")


def test_an_interrupted_checkpoint_write_is_removed_by_the_next_run_and_nothing_else(tmp_path, datasets,
                                                                                      micro_cfg, stop_at, capsys):
    import subprocess
    import sys

    from preschool.io import PARTIAL_MARK

    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at, at=4)
    # a checkpoint write killed half way (step 7: a step the rerun never writes again): its temp folder is left
    kill = ("import os, sys; from preschool.train.sharded_checkpoint import collective_atomic_dir as d\n"
            "cm = d(sys.argv[1]); tmp = cm.__enter__(); (tmp / 'model.safetensors').write_bytes(b'half')\n"
            "print(tmp, flush=True); os._exit(9)")
    out = subprocess.run([sys.executable, "-c", kill, str(ck / "step-00000007")], capture_output=True, text=True)
    ours = ck / out.stdout.strip().rsplit("/", 1)[-1]
    assert out.returncode == 9 and ours.is_dir() and ours.name.startswith(".step-00000007.")
    # look-alikes that are not ours to delete: no record, a record in a folder of another name, a live writer
    foreign = ck / ".step-00000006.abcd1234.tmp"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    other = ck / "scratch"
    other.mkdir()
    (other / PARTIAL_MARK).write_text((ours / PARTIAL_MARK).read_text())
    live = ck / ".step-00000005.live0001.tmp"
    live.mkdir()
    (live / PARTIAL_MARK).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                                  "for": "step-00000005"}))
    capsys.readouterr()
    train(_cfg(micro_cfg), run, datasets)
    assert not ours.exists()
    assert f"removed {ours} (a checkpoint write that was cut short)" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "mine" and (other / PARTIAL_MARK).is_file() and live.is_dir()
    assert (run / "DONE").is_file()


def test_a_planted_entry_in_a_dcp_shard_with_forged_checksums_is_refused(tmp_path, datasets, micro_cfg, stop_at,
                                                                        capfd, plant_in_dcp_entry):
    """DCP reads non-tensor entries (AdamW's hyper-parameters) with an unrestricted torch.load."""
    cfg, run, ck = _fsdp_run(tmp_path, datasets, micro_cfg, stop_at)
    folder = ck / "step-00000006" / "sharded"
    marker = tmp_path / "PWNED"
    # point the "lr" entry at a pickle appended to the shard, and forge every hash on the way
    plant_in_dcp_entry(folder, lambda fqn: fqn == "optimizer.param_groups.0.lr", _Payload(marker))
    capfd.readouterr()
    res = train(cfg, run, datasets)
    assert not marker.exists()
    err = capfd.readouterr().err
    assert (f"{folder}: entry optimizer.param_groups.0.lr holds objects other than tensors and plain data "
            "(refused, since unpickling them could run code); trying the previous checkpoint") in err
    assert res["resumed_from"] == str(ck / "step-00000004") and (run / "DONE").is_file()


def test_a_checkpoint_written_before_checksums_resumes_with_a_warning(tmp_path, datasets, micro_cfg, stop_at, capsys):
    run, ck = _stopped_run(tmp_path, datasets, micro_cfg, stop_at)
    (ck / "step-00000006" / "checksums.json").unlink()
    capsys.readouterr()
    res = train(_cfg(micro_cfg), run, datasets)
    assert (f"{ck / 'step-00000006'}: no checksums.json (written by an older preschool): its files are not verified"
            in capsys.readouterr().err)
    assert res["resumed_from"] == str(ck / "step-00000006")
