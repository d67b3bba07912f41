"""A JSON line whose text holds a lone surrogate (``"\\ud800 abc"``) is a bad record (issue 34, item 8).

JSON escapes may spell half of a UTF-16 pair alone; Python's ``json`` accepts it, but no UTF-8
writer (the tokenizer, a shard, a manifest) can hold it. It is counted as ``bad_json`` under
``on_bad_record: drop`` and stops the read with one line naming the file and line under ``error``,
in ``prepare`` and in ``transform l2t`` alike.
"""

import json

import pytest

from preschool.cli import main
from preschool.config import from_dict
from preschool.corpora import CorpusConfig, ReadStats, iter_documents
from preschool.errors import DataError

TEXT = ("The boat left the harbour at dawn and the sailors sang. Nobody on the shore heard them. "
        "By noon the wind had turned and the sea grew rough. The captain took the sails down. ") * 3


def l2t(inp, out, *extra):
    return main(["transform", "l2t", "--input", str(inp), "--out", str(out),
                 "--seq-len", "127", "--vocab-size", "300", "--min-words", "10", *extra])

LONE = '{"text": "\\ud800 abc"}'  # the JSON text as a file holds it: an escape, valid UTF-8 bytes


def _corpus(path, lines=40):
    """A JSONL corpus of ``lines`` good records with the lone-surrogate one as line 3."""
    rows = [json.dumps({"text": f"Story {i}. " + TEXT}) for i in range(lines)]
    rows.insert(2, LONE)
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("where", ["text", "id"])
def test_reader_counts_a_lone_surrogate_as_a_bad_record(tmp_path, where):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"text": TEXT, "id": "a"}) + "\n"
                 + ('{"text": "x \\udc00 y", "id": "b"}' if where == "text" else '{"text": "fine", "id": "\\ud83d"}')
                 + "\n" + json.dumps({"text": TEXT, "id": "c"}) + "\n")
    st = ReadStats()
    cfg = {"source": "jsonl", "path": str(f), "id_field": "id"}
    docs = list(iter_documents(from_dict(CorpusConfig, {**cfg, "on_bad_record": "drop"}), st))
    assert [d.id for d in docs] == ["a", "c"] and st.drops == {"bad_json": 1}
    with pytest.raises(DataError, match=rf"{f}:2: .*surrogate.*on_bad_record: drop"):
        list(iter_documents(from_dict(CorpusConfig, {**cfg, "on_bad_record": "error"}), ReadStats()))


def test_a_surrogate_pair_is_one_character_not_a_bad_record(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"text": "smile \\ud83d\\ude00"}\n')
    st = ReadStats()
    docs = list(iter_documents(from_dict(CorpusConfig, {"source": "jsonl", "path": str(f)}), st))
    assert [d.text for d in docs] == ["smile \U0001F600"] and st.drops == {}


def test_prepare_drops_a_lone_surrogate_record(tmp_path, tiny_experiment, capsys):
    corpus = _corpus(tmp_path / "c.jsonl", lines=400)
    assert main(["prepare", str(tiny_experiment), "--out", str(tmp_path / "o"), "--no-progress",
                 "--set", f"corpora.txt={{source: jsonl, path: {corpus}, on_bad_record: drop}}"]) == 0, \
        capsys.readouterr().err
    record = json.loads((tmp_path / "o" / "data" / "pt" / "dataset.json").read_text())
    assert record["read"]["drops"] == {"bad_json": 1}


def test_transform_l2t_names_the_line_or_drops_it(tmp_path, capsys):
    corpus = _corpus(tmp_path / "c.jsonl")
    assert l2t(corpus, tmp_path / "strict", "--val-fraction", "0") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{corpus}:3" in err and "surrogate" in err, err
    assert not (tmp_path / "strict").exists()

    spec = tmp_path / "corpus.yaml"
    spec.write_text(json.dumps({"source": "jsonl", "path": str(corpus), "on_bad_record": "drop"}))
    assert l2t(spec, tmp_path / "dropped", "--val-fraction", "0") == 0, capsys.readouterr().err
    st = json.loads((tmp_path / "dropped" / "stats.json").read_text())
    assert st["read"]["drops"] == {"bad_json": 1} and st["read"]["documents"] == 40
