"""Names that become paths (issue 34, item 1): a dataset, arm or experiment name is one plain folder name, never
a path that leaves `--out` (`../../victim`), the folder itself (`.`), a name `prepare` writes beside the datasets
(`tokenizer`, `minimal_pairs`, `manifest.json`), a hidden name (our temp folders and locks), or a name holding
NUL, a slash or a line break. Each is refused in one line naming the field before anything is written, and a
folder outside `--out` that such a name pointed at is left as it was."""

import json

import pytest

from preschool.cli import main
from preschool.experiment import load_experiment

EXP = """
name: {name}
seq_len: 16
corpora:
  txt: {{source: text, path: {corpus}, split_documents: lines}}
tokenizer: {{kind: train, vocab_size: 300, sample_documents: 100}}
data:
  pt: {{corpus: txt, tokens: 2000, val_tokens: 64}}
  {dataset}: {{corpus: txt, tokens: 600}}
minimal_pairs: {{per_paradigm: 0}}
model: {{preset: micro}}
train: {{batch_size: 4, val: [pt]}}
arms:
  - name: {arm}
    stages: [{{name: pt, data: pt, tokens: 256}}]
"""

# YAML double-quoted scalars, so NUL and a line break can be written
BAD = ['"../../victim"', '"."', '".."', '"tokenizer"', '"minimal_pairs"', '"manifest.json"', '".hidden"',
       '"a\\0b"', '"a\\nb"', '"a/b"', '""', '"' + "x" * 300 + '"']


def _experiment(tmp_path, name="n", dataset="extra", arm="a"):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"the cat sat on the mat number {i} and ran" for i in range(300)))
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(name=name, corpus=corpus, dataset=dataset, arm=arm))
    return exp


@pytest.fixture
def victim(tmp_path):
    """A user's folder where ``data: {../../victim: ...}`` under ``<tmp>/out`` would land."""
    v = tmp_path / "victim"
    v.mkdir()
    (v / "thesis.txt").write_text("years of work\n")
    return v


@pytest.mark.parametrize("bad", BAD)
def test_a_dataset_name_that_is_not_one_plain_folder_name_is_refused(tmp_path, victim, bad, capsys, one_line_error):
    exp = _experiment(tmp_path, dataset=bad)
    out = tmp_path / "out"
    assert main(["prepare", str(exp), "--out", str(out), "--no-progress"]) == 2
    one_line_error("data")
    assert not out.exists()
    assert (victim / "thesis.txt").read_text() == "years of work\n"
    assert sorted(p.name for p in victim.iterdir()) == ["thesis.txt"]


@pytest.mark.parametrize("bad", ['"."', '".."', '"a\\0b"', '".hidden"', '"a\\nb"'])
def test_an_arm_name_that_is_not_one_plain_folder_name_is_refused(tmp_path, bad, capsys, one_line_error):
    exp = _experiment(tmp_path, arm=bad)
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), "--no-progress"]) == 2
    one_line_error("arms[0].name")
    assert not out.exists()


@pytest.mark.parametrize("bad", ['"../../victim"', '".."', '"a\\0b"'])
def test_an_experiment_name_becomes_no_path_outside_runs(tmp_path, bad):
    from preschool.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_experiment(_experiment(tmp_path, name=bad))
    assert e.value.field == "name"


def test_plain_names_still_prepare(tmp_path, capsys):
    """Dots, dashes and non-ASCII letters inside a name are fine: it is one folder name."""
    exp = _experiment(tmp_path, name="n-1.0", dataset='"extra.v2-ü"', arm="a.b")
    out = tmp_path / "out"
    assert main(["prepare", str(exp), "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "data" / "extra.v2-ü" / "dataset.json").read_text())["splits"]["train"]["n_rows"] > 0
