"""What a command prints cannot end it in a traceback (issue 48): a reader that closed the pipe (``| head -1``)
ends the command quietly, as it ends ``cat``; a full standard output (``> /dev/full``) is one line; a name
standard output's encoding cannot hold (``PYTHONIOENCODING=ascii``) is printed escaped; and a part that
calls ``sys.exit`` while a command runs is named, never a silent exit status."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import preschool

SRC = Path(preschool.__file__).resolve().parents[1]


def _preschool(*args: str, stdout=subprocess.PIPE, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PRESCHOOL_PLUGINS": "", "HF_HUB_OFFLINE": "1", **(env or {}),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH", "")]))}
    return subprocess.run([sys.executable, "-m", "preschool.cli", *args], stdout=stdout, stderr=subprocess.PIPE,
                          env=full, cwd=cwd, text=True, timeout=300)


@pytest.mark.parametrize("args", [("generate", "--list"), ("eval", "--list"), ("corpus", "stories", "--n", "300")])
def test_a_closed_pipe_ends_the_command_quietly(args):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line (`| head -1` after its line)
    try:
        out = _preschool(*args, stdout=write_end)
    finally:
        os.close(write_end)
    assert out.returncode == 141 and out.stderr == "", out.stderr  # 128 + SIGPIPE, as `cat` ends


def test_a_full_standard_output_is_one_line():
    with open("/dev/full", "w") as full:
        out = _preschool("generate", "--list", stdout=full)
    assert out.returncode == 2
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "standard output" in err and "No space left on device" in err, err


def test_a_name_the_output_encoding_cannot_hold_is_printed_escaped(tiny_experiment, tmp_path):
    exp = tiny_experiment.read_text().replace("name: a\n", "name: café\n")
    tiny_experiment.write_text(exp, encoding="utf-8")
    out = _preschool("run", str(tiny_experiment), "--out", str(tmp_path / "out"), "--no-progress",
                     env={"PYTHONIOENCODING": "ascii"})
    assert out.returncode == 0, out.stderr
    assert "arm caf\\xe9 seed 0" in out.stdout and (tmp_path / "out" / "arms" / "café" / "seed0" / "DONE").exists()


EXITER = '''
import sys
from dataclasses import dataclass

import numpy as np

from preschool.synthetic.base import GENERATORS, Generator, GeneratorConfig, Item


@dataclass
class ExitConfig(GeneratorConfig):
    length: int = 8


@GENERATORS.register("exiter", config=ExitConfig)
class Exiter(Generator):
    """Ends the process at its fourth item."""

    @property
    def vocab_size(self):
        return self.cfg.length

    def item(self, index):
        if index == 3:
            sys.exit(4)
        return Item(np.arange(self.cfg.length, dtype=np.int64), np.ones(self.cfg.length, dtype=bool), {})
'''


def test_a_part_calling_sys_exit_while_the_command_runs_is_named(tmp_path):
    plugin = tmp_path / "exiter.py"
    plugin.write_text(EXITER)
    out = _preschool("generate", "exiter", "--plugins", str(plugin), "--tokens", "100", "--seq-len", "8",
                     "--out", str(tmp_path / "o"))
    assert out.returncode == 2
    lines = [ln for ln in out.stderr.strip().splitlines() if "loaded plug-in" not in ln]
    assert len(lines) == 1 and "sys.exit(4)" in lines[0] and f"{plugin}:" in lines[0], out.stderr
    assert not (tmp_path / "o").exists()
