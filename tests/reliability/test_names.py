"""Names that become paths (issue 34, item 1): a dataset, arm or experiment name is one plain folder name, never
a path that leaves `--out` (`../../victim`), the folder itself (`.`), a name `prepare` writes beside the datasets
(`tokenizer`, `minimal_pairs`, `manifest.json`), a hidden name (our temp folders and locks), or a name holding
NUL, a slash or a line break. Each is refused in one line naming the field before anything is written, and a
folder outside `--out` that such a name pointed at is left as it was."""

import json

import pytest

from preschool.cli import main
from preschool.experiment import load_experiment

# YAML double-quoted scalars, so NUL and a line break can be written
BAD = ['"../../victim"', '"."', '".."', '"tokenizer"', '"minimal_pairs"', '"manifest.json"', '".hidden"',
       '"a\\0b"', '"a\\nb"', '"a/b"', '""', '"' + "x" * 300 + '"']


def _experiment(exp, name="n", dataset="extra", arm="a"):
    """The tiny experiment (conftest) named ``name``, with a second dataset ``dataset`` and its arm named ``arm``."""
    text = exp.read_text()
    for old, new in (("name: locktest", f"name: {name}"), ("- name: a\n", f"- name: {arm}\n"),
                     ("data:\n", f"data:\n  {dataset}: {{corpus: txt, tokens: 600}}\n")):
        assert old in text
        text = text.replace(old, new)
    exp.write_text(text)
    return exp


@pytest.fixture
def victim(tmp_path):
    """A user's folder where ``data: {../../victim: ...}`` under ``<tmp>/out`` would land."""
    v = tmp_path / "victim"
    v.mkdir()
    (v / "thesis.txt").write_text("years of work\n")
    return v


CASES = ([("dataset", bad, "prepare", "data") for bad in BAD]
         + [("arm", bad, "run", "arms[0].name") for bad in ['"."', '".."', '"a\\0b"', '".hidden"', '"a\\nb"',
                                                             '"../../victim"']])


@pytest.mark.parametrize("kind, bad, command, field", CASES)
def test_a_name_that_is_not_one_plain_folder_name_is_refused(tiny_experiment, tmp_path, victim, kind, bad, command,
                                                             field, capsys, one_line_error):
    exp = _experiment(tiny_experiment, **{kind: bad})
    out = tmp_path / "out"
    assert main([command, str(exp), "--out", str(out), "--no-progress"]) == 2
    one_line_error(field)
    assert not out.exists()
    assert (victim / "thesis.txt").read_text() == "years of work\n"
    assert sorted(p.name for p in victim.iterdir()) == ["thesis.txt"]


@pytest.mark.parametrize("bad", ['"../../victim"', '".."', '"a\\0b"'])
def test_an_experiment_name_becomes_no_path_outside_runs(tiny_experiment, bad):
    from preschool.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_experiment(_experiment(tiny_experiment, name=bad))
    assert e.value.field == "name"


def test_plain_names_still_prepare(tiny_experiment, tmp_path, capsys):
    """Dots, dashes and non-ASCII letters inside a name are fine: it is one folder name."""
    exp = _experiment(tiny_experiment, name="n-1.0", dataset='"extra.v2-ü"', arm="a.b")
    out = tmp_path / "out"
    assert main(["prepare", str(exp), "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "data" / "extra.v2-ü" / "dataset.json").read_text())["splits"]["train"]["n_rows"] > 0
