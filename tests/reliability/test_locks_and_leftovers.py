"""One writer per output, nothing of a user's replaced, nothing of ours left behind (issue 34, item 14):
``eval --out`` is locked (a second writer stops naming the first instead of silently winning),
``prepare`` never replaces a ``data/tokenizer`` folder that holds a user's files, the temp files a
killed ``report`` left are removed by the next one, and ``transform l2t --vocab-size`` below what a
byte-level BPE holds is refused instead of building 257 tokens under a manifest that says 3."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import preschool
from preschool.cli import main

SRC = Path(preschool.__file__).resolve().parents[1]  # the code under test, also in the child process

HOLD = """
import sys, time
from pathlib import Path
from preschool.lock import output_lock
with output_lock(sys.argv[1], "preschool eval --checkpoint c --out o", beside=True):
    Path(sys.argv[2]).write_text("held")
    time.sleep(60)
"""


# ---------------------------------------------------------------- eval --out

def test_a_second_eval_into_the_same_out_stops_naming_the_first(tmp_path, capsys):
    ckpt, out, ready = tmp_path / "ckpt", tmp_path / "evals", tmp_path / "ready"
    ckpt.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out), str(ready)], env=env)
    try:
        for _ in range(600):
            if ready.exists() or holder.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), "the holder did not take the lock"
        rc = main(["eval", "--checkpoint", str(ckpt), "--out", str(out), "--evaluator", "heldout",
                   "--set", f"sources.t={tmp_path}"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1, err
        assert f"pid {holder.pid} on {socket.gethostname()}" in err and "preschool eval --checkpoint c" in err
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- prepare: data/tokenizer

def test_prepare_never_replaces_a_tokenizer_folder_holding_a_users_files(tmp_path, tiny_experiment, one_line_error):
    out = tmp_path / "o"
    tok = out / "data" / "tokenizer"
    tok.mkdir(parents=True)
    (tok / "notes.txt").write_text("mine")
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    one_line_error(tok, "notes.txt")
    assert sorted(p.name for p in tok.iterdir()) == ["notes.txt"] and (tok / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (out / "data").iterdir()) == ["tokenizer"]  # nothing built either


def test_prepare_fills_an_empty_tokenizer_folder_and_leaves_files_beside_its_own(tmp_path, tiny_experiment):
    out = tmp_path / "o"
    (out / "data" / "tokenizer").mkdir(parents=True)  # empty: nothing of anyone's to keep
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    tok = out / "data" / "tokenizer"
    (tok / "notes.txt").write_text("mine")  # beside a tokenizer prepare made: reused, never rewritten
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    assert (tok / "notes.txt").read_text() == "mine"


# ---------------------------------------------------------------- report leftovers

def test_a_report_removes_the_temp_files_a_killed_report_left(tmp_path, tiny_experiment):
    out = tmp_path / "o"
    run = out / "arms" / "a" / "seed0"
    run.mkdir(parents=True)
    rows = [{"event": "val", "step": s, "tokens": 64 * s, "pt_tokens": 64 * s, "tokens_by_source": {"pt": 64 * s},
             "stage": "pt", "val/pt": 5.0 - 0.1 * s} for s in range(1, 5)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plots = out / "plots"
    plots.mkdir()
    # what a report killed mid-write leaves: atomic writes' temp files of its plots and files
    left = [plots / ".val_pt.png.k2j4_x9a.tmp", out / ".report.md.a8dk2m1z.tmp", out / ".results.json.0aq9z7w_.tmp"]
    for f in left:
        f.write_bytes(b"half")
    mine = [plots / "notes.txt", plots / ".keep.tmp", out / ".report.md.mine.tmp"]  # not temp names of ours
    for f in mine:
        f.write_text("mine")
    assert main(["report", str(tiny_experiment), "--out", str(out)]) == 0
    assert not any(f.exists() for f in left)
    assert all(f.read_text() == "mine" for f in mine)
    assert (plots / "val_pt.png").is_file() and not list(out.glob(".*.preschool.lock"))


# ---------------------------------------------------------------- transform l2t --vocab-size

@pytest.mark.parametrize("size", ["3", "256"])
def test_transform_l2t_refuses_a_vocabulary_a_byte_level_bpe_cannot_have(tmp_path, one_line_error, size):
    (tmp_path / "in.txt").write_text("The boat left the harbour at dawn and the sailors sang. " * 40)
    out = tmp_path / "l2t"
    assert main(["transform", "l2t", "--input", str(tmp_path / "in.txt"), "--out", str(out), "--seq-len", "127",
                 "--vocab-size", size, "--min-words", "10"]) == 2
    assert "257" in one_line_error("--vocab-size", size)
    assert not out.exists()


def test_transform_l2t_records_the_vocabulary_its_bpe_reached(tmp_path):
    (tmp_path / "in.txt").write_text("The boat left the harbour at dawn and the sailors sang. " * 40)
    out = tmp_path / "l2t"
    assert main(["transform", "l2t", "--input", str(tmp_path / "in.txt"), "--out", str(out), "--seq-len", "127",
                 "--vocab-size", "2048", "--min-words", "10"]) == 0
    source = json.loads((out / "manifest.json").read_text())["source"]["tokenizer"]
    shards = json.loads((out / "train" / "manifest.json").read_text())
    # a few hundred words give far fewer merges than asked: the record says both
    assert source["vocab_size"] == 2048 and source["size"] == shards["vocab_size"] < 2048
