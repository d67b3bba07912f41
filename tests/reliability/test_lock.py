"""Two `prepare` / `run` processes on one output folder (issue 11, item 7): a second one of the same config
waits for the first and reuses what it built; one of another config (or a holder without a config key) stops
and names the first (pid, host, start time, command); a lock left by a dead process on this host is taken over."""

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


# Prepares the tiny experiment (as `preschool prepare` does: experiment.prepare_experiment under the output lock,
# its config key recorded), then keeps the lock until told to let go.
HOLD_PREPARED = """
import sys, time
from pathlib import Path
from preschool.experiment import load_experiment, prepare_experiment as prepare
from preschool.lock import config_key, output_lock
exp = load_experiment(sys.argv[1], [f"out={sys.argv[2]}"])
with output_lock(exp.out_dir, "holder of the tiny experiment", key=config_key(exp.cfg)):
    prepare(exp, progress=False)  # takes the same lock again: re-entrant within a process
    Path(sys.argv[3]).write_text("prepared")
    while not Path(sys.argv[4]).exists():
        time.sleep(0.05)
"""


def _env():
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "HF_HUB_OFFLINE": "1"}


def _wait_for(cond, what: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def prepared_holder(tmp_path, tiny_experiment):
    """(experiment yaml, out, holder process, release file): a process that prepared ``out`` and still holds it."""
    exp = tiny_experiment
    out, ready, release = tmp_path / "out", tmp_path / "ready", tmp_path / "release"
    p = subprocess.Popen([sys.executable, "-c", HOLD_PREPARED, str(exp), str(out), str(ready), str(release)],
                         env=_env())
    try:
        _wait_for(lambda: ready.exists() or p.poll() is not None, "the holder to prepare")
        assert ready.exists(), "the holder did not prepare"
        yield exp, out, p, release
    finally:
        release.write_text("go")
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_same_config_waits_for_the_holder_then_reuses_what_it_prepared(prepared_holder, tmp_path):
    exp, out, holder, release = prepared_holder
    built = out / "data" / "pt" / "dataset.json"
    before = built.stat()
    err = tmp_path / "second.err"
    # --workers changes how prepare runs, not what it writes: still the same config
    with open(err, "w") as fh:
        second = subprocess.Popen([sys.executable, "-m", "preschool.cli", "prepare", str(exp), "--out", str(out),
                                   "--workers", "2", "--no-progress"], env=_env(), stdout=subprocess.PIPE,
                                  stderr=fh, text=True)
    try:
        _wait_for(lambda: f"waiting for pid {holder.pid} on {socket.gethostname()}" in err.read_text()
                  or second.poll() is not None, "the second prepare to wait")
        assert second.poll() is None, err.read_text()  # still waiting while the holder holds the lock
        assert "holder of the tiny experiment" in err.read_text()
        release.write_text("go")
        out_text, _ = second.communicate(timeout=120)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert second.returncode == 0, err.read_text()
    assert "data pt: up to date" in out_text and "building" not in out_text  # reused, not rebuilt
    after = built.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not (out / LOCK_NAME).exists()


def test_another_config_into_the_same_out_stops_naming_the_holder(prepared_holder, capsys):
    exp, out, holder, release = prepared_holder
    for command, change in (("prepare", "seed=1"), ("run", "train.lr=0.01")):
        rc = main([command, str(exp), "--out", str(out), "--set", change, "--no-progress"])
        assert rc == 2, command
        err = capsys.readouterr().err
        assert f"pid {holder.pid} on {socket.gethostname()}" in err and "holder of the tiny experiment" in err
        assert "with another config" in err and "another --out" in err
    assert holder.poll() is None  # the holder was not disturbed


# Issue 48, item 1: a lock is a regular file preschool creates; anything else at its path is refused in one line
# and left as it was (a link is never followed: the command would overwrite the file it points to).

def _generate(out: Path) -> list[str]:
    return ["generate", "shuffle_dyck", "--tokens", "1000", "--seq-len", "32", "--out", str(out)]


def test_a_lock_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path, one_line_error):
    victim = tmp_path / "victim.json"
    victim.write_text("[1, 2, 3]\n")
    link = tmp_path / f".o{LOCK_NAME}"
    link.symlink_to(victim)
    assert main(_generate(tmp_path / "o")) == 2
    one_line_error(str(link), "symbolic link")
    assert victim.read_text() == "[1, 2, 3]\n" and link.is_symlink()
    assert not (tmp_path / "o").exists()


def test_a_run_lock_that_is_a_symlink_is_refused_before_anything_is_written(tiny_experiment, tmp_path,
                                                                           one_line_error):
    victim = tmp_path / "victim.json"
    victim.write_text("[1, 2, 3]\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(victim)
    for command in ("prepare", "run"):
        assert main([command, str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2, command
        one_line_error(str(out / LOCK_NAME), "symbolic link")
    assert victim.read_text() == "[1, 2, 3]\n" and sorted(p.name for p in out.iterdir()) == [LOCK_NAME]


def test_a_link_to_nothing_is_not_created_through(tmp_path):
    link = tmp_path / "run" / LOCK_NAME
    link.parent.mkdir()
    link.symlink_to(tmp_path / "made-by-the-link")
    with pytest.raises(DataError, match="symbolic link"):
        with output_lock(tmp_path / "run", "new"):
            pass
    assert not (tmp_path / "made-by-the-link").exists()


def test_a_lock_path_that_is_a_folder_is_one_line(tmp_path, one_line_error):
    (tmp_path / f".o{LOCK_NAME}").mkdir()
    assert main(_generate(tmp_path / "o")) == 2
    one_line_error(f".o{LOCK_NAME}", "is a folder")


def test_a_lock_path_holding_ordinary_text_is_named_as_such_and_kept(tmp_path, one_line_error):
    notes = tmp_path / f".o{LOCK_NAME}"
    notes.write_text("hello\n")
    assert main(_generate(tmp_path / "o")) == 2
    err = one_line_error(str(notes), "not a preschool lock")
    assert "another host" not in err and "pid ?" not in err
    assert notes.read_text() == "hello\n"


def test_a_lock_file_with_a_second_hard_link_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    other = tmp_path / "someone-elses.json"
    other.write_text("")
    os.link(other, out / LOCK_NAME)
    with pytest.raises(DataError, match="hard link"):
        with output_lock(out, "new"):
            pass
    assert other.read_text() == ""
