"""Bad command-line and config input ends in a one-line error naming the key, never a traceback
(issue 11, item 6): non-YAML ``--set`` values, impossible ``--set`` paths, no ``val:`` list."""

import re
from pathlib import Path

import pytest
import yaml

from preschool.cli import main
from preschool.config import apply_overrides
from preschool.errors import ConfigError
from preschool.experiment import load_experiment

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


@pytest.mark.parametrize("raw, value", [
    ("glob=**/*", "**/*"),  # the documented default glob is not valid YAML (an alias '*')
    ("name=a: b: c", "a: b: c"),
    ("name=[1, 2", "[1, 2"),
    ("n=3", 3), ("flag=true", True), ("xs=[1, 2]", [1, 2]),  # valid YAML still parses
])
def test_set_values_that_are_not_yaml_are_strings(raw, value):
    key = raw.split("=", 1)[0]
    assert apply_overrides({}, [raw])[key] == value


def test_set_glob_reaches_the_corpus_config(tmp_path):
    from preschool.config import from_dict
    from preschool.corpora import CorpusConfig

    data = apply_overrides({"source": "text", "path": str(tmp_path)}, ["glob=**/*.txt"])
    assert from_dict(CorpusConfig, data).glob == "**/*.txt"


@pytest.mark.parametrize("override, key, says", [
    ("arms.5.name=x", "arms.5.name", r"arms is a list of \d item\(s\): use an index 0\.\.\d, not '5'"),
    ("arms.first.name=x", "arms.first.name", "not 'first'"),
    ("seq_len.x=1", "seq_len.x", r"seq_len is a single value \(\d+\), so it has no 'x' inside"),
    ("arms.0.stages.0.tokens.deep=1", "arms.0.stages.0.tokens.deep", "is a single value"),
])
def test_impossible_set_paths_name_the_key(tmp_path, override, key, says):
    with pytest.raises(ConfigError) as e:
        load_experiment(QUICKSTART, [f"out={tmp_path}", override])
    assert e.value.field == key and re.search(says, str(e.value))


def test_cli_prints_one_line_for_a_bad_set(tmp_path, capsys):
    assert main(["run", str(QUICKSTART), "--set", "arms.5.name=x", "--set", f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "arms.5.name" in err[0]
    assert not (tmp_path / "o").exists()


def test_experiment_without_val_list_is_valid(tmp_path):
    data = yaml.safe_load(QUICKSTART.read_text())
    del data["train"]["val"]
    p = tmp_path / "minimal.yaml"
    p.write_text(yaml.safe_dump(data))
    exp = load_experiment(p, [f"out={tmp_path / 'o'}"])
    # no list: every dataset a stage trains on that has a val/ split is scored (the TrainConfig default)
    assert exp.records[0].train.val is None
    with pytest.raises(ConfigError, match=r"no dataset (or part )?named 'nope'") as e:  # named where written
        load_experiment(p, [f"out={tmp_path / 'o'}", "train.val=[nope]"])
    assert e.value.field == "train.val"


def test_generate_set_takes_non_yaml_text_as_a_string(capsys):
    # a value that is not YAML reaches the generator's own validation instead of a ScannerError
    assert main(["generate", "shuffle_dyck", "--preview", "1", "--set", "k=*"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "k" in err[0] and "'*'" in err[0]


# Issue 48: numbers on the command line that make no sense end in one line naming the option, never a traceback
# (a seed numpy refuses, an id offset past any vocabulary) nor an exit 0 that did nothing (a negative count).
@pytest.mark.parametrize("argv, option", [
    (["generate", "shuffle_dyck", "--preview", "-1"], "--preview"),
    (["transform", "l2t", "--input", "x", "--preview", "-1"], "--preview"),
    (["corpus", "stories", "--n", "-1"], "--n"),
    (["corpus", "stories", "--start", "-1"], "--start"),
    (["corpus", "stories", "--seed", "-1"], "--seed"),
    (["corpus", "pairs", "OUT", "--seed", "-1"], "--seed"),
    (["corpus", "pairs", "OUT", "--per-paradigm", "-1"], "--per-paradigm"),
])
def test_a_negative_count_or_seed_is_one_line_naming_the_option(tmp_path, one_line_error, argv, option):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    one_line_error(option, "-1")
    assert not (tmp_path / "out").exists()


def test_a_reserved_offset_past_any_vocabulary_is_one_line(tmp_path, one_line_error):
    assert main(["generate", "shuffle_dyck", "--tokens", "1000", "--seq-len", "32", "--reserved-offset",
                 "9223372036854775807", "--out", str(tmp_path / "g")]) == 2
    one_line_error("reserved_offset", "2^32")
    assert not (tmp_path / "g").exists()


# Issue 48, item 14: one rule for relative paths. An experiment's corpus paths resolved against the working
# folder but its `plugins:` against the YAML's folder, and `preschool train` resolved its datasets against the
# YAML's folder (so the config.yaml a run records, whose paths are the working folder's, could not drive a rerun
# from elsewhere). Every relative path a command is given resolves against the folder it runs in.

def test_plugins_in_an_experiment_resolve_against_the_working_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "exp").mkdir()
    (tmp_path / "parts.py").write_text("PARTS = 1\n")  # beside the working folder, not beside the YAML
    exp = tmp_path / "exp" / "exp.yaml"
    data = yaml.safe_load(QUICKSTART.read_text())
    exp.write_text(yaml.safe_dump({**data, "plugins": ["./parts.py"]}))
    monkeypatch.chdir(tmp_path)
    cfg = load_experiment(exp).cfg
    assert cfg.plugins == [str((tmp_path / "parts.py").resolve())]


def test_train_resolves_its_datasets_against_the_working_folder(tmp_path, monkeypatch, datasets):
    from preschool.commands.train import load_run_config

    cfg = tmp_path / "configs" / "train.yaml"
    cfg.parent.mkdir()
    cfg.write_text(yaml.safe_dump({"train": {"model": {"preset": "micro"}, "batch_size": 4,
                                             "stages": [{"name": "pt", "data": "text", "tokens": 64}]},
                                   "datasets": {"text": str(datasets["text"].relative_to(tmp_path))},
                                   "tokenizer": "tok"}))
    monkeypatch.chdir(tmp_path)
    _, ds, tok = load_run_config(cfg)
    assert ds == {"text": datasets["text"].resolve()} and tok == (tmp_path / "tok").resolve()
