"""Messy inputs end in a correct result or a one-line error, never in silent loss (issue 11, items 1, 5, 7).

Each test is the issue's reproduction: a folder mixing .txt and .jsonl, an empty
input, an input whose every record is dropped, a one-document input, UTF-16
files, a Parquet path given to ``transform l2t``, symbolic links, and reader
drops that must reach ``stats.json`` / ``dataset.json``.
"""

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preschool.cli import main
from preschool.config import from_dict
from preschool.corpora import CorpusConfig, ReadStats, is_validation, iter_documents
from preschool.errors import DataError

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
TEXT = ("The boat left the harbour at dawn and the sailors sang. Nobody on the shore could hear them. "
        "By noon the wind had turned, and the sea grew rough. The captain ordered the sails down. ") * 3
L2T = ["--seq-len", "127", "--vocab-size", "300", "--min-words", "10"]


def l2t(inp, out, *extra):
    return main(["transform", "l2t", "--input", str(inp), "--out", str(out), *L2T, *extra])


def read(**kw):
    st = ReadStats()
    return list(iter_documents(from_dict(CorpusConfig, kw), st)), st


# ---------------------------------------------------------------- item 1: input kind per file

def test_mixed_folder_reads_every_file(tmp_path, capsys):
    src = tmp_path / "mixed"
    src.mkdir()
    for i in range(5):
        (src / f"t{i}.txt").write_text(f"Text {i}. " + TEXT)
    (src / "r.jsonl").write_text(json.dumps({"text": "Record. " + TEXT}) + "\n")
    assert l2t(src, tmp_path / "out", "--val-fraction", "0") == 0
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["documents"] == 6
    st = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert st["read"]["files"] == 6 and st["read"]["drops"] == {}
    assert "read 6 files; reader drops: none" in capsys.readouterr().out


def test_files_no_reader_knows_are_counted_not_skipped_silently(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT)
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": TEXT}) + "\n")
    (tmp_path / "notes.csv").write_text("x,y\n")
    docs, st = read(path=str(tmp_path))
    assert [d.id for d in docs] == ["a.txt", "b.jsonl:1"]
    assert st.files == 2 and st.drops == {"unsupported_file": 1}
    # an explicit source keeps its own kind and counts the other files
    docs, st = read(source="text", path=str(tmp_path))
    assert [d.id for d in docs] == ["a.txt"] and st.drops == {"unsupported_file": 2}


# ---------------------------------------------------------------- item 5: empty results are errors

def test_empty_input_is_an_error_naming_the_file_and_reason(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert l2t(empty, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert str(empty) in err and "no training rows from 0 documents" in err and "empty: 1" in err
    assert not (tmp_path / "out").exists()


def test_input_where_every_record_is_dropped_is_an_error_listing_the_drops(tmp_path, capsys):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"text": \n{"txt": "no text field"}\n{oops}\n')
    corpus = tmp_path / "corpus.yaml"
    corpus.write_text(f"source: auto\npath: {data}\non_bad_record: drop\n")
    out = tmp_path / "out"
    good = tmp_path / "good.txt"
    good.write_text(TEXT)
    assert l2t(good, out, "--val-fraction", "0") == 0  # an earlier output of the same command
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert l2t(corpus, out) == 2
    err = capsys.readouterr().err
    assert "no training rows from 0 documents" in err and "bad_json: 2" in err and "missing_field: 1" in err
    # nothing already written is lost
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_documents_that_give_no_row_are_an_error_with_the_transform_drops(tmp_path, capsys):
    src = tmp_path / "short.jsonl"
    src.write_text("".join(json.dumps({"text": f"Tiny {i}."}) + "\n" for i in range(5)))
    assert l2t(src, tmp_path / "out", "--raw-ratio", "0", "--min-words", "50", "--val-fraction", "0") == 2
    err = capsys.readouterr().err
    assert "no training rows from 5 documents" in err and "short_chunk" in err and "min_num_words" in err


def _name(val: bool, fraction: float) -> str:
    return next(f"doc{i}.txt" for i in range(1000) if is_validation(f"doc{i}.txt", fraction, 0) == val)


def test_one_document_is_never_all_validation(tmp_path, capsys):
    held = tmp_path / _name(True, 0.5)
    held.write_text(TEXT)
    assert l2t(held, tmp_path / "out", "--val-fraction", "0.5") == 2
    err = capsys.readouterr().err
    assert "all 1 documents were held out for validation" in err and "--val-fraction" in err
    assert not (tmp_path / "out").exists()
    assert l2t(held, tmp_path / "out", "--val-fraction", "0") == 0  # the fix the message gives
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["splits"]["train"]["n_rows"] > 0 and m["splits"]["val"]["n_rows"] == 0


def test_reader_drops_reach_l2t_stats_json(tmp_path):
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps({"text": f"Doc {i}. " + TEXT}) + "\n" for i in range(4)) + "{broken\n"
                    + json.dumps({"text": "   "}) + "\n")
    corpus = tmp_path / "c.yaml"
    corpus.write_text(f"path: {data}\non_bad_record: drop\n")
    assert l2t(corpus, tmp_path / "out", "--val-fraction", "0") == 0
    st = json.loads((tmp_path / "out" / "stats.json").read_text())
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert st["read"]["drops"] == {"bad_json": 1, "empty": 1} == m["read"]["drops"]
    assert st["read"]["documents"] == 4 == m["documents"]


MICRO = ["seq_len=32", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200",
         "data.pt.tokens=4224", "data.pt.val_tokens=0", "data.dyck.tokens=1056", "data.dyck.val_tokens=0",
         "data.dyck.params.length=24", "minimal_pairs.per_paradigm=2", "model.preset=micro",
         "train.val=[]"]  # no val splits built, so none scored


def test_reader_drops_reach_prepare_dataset_json(tmp_path, capsys):
    from preschool.corpora import Storybook

    book = Storybook(seed=0)
    data = tmp_path / "stories.jsonl"
    data.write_text("{not json\n" + "".join(json.dumps({"text": book.story(i)}) + "\n" for i in range(300)))
    over = MICRO + ["corpora.storybook.source=jsonl", f"corpora.storybook.path={data}",
                    "corpora.storybook.on_bad_record=drop"]
    out = tmp_path / "run"
    rc = main(["prepare", str(QUICKSTART), "--out", str(out), "--no-progress", *(x for o in over for x in ("--set", o))])
    assert rc == 0, capsys.readouterr().err
    entry = json.loads((out / "data" / "pt" / "dataset.json").read_text())
    assert entry["read"]["drops"] == {"bad_json": 1} and entry["read"]["files"] == 1
    assert "reader drops: bad_json: 1" in capsys.readouterr().out


# ---------------------------------------------------------------- item 7: UTF-16, Parquet, links

@pytest.mark.parametrize("encoding, sign", [("utf-16", "byte-order mark"), ("utf-16-le", "every other position")])
def test_utf16_is_reported_as_utf16_with_the_fix(tmp_path, capsys, encoding, sign):
    f = tmp_path / "u16.txt"
    f.write_bytes(("Hello there. " + TEXT).encode(encoding))
    assert l2t(f, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "looks like UTF-16" in err and sign in err and "iconv -f UTF-16 -t UTF-8" in err and str(f) in err
    for policy in ("error", "replace"):  # replace must not turn it into NUL-interleaved text
        with pytest.raises(DataError, match="looks like UTF-16"):
            read(path=str(f), on_bad_utf8=policy)
    docs, st = read(path=str(tmp_path), on_bad_utf8="drop", glob="*.txt")
    assert docs == [] and st.drops == {"utf16": 1}
    j = tmp_path / "u16.jsonl"
    j.write_bytes((json.dumps({"text": TEXT}) + "\n").encode(encoding))
    with pytest.raises(DataError, match="u16.jsonl: looks like UTF-16"):
        read(path=str(j), on_bad_utf8="replace")


@pytest.mark.parametrize("name", ["data.parquet", "data_without_extension"])
def test_parquet_path_given_to_transform_l2t_is_read_as_parquet(tmp_path, name):
    f = tmp_path / name
    pq.write_table(pa.table({"text": [f"Row {i}. " + TEXT for i in range(6)]}), f)
    assert l2t(f, tmp_path / "out", "--val-fraction", "0") == 0
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["documents"] == 6 and m["read"]["drops"] == {}
    docs, _ = read(path=str(f))
    assert [d.id for d in docs] == [f"{name}:{i}" for i in range(6)] and docs[0].text.startswith("Row 0.")


def test_symlinks_followed_once_broken_ones_counted(tmp_path):
    root, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (root / "real").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "real" / "a.txt").write_text("File a. " + TEXT)
    (elsewhere / "b.txt").write_text("File b. " + TEXT)
    os.symlink(elsewhere, root / "linked_folder")  # a folder outside the tree: read
    os.symlink(root / "real", root / "z_alias")  # the same folder twice: read once, under its first path
    os.symlink(root / "real" / "a.txt", root / "z_link.txt")  # the same file twice: read once
    os.symlink(root / "nowhere.txt", root / "dangling.txt")
    os.symlink(root, root / "real" / "loop")  # a loop back up: not followed again
    docs, st = read(path=str(root))
    assert [d.id for d in docs] == ["linked_folder/b.txt", "real/a.txt"]
    assert st.files == 2 and st.drops == {"duplicate_file": 2, "broken_link": 1}
    assert l2t(root, tmp_path / "out", "--val-fraction", "0") == 0
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["documents"] == 2
