"""Two `prepare` / `run` processes on one output folder (issue 11, item 7): the second stops and names the
first (pid, host, start time, command); a lock left by a dead process on this host is taken over."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import preschool

from preschool.cli import main
from preschool.errors import DataError
from preschool.lock import LOCK_NAME, output_lock

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
SRC = Path(preschool.__file__).resolve().parents[1]  # the code under test, also in child processes

HOLD = """
import sys, time
from pathlib import Path
from preschool.lock import output_lock
with output_lock(sys.argv[1], "preschool prepare examples/quickstart.yaml --set seed=1"):
    Path(sys.argv[2]).write_text("held")
    time.sleep(60)
"""


@pytest.fixture
def held(tmp_path):
    """A separate process holding the lock on ``tmp_path / 'run'`` (as a running prepare does)."""
    out, ready = tmp_path / "run", tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(out), str(ready)], env=env)
    try:
        for _ in range(600):
            if ready.exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), "the holder did not take the lock"
        yield out, p
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("command", ["prepare", "run"])
def test_second_process_on_the_same_out_stops_naming_the_first(held, capsys, command):
    out, holder = held
    rc = main([command, str(QUICKSTART), "--out", str(out), "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert f"pid {holder.pid} on {socket.gethostname()}" in err and "started 20" in err
    assert "preschool prepare examples/quickstart.yaml --set seed=1" in err and "another --out" in err
    assert not (out / "data").exists()  # nothing was written into the other process's folder


def test_lock_is_released_when_the_holder_dies_and_after_a_normal_end(held, tmp_path):
    out, holder = held
    holder.kill()
    holder.wait()
    with output_lock(out, "second") as path:  # the kernel dropped the dead holder's flock
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert not (out / LOCK_NAME).exists()
    with output_lock(out, "third"):
        pass


def test_stale_lock_of_a_dead_pid_is_taken_over_with_a_warning(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(),
                                             "started": "2026-01-01T00:00:00", "command": "preschool run old.yaml"}))
    with output_lock(out, "new"):
        assert json.loads((out / LOCK_NAME).read_text())["command"] == "new"
    err = capsys.readouterr().err
    assert "taking over the stale lock" in err and f"pid {dead.pid}" in err and "preschool run old.yaml" in err


def test_lock_from_another_host_is_not_taken_over(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 1, "host": "elsewhere.example", "started": "x", "command": "c"}))
    with pytest.raises(DataError, match=r"another host .*elsewhere\.example.*delete .*\.preschool\.lock"):
        with output_lock(out, "new"):
            pass
