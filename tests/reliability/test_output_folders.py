"""Commands that write one output folder whole (`export`, `transform l2t`, `generate`) never delete what they
did not write (issue 22, items 2, 4, 5 and 14): `--out` must be missing, empty or an earlier output of the same
command, and may not overlap an input; two writers of one folder (and two `train` of one run folder) do not
run at once; an export whose shard set lost its manifest stops; temp folders of killed writers are removed by
the next run, and nothing else is."""

import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import preschool
from preschool.cli import main
from preschool.corpora.base import CorpusConfig
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.prepare import prepare_data
from preschool.data.tokenizer import TokenizerConfig

SRC = Path(preschool.__file__).resolve().parents[1]
SEQ = 16


def _env():
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _snapshot(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under ``folder`` (what "nothing was touched" compares)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _wait_for(cond, what: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as `preschool prepare` leaves it: <run>/data/{tokenizer, pt, manifest.json}."""
    run = tmp_path_factory.mktemp("run")
    prepare_data(run / "data", TokenizerConfig(vocab_size=300, sample_documents=100),
                 {"sb": CorpusConfig(source="storybook", seed=0)},
                 {"pt": CorpusSpec(corpus="sb", tokens=30 * (SEQ + 1), val_tokens=6 * (SEQ + 1), unit_tokens=1024)},
                 seq_len=SEQ, seed=0, progress=False)
    return run


def _corpus(path: Path, n: int = 40) -> Path:
    rng = random.Random(0)
    words = "the boat left harbour at dawn and sailors sang nobody on shore could hear them wind turned".split()
    path.write_text("".join(json.dumps({"text": ". ".join(" ".join(rng.choice(words) for _ in range(12))
                                                           for _ in range(6)) + "."}) + "\n" for _ in range(n)))
    return path


L2T = ["--seq-len", "63", "--vocab-size", "300", "--min-words", "10", "--val-fraction", "0.1"]


# ---------------------------------------------------------------------------------------------- item 2


def test_export_into_the_run_it_reads_is_refused_and_the_run_is_kept(run_dir, capsys, one_line_error):
    data = run_dir / "data"
    before = _snapshot(run_dir)
    for out in (data, run_dir, data / "pt", data / "pt" / "exported"):
        assert main(["export", str(data / "pt"), "--format", "numpy", "--out", str(out)]) == 2, out
        one_line_error(out, "--out")
        assert _snapshot(run_dir) == before
    assert not (data / "pt" / "exported").exists()


def test_export_writes_only_into_an_empty_or_its_own_folder(run_dir, tmp_path, capsys, one_line_error):
    pt = run_dir / "data" / "pt"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    assert main(["export", str(pt), "--format", "numpy", "--out", str(mine)]) == 2
    one_line_error(mine, "notes.txt")
    assert (mine / "notes.txt").read_text() == "my notes" and len(list(mine.iterdir())) == 1

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", str(pt), "--format", "numpy", "--out", str(empty)]) == 0
    assert (empty / "export.json").is_file()
    # an earlier export is ours: replaced, in another format too
    assert main(["export", str(pt), "--format", "megatron", "--out", str(empty)]) == 0
    assert json.loads((empty / "export.json").read_text())["format"] == "megatron"
    # ... unless someone put their own file into it
    (empty / "notes.txt").write_text("mine")
    before = _snapshot(empty)
    capsys.readouterr()
    assert main(["export", str(pt), "--format", "numpy", "--out", str(empty)]) == 2
    one_line_error(empty, "notes.txt")
    assert _snapshot(empty) == before
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert main(["export", str(pt), "--format", "numpy", "--out", str(a_file)]) == 2
    one_line_error(a_file)
    assert a_file.read_text() == "x"


def test_transform_l2t_never_replaces_its_input_or_a_foreign_folder(tmp_path, capsys, one_line_error):
    inp = tmp_path / "corpus"
    inp.mkdir()
    _corpus(inp / "a.jsonl")
    before = _snapshot(inp)
    for out in (inp, inp / "l2t", tmp_path):
        assert main(["transform", "l2t", "--input", str(inp), "--out", str(out), *L2T]) == 2, out
        one_line_error(out, inp)
        assert _snapshot(inp) == before
    spec = tmp_path / "corpus.yaml"  # a corpus YAML: the folder it names is an input too
    spec.write_text(f"source: jsonl\npath: {inp}\n")
    assert main(["transform", "l2t", "--input", str(spec), "--out", str(inp / "l2t"), *L2T]) == 2
    one_line_error(inp / "l2t", inp)
    assert _snapshot(inp) == before
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["transform", "l2t", "--input", str(inp), "--out", str(foreign), *L2T]) == 2
    one_line_error(foreign, "notes.txt")
    assert (foreign / "notes.txt").read_text() == "mine"
    # its own earlier output is replaced
    out = tmp_path / "l2t"
    assert main(["transform", "l2t", "--input", str(inp), "--out", str(out), *L2T]) == 0
    assert main(["transform", "l2t", "--input", str(inp), "--out", str(out), *L2T, "--seed", "1"]) == 0
    assert json.loads((out / "manifest.json").read_text())["config"]["l2t"]["seed"] == 1


def test_generate_never_replaces_a_foreign_folder_or_a_prepared_dataset(run_dir, tmp_path, capsys, one_line_error):
    gen = ["generate", "stack", "--tokens", "400", "--seq-len", "32", "--quiet", "--set", "n_ops=8",
           "--set", "n_symbols=10"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main([*gen, "--out", str(foreign)]) == 2
    one_line_error(foreign, "notes.txt")
    assert (foreign / "notes.txt").read_text() == "mine"
    before = _snapshot(run_dir)
    train = run_dir / "data" / "pt" / "train"  # a shard set, but not one `generate` wrote
    assert main([*gen, "--out", str(train)]) == 2
    one_line_error(train)
    tok = run_dir / "data" / "tokenizer"
    assert main([*gen, "--out", str(tok / "dyck"), "--tokenizer", str(tok)]) == 2  # output inside an input
    one_line_error(tok / "dyck", tok)
    assert _snapshot(run_dir) == before
    out = tmp_path / "stack"
    assert main([*gen, "--out", str(out)]) == 0
    assert main([*gen, "--out", str(out), "--seed", "3"]) == 0  # its own: replaced
    assert json.loads((out / "manifest.json").read_text())["source"]["config"]["seed"] == 3


# ---------------------------------------------------------------------------------------------- item 5


def test_export_of_a_dataset_missing_a_split_manifest_is_refused(run_dir, tmp_path, capsys, one_line_error):
    import shutil

    broken = tmp_path / "pt"
    shutil.copytree(run_dir / "data" / "pt", broken)
    (broken / "train" / "manifest.json").unlink()
    out = tmp_path / "exp"
    assert main(["export", str(broken), "--format", "numpy", "--out", str(out)]) == 2
    one_line_error(broken / "train" / "manifest.json")
    assert not out.exists()


# ---------------------------------------------------------------------------------------------- item 4

HOLD = """
import sys, time
from pathlib import Path
from preschool.lock import output_lock
with output_lock(sys.argv[1], "preschool train held.yaml"):
    Path(sys.argv[2]).write_text("held")
    time.sleep(60)
"""


def test_two_transforms_into_one_out_do_not_both_run(tmp_path, capsys, one_line_error):
    inp = _corpus(tmp_path / "big.jsonl", n=3000)
    out = tmp_path / "l2t"
    err = tmp_path / "first.err"
    with open(err, "w") as fh:
        first = subprocess.Popen([sys.executable, "-m", "preschool.cli", "transform", "l2t", "--input", str(inp),
                                  "--out", str(out), *L2T, "--tokenizer-documents", "3000"], env=_env(),
                                 stdout=subprocess.DEVNULL, stderr=fh)
    try:
        # the first has started writing (a lock beside --out, or its work folder there)
        _wait_for(lambda: any(p.name.startswith(".l2t.") for p in tmp_path.iterdir()) or first.poll() is not None,
                  "the first transform to start")
        assert first.poll() is None, err.read_text()
        rc = main(["transform", "l2t", "--input", str(inp), "--out", str(out), *L2T, "--seed", "5"])
        running = first.poll() is None
        first.wait(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert rc == 2  # today: 0, and one of the two outputs silently replaced the other
    assert running, "the first transform finished before the second started: make the input larger"
    one_line_error(out, f"pid {first.pid} on {socket.gethostname()}")
    assert first.returncode == 0, err.read_text()
    assert json.loads((out / "manifest.json").read_text())["config"]["l2t"]["seed"] == 0  # the first's output


def test_train_into_a_run_folder_another_process_holds_is_refused(tmp_path, capsys, write_dataset, micro_cfg, one_line_error):
    import yaml

    data = write_dataset(tmp_path / "data", "text", stride=1, seed=1)
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump({"train": micro_cfg(), "datasets": {"text": str(data)}}))
    run, ready = tmp_path / "run", tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run), str(ready)], env=_env())
    try:
        _wait_for(lambda: ready.exists() or holder.poll() is not None, "the holder")
        assert main(["train", str(cfg), "--out", str(run), "--no-progress"]) == 2
        one_line_error(run, f"pid {holder.pid}", "preschool train held.yaml")
        assert not (run / "config.yaml").exists()
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------------------------------------- item 14

KILLED_WRITER = """
import sys, time
from pathlib import Path
from preschool.io import atomic_dir
with atomic_dir(sys.argv[1]) as tmp:
    (tmp / "half.bin").write_bytes(b"x" * 100000)
    Path(sys.argv[2]).write_text(str(tmp))
    time.sleep(60)
"""


def _killed_writer(out: Path, ready: Path, kill: bool = True):
    """A process writing ``out`` the way every command does (io.atomic_dir), killed mid-write (or left running)."""
    p = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(out), str(ready)], env=_env())
    _wait_for(lambda: ready.exists() or p.poll() is not None, "the writer to start")
    if kill:
        p.send_signal(signal.SIGKILL)
        p.wait()
    return p, Path(ready.read_text())


def test_temp_folders_of_killed_writers_are_removed_by_the_next_run_and_nothing_else(run_dir, tmp_path):
    out = tmp_path / "exp"
    live_proc, live = _killed_writer(out, tmp_path / "r2", kill=False)
    try:
        _, dead = _killed_writer(out, tmp_path / "r1")
        lookalike = tmp_path / ".exp.abcdefgh.tmp"  # named like ours, but no record of a preschool writer
        lookalike.mkdir()
        (lookalike / "keep.txt").write_text("not yours")
        other = tmp_path / ".other.abcdefgh.tmp"
        other.mkdir()
        assert dead.is_dir()
        assert main(["export", str(run_dir / "data" / "pt"), "--format", "numpy", "--out", str(out)]) == 0
        assert not dead.exists()  # the killed export's leftovers
        assert live.is_dir()  # a writer still running keeps its folder
        assert (lookalike / "keep.txt").read_text() == "not yours" and other.is_dir()
        assert not any(p.name == ".preschool-partial.json" for p in out.rglob("*"))
    finally:
        live_proc.kill()
        live_proc.wait()


def test_prepare_removes_the_temp_folder_of_a_killed_prepare(tmp_path):
    data = tmp_path / "data"
    _, dead = _killed_writer(data / "pt", tmp_path / "r1")
    prepare_data(data, TokenizerConfig(vocab_size=300, sample_documents=50), {"sb": CorpusConfig(source="storybook")},
                 {"pt": CorpusSpec(corpus="sb", tokens=10 * (SEQ + 1), unit_tokens=1024)}, seq_len=SEQ, progress=False)
    assert not dead.exists() and (data / "pt" / "dataset.json").is_file()
