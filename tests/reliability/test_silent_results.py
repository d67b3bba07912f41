"""What a report or an evaluation writes is never silently wrong (issue 48, item 12): a finished run whose
``metrics.jsonl`` is gone is refused, not reported as 0 tokens; ``report --out`` of a folder that holds no
experiment is refused, not written as all "unfinished"; ``eval --out`` never writes into the checkpoint it
reads or a folder above it (``/``); and a report whose numbers come from a checkpoint without
``checksums.json`` says so."""

import json
import random
import shutil
from pathlib import Path

import pytest

from preschool.cli import main

EXPERIMENT = """
name: silent
seq_len: 16
corpora:
  txt: {{source: text, path: {corpus}, split_documents: lines}}
tokenizer: {{kind: train, vocab_size: 300, sample_documents: 100}}
data:
  pt: {{corpus: txt, tokens: 2000, val_tokens: 64}}
minimal_pairs: {{per_paradigm: 0}}
model: {{preset: micro}}
train: {{batch_size: 4, val: [pt]}}
arms:
  - name: a
    stages: [{{name: pt, data: pt, tokens: 256}}]
evals:
  - name: minimal_pairs
    params: {{path: {blimp}}}
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """(experiment YAML, its output folder) of a finished run with one evaluation, made once; copy before changing."""
    root = tmp_path_factory.mktemp("finished")
    rng = random.Random(0)
    words = "the cat dog sat ran on a mat big small red blue and then it was".split()
    (root / "corpus.txt").write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 15)))
                                               for _ in range(400)))
    (root / "blimp").mkdir()
    pairs = [{"sentence_good": "the cat sat", "sentence_bad": "the sat cat", "UID": "order", "pairID": str(i)}
             for i in range(3)]
    (root / "blimp" / "order.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    exp = root / "exp.yaml"
    exp.write_text(EXPERIMENT.format(corpus=root / "corpus.txt", blimp=root / "blimp"))
    assert main(["run", str(exp), "--out", str(root / "out"), "--no-progress"]) == 0
    return exp, root / "out"


@pytest.fixture
def run_copy(finished, tmp_path) -> tuple[Path, Path]:
    exp, out = finished
    shutil.copytree(out, tmp_path / "out", symlinks=True)
    return exp, tmp_path / "out"


def _errors(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not ln.startswith("[preschool]")]


def test_a_finished_run_without_its_metrics_is_refused_not_reported_as_zero(run_copy, capsys):
    exp, out = run_copy
    metrics = out / "arms" / "a" / "seed0" / "metrics.jsonl"
    metrics.unlink()
    before = (out / "report.md").read_text()
    capsys.readouterr()
    assert main(["report", str(exp), "--out", str(out)]) == 2
    err = _errors(capsys)
    assert len(err) == 1 and f"{metrics}: missing" in err[0] and "DONE" in err[0], err
    assert (out / "report.md").read_text() == before  # the report of the whole run stays


def test_report_of_a_folder_that_holds_no_experiment_is_refused(finished, tmp_path, capsys):
    exp, _ = finished
    for where in (tmp_path / "nonexistent" / "x", tmp_path):
        assert main(["report", str(exp), "--out", str(where)]) == 2
        err = _errors(capsys)
        assert len(err) == 1 and str(where) in err[0] and "no runs" in err[0], err
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "report.md").exists()


@pytest.mark.parametrize("where", ["/", "checkpoint", "inside"])
def test_eval_out_never_writes_into_the_checkpoint_or_above_it(run_copy, capsys, where):
    exp, out = run_copy
    ckpt = next((out / "arms" / "a" / "seed0" / "checkpoints").iterdir())
    target = {"/": Path("/"), "checkpoint": ckpt, "inside": ckpt / "results"}[where]
    files = sorted(p.relative_to(out) for p in out.rglob("*"))
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(ckpt), "--evaluator", "minimal_pairs", "--set",
                 f"path={exp.parent / 'blimp'}", "--out", str(target)]) == 2
    err = _errors(capsys)
    assert len(err) == 1 and err[0].startswith("preschool eval: error: --out: "), err
    assert str(ckpt) in err[0] if where != "/" else "root of the file system" in err[0]
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == files
    assert not Path("/minimal_pairs").exists()


def test_a_report_from_a_checkpoint_without_checksums_says_so(run_copy, capsys):
    exp, out = run_copy
    ckpt = next((out / "arms" / "a" / "seed0" / "checkpoints").iterdir())
    (ckpt / "checksums.json").unlink()
    assert main(["report", str(exp), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "without checksums.json" in md and str(ckpt.relative_to(out)) in md
    results = json.loads((out / "results.json").read_text())
    assert results["unverified_checkpoints"] == [str(ckpt.relative_to(out))]


def test_a_report_of_checkpoints_with_checksums_says_nothing_of_them(run_copy):
    exp, out = run_copy
    assert main(["report", str(exp), "--out", str(out)]) == 0
    assert "checksums" not in (out / "report.md").read_text()
    assert "unverified_checkpoints" not in json.loads((out / "results.json").read_text())
