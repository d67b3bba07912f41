import json

from preschool.cli import main
from preschool.data.shards import ShardSet

DOC = ("The boat left the harbour at dawn and the sailors sang. Nobody on the shore could hear them. "
       "By noon the wind had turned, and the sea grew rough. The captain ordered the sails down. ")


def _corpus(tmp_path):
    src = tmp_path / "corpus.jsonl"
    src.write_text("".join(json.dumps({"text": f"Day {i}. " + DOC * (1 + i % 4)}) + "\n" for i in range(30)))
    return src


def test_transform_l2t_end_to_end(tmp_path, capsys):
    src = _corpus(tmp_path)
    out = tmp_path / "out"
    rc = main(["transform", "l2t", "--input", str(src), "--out", str(out), "--seq-len", "127",
               "--vocab-size", "300", "--min-words", "10", "--scenario", "shared", "--val-fraction", "0.1"])
    assert rc == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["documents"] == 30 and m["config"]["scenario"] == "shared"
    assert m["config"]["l2t"]["chunk_tokens"] == 127 // 4
    train = ShardSet(out / "train")
    assert train.row_len == 128 and len(train) == m["splits"]["train"]["n_rows"] > 0
    assert "train:" in capsys.readouterr().out
    # a given tokenizer is reused as is
    rc = main(["transform", "l2t", "--input", str(src), "--out", str(tmp_path / "o2"), "--seq-len", "127",
               "--tokenizer", str(out / "tokenizer"), "--tasks", "half,one", "--raw-ratio", "0", "--min-words", "10"])
    assert rc == 0
    st = json.loads((tmp_path / "o2" / "stats.json").read_text())["train"]
    assert set(st["documents_by_task"]) <= {"half", "one"} and "raw" not in st["documents_by_route"]


def test_preview_prints_each_task(tmp_path, capsys):
    rc = main(["transform", "l2t", "--input", str(_corpus(tmp_path)), "--preview", "1", "--min-words", "5",
               "--tasks", "space", "typo"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "===== space (1 samples) =====" in out and "===== typo (1 samples) =====" in out


def test_bad_task_is_a_clean_error(tmp_path, capsys):
    rc = main(["transform", "l2t", "--input", str(_corpus(tmp_path)), "--out", str(tmp_path / "x"),
               "--tasks", "spcae"])
    assert rc == 2
    assert "did you mean 'space'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
