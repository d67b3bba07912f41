"""An edited corpus is not reused silently (issue 34, item 3): `dataset.json` records each local source file's
size, modification time and sha256; a later `prepare` or `run` whose corpus file changed (other words, other
size; a file added to or removed from a corpus folder) stops before writing anything, naming the file, unless
`--rebuild`. A file only touched (same bytes, new mtime) is still reused, and data prepared before sources were
recorded is reused as it was."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from preschool.cli import main


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def prepared(tiny_experiment, capsys):
    """The tiny experiment prepared once: (exp.yaml, out, corpus.txt)."""
    out = tiny_experiment.parent / "out"
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    return tiny_experiment, out, tiny_experiment.parent / "corpus.txt"


def _prepare(exp, out, *extra):
    return main(["prepare", str(exp), "--out", str(out), "--no-progress", *extra])


def test_dataset_json_records_each_source_file(prepared):
    _, out, corpus = prepared
    rec = json.loads((out / "data" / "pt" / "dataset.json").read_text())
    files = rec["sources"]["txt"]["files"]
    st = corpus.stat()
    assert files == [{"path": corpus.name, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns,
                      "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}]


def test_an_edited_corpus_file_is_refused_naming_it_unless_rebuild(prepared, capsys, one_line_error):
    exp, out, corpus = prepared
    before = _snapshot(out)
    corpus.write_text("\n".join(f"other words entirely {i} here now" for i in range(500)))
    assert _prepare(exp, out) == 2
    one_line_error(corpus, "'pt'", "--rebuild")
    assert _snapshot(out) == before
    # `run` checks the same before it writes experiment.yaml or trains
    assert main(["run", str(exp), "--out", str(out), "--no-progress", "--only", "train"]) == 2
    one_line_error(corpus, "'pt'")
    assert _snapshot(out) == before
    assert _prepare(exp, out, "--rebuild") == 0
    after = json.loads((out / "data" / "pt" / "dataset.json").read_text())
    assert after["sources"]["txt"]["files"][0]["sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert _snapshot(out)["data/pt/train/manifest.json"] != before["data/pt/train/manifest.json"]
    capsys.readouterr()
    assert _prepare(exp, out) == 0  # up to date with the new text


def test_same_size_other_bytes_is_refused(prepared, capsys, one_line_error):
    exp, out, corpus = prepared
    text = corpus.read_text()
    corpus.write_text(text.replace("cat", "cow"))  # same length, other words
    assert corpus.stat().st_size == len(text.encode())
    assert _prepare(exp, out) == 2
    one_line_error(corpus, "sha256")


def test_a_touched_but_unchanged_file_is_reused(prepared, capsys):
    exp, out, corpus = prepared
    before = _snapshot(out / "data" / "pt")
    st = corpus.stat()
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert _prepare(exp, out) == 0
    assert _snapshot(out / "data" / "pt") == before


def test_a_file_added_to_or_removed_from_a_corpus_folder_is_refused(tiny_experiment, capsys, one_line_error):
    tmp_path = tiny_experiment.parent
    folder = tmp_path / "texts"
    folder.mkdir()
    for i in range(3):
        (folder / f"part{i}.txt").write_text("\n".join(f"the dog {i} ran to the red mat {j}" for j in range(200)))
    exp = tiny_experiment
    exp.write_text(exp.read_text().replace(str(tmp_path / "corpus.txt"), str(folder)))
    out = tmp_path / "out"
    assert _prepare(exp, out) == 0
    capsys.readouterr()
    (folder / "part9.txt").write_text("a new file\n")
    assert _prepare(exp, out) == 2
    one_line_error(folder / "part9.txt", "'pt'")
    (folder / "part9.txt").unlink()
    (folder / "part1.txt").unlink()
    assert _prepare(exp, out) == 2
    one_line_error(folder / "part1.txt", "'pt'")


def test_data_prepared_before_sources_were_recorded_is_reused(prepared, capsys):
    exp, out, corpus = prepared
    path = out / "data" / "pt" / "dataset.json"
    rec = json.loads(path.read_text())
    del rec["sources"]
    path.write_text(json.dumps(rec))
    corpus.write_text(corpus.read_text() + "\nmore words\n")  # not noticed: nothing to compare with
    assert _prepare(exp, out) == 0
