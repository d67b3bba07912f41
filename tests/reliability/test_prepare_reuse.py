"""`prepare` and `run` with a changed data spec (issue 22, item 3): the prepared data is reused only when it was
built from the same spec; otherwise the command stops before writing anything, naming the dataset and the field,
unless asked to `--rebuild`; and `run --rebuild` still refuses to replace data that a trained arm was trained on,
before any of it is rebuilt."""

import hashlib
from pathlib import Path

import pytest

from preschool.cli import main

# the tiny experiment (conftest) with a second dataset that no arm trains on
EXTRA = ["--set", "data.extra={corpus: txt, tokens: 600}"]


@pytest.fixture
def experiment(tiny_experiment):
    (tiny_experiment.parent / "other.txt").write_text((tiny_experiment.parent / "corpus.txt").read_text())
    return tiny_experiment, tiny_experiment.parent / "out"


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """relative path -> (sha256, mtime) of every file under ``folder``."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_prepare_with_a_changed_spec_is_refused_unless_rebuild(experiment, capsys, one_line_error):
    exp, out = experiment
    base = ["prepare", str(exp), "--out", str(out), "--no-progress", *EXTRA]
    assert main(base) == 0
    before = _snapshot(out)
    for change, names in (("data.pt.tokens=3000", ("data.pt.tokens", "'pt'", out / "data" / "pt", "--rebuild")),
                          ("seq_len=20", ("seq_len", "'pt'")),
                          (f"corpora.txt.path={exp.parent / 'other.txt'}", ("corpora.txt.path", "'pt'"))):
        capsys.readouterr()
        assert main([*base, "--set", change]) == 2, change
        one_line_error(*names)
        assert _snapshot(out) == before, change
    assert main([*base, "--set", "data.pt.tokens=3000"] + ["--rebuild"]) == 0
    after = _snapshot(out)
    assert after["data/pt/dataset.json"] != before["data/pt/dataset.json"]
    assert after["data/extra/dataset.json"] == before["data/extra/dataset.json"]  # unchanged: reused as it was
    assert main([*base, "--set", "data.pt.tokens=3000"]) == 0  # now up to date


def test_run_refuses_a_changed_spec_before_writing_anything(experiment, capsys, one_line_error):
    exp, out = experiment
    base = ["run", str(exp), "--out", str(out), "--no-progress", "--only", "train", *EXTRA]
    assert main(base) == 0
    assert (out / "arms" / "a" / "seed0" / "DONE").is_file()
    before = _snapshot(out)
    capsys.readouterr()
    # the data spec changed: refused naming it, before the data (or experiment.yaml) is touched
    assert main([*base, "--set", "data.pt.tokens=3000"]) == 2
    one_line_error("data.pt.tokens", "'pt'", "--rebuild")
    assert _snapshot(out) == before
    # asked to rebuild: the finished arm trained on pt still stops it, before anything is rebuilt
    assert main([*base, "--set", "data.pt.tokens=3000", "--rebuild"]) == 2
    one_line_error("arm a seed 0", out / "arms" / "a" / "seed0", "'pt'")
    assert _snapshot(out) == before
    # a dataset no arm trains on may be rebuilt under a finished arm
    assert main([*base, "--set", "data.extra={corpus: txt, tokens: 700}", "--rebuild"]) == 0
    assert _snapshot(out)["data/pt/dataset.json"] == before["data/pt/dataset.json"]
    before = _snapshot(out)
    capsys.readouterr()
    # a training change the finished arm cannot take: refused without rewriting experiment.yaml
    assert main([*base, "--set", "data.extra={corpus: txt, tokens: 700}", "--set", "train.lr=0.01"]) == 2
    one_line_error("train.lr")
    assert _snapshot(out) == before
