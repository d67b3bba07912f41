"""One writer per output folder: the lock file ``<out>/.preschool.lock`` of ``prepare`` and ``run``.

Two ``preschool prepare`` / ``preschool run`` processes writing the same
``--out`` would overwrite each other's data and checkpoints, so both commands
hold :func:`output_lock` on their output folder while they run. The lock file
says who holds it (pid, host, start time, command) and carries an exclusive
``flock`` for as long as its process lives, so the kernel releases it when the
process dies, however it dies. Rules:

- the folder is free: the lock is taken; it is removed when the command ends;
- another live process holds it: :class:`DataError` naming that process;
- the file names a process on this host that is no longer running (a killed
  run): the lock is stale and is taken over, with a warning on stderr;
- the file names a process on another host (a shared file system): it cannot
  be checked from here, so the command stops and says which file to delete if
  that process is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Iterator

from .errors import DataError

LOCK_NAME = ".preschool.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _describe(info: dict) -> str:
    return (f"pid {info.get('pid', '?')} on {info.get('host', '?')}, started {info.get('started', '?')}, "
            f"command: {info.get('command', '?')}")


def _read(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 65536):
        raw += chunk
    try:
        info = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        info = {"command": f"(unreadable lock file: {raw[:80]!r})"}
    return info if isinstance(info, dict) else {}


def _open_locked(path: Path) -> tuple[int, bool]:
    """Open ``path`` and try its flock: ``(fd, got_it)``; retried if the file was replaced meanwhile."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return fd, False
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd, True
        os.close(fd)  # the holder removed the file between our open and flock: take the new one


def command_line(command: str, config: str, overrides: list[str], out: str | None) -> str:
    """The ``preschool`` command line a lock records (what a second process is told is running)."""
    parts = ["preschool", command, str(config), *(f"--set {o}" for o in overrides)]
    return " ".join(parts + ([f"--out {out}"] if out else []))


@contextlib.contextmanager
def output_lock(folder: str | Path, command: str) -> Iterator[Path]:
    """Hold the lock on ``folder`` (created if missing) for the ``with`` block; yields the lock file's path.

    ``command`` is shown to a second process that finds the folder locked.
    Raises :class:`DataError` when another live process holds it.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    host = socket.gethostname()
    fd, got = _open_locked(path)
    try:
        other = _read(fd)
        if not got:
            raise DataError(f"{folder} is in use by another preschool process ({_describe(other)}); wait for it "
                            "to finish or give another --out (two runs in one folder overwrite each other's files)")
        if other and other.get("pid") != os.getpid():
            if other.get("host") != host:
                raise DataError(f"{folder} is locked by a process on another host ({_describe(other)}), which cannot "
                                f"be checked from {host}; if it is no longer running, delete {path}")
            if isinstance(other.get("pid"), int) and _alive(other["pid"]):
                raise DataError(f"{folder} is in use by another preschool process ({_describe(other)}); wait for it "
                                "to finish or give another --out (two runs in one folder overwrite each other's files)")
            print(f"[preschool] warning: taking over the stale lock {path} of a process that is no longer running "
                  f"({_describe(other)})", file=sys.stderr)
        info = {"pid": os.getpid(), "host": host, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "command": command}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
        os.fsync(fd)
        try:
            yield path
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # while still holding the flock, so no one takes a file that is going away
    finally:
        os.close(fd)
