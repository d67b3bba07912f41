"""A config file is read the same way by every command (issue 48): only a regular file, and at most
``config.CONFIG_MAX_BYTES`` of it (``plan`` of a FIFO waited for ever; ``plan /dev/zero`` read without end); a
key written twice in one mapping is refused naming both lines (YAML kept the last silently); a syntax error
is one line ``file:line:column: ...`` (PyYAML printed 3 to 8)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import preschool
from preschool.cli import main
from preschool.config import load_yaml, override_value
from preschool.errors import ConfigError

SRC = Path(preschool.__file__).resolve().parents[1]


def _plan(path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRESCHOOL_PLUGINS": "",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH", "")]))}
    return subprocess.run([sys.executable, "-m", "preschool.cli", "plan", str(path)], capture_output=True, text=True,
                          env=env, timeout=60)  # a hang fails here, not the whole test run


@pytest.mark.parametrize("what", ["fifo", "/dev/zero"])
def test_a_config_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, what):
    if what == "fifo":
        path = tmp_path / "exp.yaml"
        os.mkfifo(path)  # nobody writes it: opening it to read would wait for ever
    else:
        path = Path(what)
    out = _plan(path)
    err = out.stderr.strip()
    assert out.returncode == 2 and len(err.splitlines()) == 1 and str(path) in err and "not a regular file" in err, err


def test_a_config_larger_than_any_config_is_refused(tmp_path, monkeypatch):
    import preschool.config as config

    monkeypatch.setattr(config, "CONFIG_MAX_BYTES", 1000)
    path = tmp_path / "big.yaml"
    path.write_text("name: x\n" + "# padding\n" * 200)
    with pytest.raises(ConfigError, match=r"larger than 1,000 bytes"):
        load_yaml(path)


DUPLICATE = """\
name: dup
train:
  lr: 0.001
  batch_size: 4
  lr: 0.1
"""


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text(DUPLICATE)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}:5:3:" in err and "'lr'" in err and "line 3" in err, err


def test_a_key_written_twice_in_a_set_value_is_refused():
    with pytest.raises(ConfigError, match="'a'.*twice"):
        override_value("{a: 1, a: 2}", "--set x")


@pytest.mark.parametrize("text, where", [("name: x\ntrain: {lr: 1\n", ":3:1:"), ("a: b: c\n", ":1:5:"),
                                         ("name: x\n\tseed: 1\n", ":2:1:")])
def test_a_yaml_syntax_error_is_one_line_with_file_line_and_column(tmp_path, capsys, text, where):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}{where} not valid YAML" in err, err
