import json
import subprocess
import sys

import pytest
import yaml

from preschool.cli import main
from preschool.errors import ConfigError
from preschool.commands.train import load_run_config


def write_yaml(tmp_path, datasets, **train):
    cfg = {"train": {"model": {"preset": "micro", "overrides": {"hidden_size": 32}}, "batch_size": 4,
                     "log_every": 1, "progress": False,
                     "stages": [{"name": "pt", "data": "text", "tokens": 4 * 16 * 3}], **train},
           "datasets": {k: str(v.relative_to(tmp_path)) for k, v in datasets.items()}}
    p = tmp_path / "run.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_cli_trains_and_resolves_paths(tmp_path, datasets, capsys, monkeypatch):
    p = write_yaml(tmp_path, datasets)
    monkeypatch.chdir(tmp_path)  # relative paths are the working folder's
    assert main(["train", str(p), "--out", str(tmp_path / "out"), "--set", "lr=2e-3",
                 "--set", "train.stages.0.tokens=128"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 2
    saved = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert saved["train"]["lr"] == 2e-3 and saved["datasets"]["text"] == str(datasets["text"])
    # rerun on a finished run returns at once; the saved config.yaml can drive a rerun too
    assert main(["train", str(tmp_path / "out" / "config.yaml"), "--out", str(tmp_path / "out")]) == 0


def test_cli_errors_name_field(tmp_path, datasets, capsys):
    p = write_yaml(tmp_path, datasets)
    assert main(["train", str(p), "--out", str(tmp_path / "o"), "--set", "train.stages.0.tokens=-1"]) == 2
    assert "train.stages[0].tokens" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="bogus"):
        load_run_config(p, ["bogus.x=1"])  # un-prefixed keys go under train:, so train.bogus is unknown

def test_cli_help_lists_yaml_keys():
    out = subprocess.run([sys.executable, "-m", "preschool.cli", "train", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "datasets:" in out.stdout and "--set" in out.stdout
