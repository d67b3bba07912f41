import importlib
import os
import subprocess
import sys

import pytest

from preschool.cli import COMMANDS, main


@pytest.mark.parametrize("command", COMMANDS.names())
def test_every_subcommand_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: preschool {command}") and len(out.splitlines()) > 5


def test_bad_config_is_a_one_line_error_naming_the_field(tmp_path, capsys):
    cfg = tmp_path / "x.yaml"
    cfg.write_text("name: x\narms: [{name: a, stages: [{name: s, data: d, tokens: -1}]}]\n")
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("preschool run: error: arms[0].stages[0].tokens: must be > 0")
    assert not (tmp_path / "runs").exists()


def test_missing_config_file(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err


def _modules_after(argv: list[str], package: str | None = "preschool") -> list[str]:
    """The modules of ``package`` (None: every module) a fresh interpreter has imported after ``main(argv)``,
    which must succeed (help exits 0); no plug-in from the environment joins."""
    code = ("import contextlib, io, sys\nfrom preschool.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        assert main({argv!r}) == 0\n    except SystemExit as e:\n        assert e.code == 0, e.code\n"
            f"print(' '.join(sorted(m for m in sys.modules if {package!r} in (None, m.split('.')[0]))))\n")
    env = {**os.environ, "PRESCHOOL_PLUGINS": ""}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.split()


def test_help_imports_no_command_module_and_shows_each_commands_help_line(capsys, monkeypatch):
    # the command registry (it lists commands/ and reads each module's HELP from its source) and the extension
    # package (which may bring commands), no command's module
    assert _modules_after(["--help"]) == sorted(["preschool", "preschool.cli", "preschool.compartments",
                                                 "preschool.errors", "preschool.plugins", "preschool.registry"])
    # wide enough that no help line wraps (3.13's argparse wraps "MP-Struct" at its hyphen in 80 columns)
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for entry in COMMANDS:
        assert f"{entry.name} {' '.join(importlib.import_module(entry.cls.module).HELP.split())}" in out


def test_a_command_imports_its_own_module_not_the_others():
    loaded = set(_modules_after(["plan", "--help"]))
    assert "preschool.commands.plan" in loaded
    assert loaded.isdisjoint({e.cls.module for e in COMMANDS} - {"preschool.commands.plan"})


# What `--help` and the listings must never load: the model and data stacks the parts use when they run
# (each imports them inside the function that needs them; CONTRIBUTING "Where a new part goes").
HEAVY = ("torch", "transformers", "safetensors", "datasets", "tokenizers", "lm_eval", "datatrove", "pyarrow",
         "pandas", "scipy", "sklearn", "matplotlib", "tqdm", "blingfire")


@pytest.mark.parametrize("argv", [["--help"], ["generate", "--list"], ["eval", "--list"]])
def test_help_and_the_part_listings_import_no_heavy_library(argv):
    """Listing reads each part's name, origin, docstring and config; none of that needs torch & co."""
    tops = {m.split(".")[0] for m in _modules_after(argv, package=None)}
    assert "preschool" in tops and sorted(tops.intersection(HEAVY)) == []
