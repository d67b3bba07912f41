"""Inputs a user can get wrong end in one line naming the path or field, exit 2, before any work
(issue 22, items 9, 11 and 12): a missing or non-folder ``eval --checkpoint``, a config file that is
not UTF-8 or is a folder, ``export --out .``, a shard manifest without ``row_len``, and a ``val``
list naming a dataset built without a val split."""

import json
from pathlib import Path

import pytest
import yaml

from preschool.cli import main
from preschool.data.shards import ShardSet, ShardWriter
from preschool.errors import ConfigError, DataError
from preschool.experiment import load_experiment

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


def _one_line(capsys, *names) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in names:
        assert str(n) in err, err
    return err


# ---------------------------------------------------------------- item 9: eval --checkpoint

@pytest.mark.parametrize("what", ["missing", "file"])
def test_eval_checkpoint_that_is_not_a_folder_is_one_line(tmp_path, capsys, what):
    ckpt = tmp_path / "step-00000010"
    if what == "file":
        ckpt.write_text("not a checkpoint")
    rc = main(["eval", "--checkpoint", str(ckpt), "--evaluator", "heldout", "--set", f"sources.t={tmp_path}"])
    assert rc == 2
    err = _one_line(capsys, ckpt)
    assert ("no such checkpoint folder" if what == "missing" else "is a file, not a checkpoint folder") in err
    assert sorted(tmp_path.iterdir()) == ([] if what == "missing" else [ckpt])  # nothing written


# ---------------------------------------------------------------- item 11: config files, --out ., manifests

@pytest.mark.parametrize("command", ["run", "prepare", "train", "plan"])
def test_a_config_file_that_is_not_utf8_names_the_file_and_byte(tmp_path, capsys, command):
    cfg = tmp_path / "latin1.yaml"
    cfg.write_bytes("name: caf\u00e9\nseed: 0\n".encode("latin-1"))
    assert main([command, str(cfg), *(["--out", str(tmp_path / "o")] if command != "plan" else [])]) == 2
    err = _one_line(capsys, cfg)
    assert "not UTF-8" in err and "line 1" in err and "0xe9" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["run", "prepare", "train", "plan"])
def test_a_config_path_that_is_a_folder_names_it(tmp_path, capsys, command):
    folder = tmp_path / "experiment.yaml"
    folder.mkdir()
    assert main([command, str(folder), *(["--out", str(tmp_path / "o")] if command != "plan" else [])]) == 2
    assert "is a folder, not a config file" in _one_line(capsys, folder)


@pytest.mark.parametrize("holds", [["keep.txt"], []])
def test_export_out_dot_is_one_line_and_touches_nothing(tmp_path, capsys, monkeypatch, holds):
    data = tmp_path / "ds"
    with ShardWriter(data / "train", 5, 50) as w:
        w.add_rows([[1, 2, 3, 4, 5]])
    work = tmp_path / "work"
    work.mkdir()
    for name in holds:
        (work / name).write_text("mine")
    monkeypatch.chdir(work)
    assert main(["export", str(data), "--format", "numpy", "--out", "."]) == 2
    _one_line(capsys)
    assert sorted(p.name for p in work.iterdir()) == holds and all((work / n).read_text() == "mine" for n in holds)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "work"]  # no temp folder beside it either


@pytest.mark.parametrize("field", ["row_len", "dtype", "vocab_size", "arrays", "shards", "n_rows"])
def test_a_manifest_without_a_required_field_names_the_field(tmp_path, field):
    with ShardWriter(tmp_path / "s", 5, 50) as w:
        w.add_rows([[1, 2, 3, 4, 5]])
    mpath = tmp_path / "s" / "manifest.json"
    man = json.loads(mpath.read_text())
    del man[field]
    mpath.write_text(json.dumps(man))
    with pytest.raises(DataError, match=rf"{mpath}: no {field!r} field"):
        ShardSet(tmp_path / "s")


def test_a_manifest_with_a_malformed_field_names_it(tmp_path):
    with ShardWriter(tmp_path / "s", 5, 50) as w:
        w.add_rows([[1, 2, 3, 4, 5]])
    mpath = tmp_path / "s" / "manifest.json"
    man = json.loads(mpath.read_text())
    man["row_len"] = "five"
    mpath.write_text(json.dumps(man))
    with pytest.raises(DataError, match=rf"{mpath}: field 'row_len'"):
        ShardSet(tmp_path / "s")


def test_cli_names_the_manifest_field(tmp_path, capsys):
    with ShardWriter(tmp_path / "ds" / "train", 5, 50) as w:
        w.add_rows([[1, 2, 3, 4, 5]])
    mpath = tmp_path / "ds" / "train" / "manifest.json"
    man = json.loads(mpath.read_text())
    del man["row_len"]
    mpath.write_text(json.dumps(man))
    assert main(["export", str(tmp_path / "ds"), "--format", "numpy", "--out", str(tmp_path / "o")]) == 2
    _one_line(capsys, mpath, "row_len")


# ---------------------------------------------------------------- item 12: val of a dataset without val/

def test_val_naming_a_dataset_built_without_val_fails_on_load(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_experiment(QUICKSTART, [f"out={tmp_path / 'o'}", "train.val=[pt]", "data.pt.val_tokens=0"])
    assert e.value.field == "train.val" and "data.pt.val_tokens" in str(e.value)
    # an arm's own val list is named where it is written
    raw = yaml.safe_load(QUICKSTART.read_text())
    raw["arms"][1]["train"] = {"val": ["dyck"]}
    raw["data"]["dyck"]["val_tokens"] = 0
    p = tmp_path / "arm_val.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as e:
        load_experiment(p, [f"out={tmp_path / 'o'}", "train.val=[pt]"])
    assert e.value.field == "arms[1].train.val" and "data.dyck.val_tokens" in str(e.value)


def test_val_through_an_alias_is_checked_too(tmp_path):
    raw = yaml.safe_load(QUICKSTART.read_text())
    raw["arms"][0]["datasets"] = {"lang": "pt"}
    raw["arms"][0]["stages"][0]["data"] = "lang"
    raw["arms"][0]["train"] = {"val": ["lang"]}
    raw["data"]["pt"]["val_tokens"] = 0
    p = tmp_path / "alias.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="data.pt.val_tokens") as e:
        load_experiment(p, [f"out={tmp_path / 'o'}", "train.val=[dyck]"])
    assert e.value.field == "arms[0].train.val"


def test_cli_refuses_it_before_building_data(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", str(QUICKSTART), "--set", f"out={out}", "--set", "train.val=[pt]",
                 "--set", "data.pt.val_tokens=0"]) == 2
    _one_line(capsys, "train.val", "data.pt.val_tokens")
    assert not out.exists()
