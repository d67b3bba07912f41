import json

from preschool.corpora import PARADIGMS
from preschool.cli import main as cli_main


def main(argv):
    return cli_main(["corpus", *argv])


def test_stories(capsys):
    assert main(["stories", "--seed", "1", "--n", "2", "--start", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [x.split("]")[0] for x in out] == ["[storybook:5", "[storybook:6"]


def test_read_and_pairs(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("one\n\ntwo\n", encoding="utf-8")
    assert main(["read", "--set", f"path={tmp_path}", "--set", "split_documents=paragraphs", "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "--- a.txt#0" in out
    stats = json.loads(out[out.index("{\n"):])
    assert stats["documents"] == 1 and stats["files"] == 1
    assert main(["read", "--set", "source=txt"]) == 2
    assert "did you mean 'text'" in capsys.readouterr().err
    assert main(["pairs", str(tmp_path / "mp"), "--per-paradigm", "3"]) == 0
    assert len(list((tmp_path / "mp").glob("*.jsonl"))) == len(PARADIGMS)
