"""One writer per output folder: ``<out>/.preschool.lock``, the only lock the commands take.

``preschool prepare`` (which the Slurm prepare job runs too) and ``preschool
run`` hold :func:`output_lock` on the experiment's output folder while they
work, both through the runner's one lock taker, :func:`experiment_lock`. The lock file says who holds
it (pid, host, start time, command, and a *config key*: :func:`config_key`,
a hash of the experiment config without the fields that only change how it
runs, ``out`` and ``workers``) and carries an exclusive ``flock`` for as long
as its process lives, so the kernel releases it when the process dies, however
it dies. A second process asking for the same folder:

- the folder is free: the lock is taken; it is removed when the command ends;
- held by a live process **with the same config key**: it waits for that
  process to finish (one line on stderr names it), then takes the lock and
  goes on. Every step skips what is already built (datasets whose spec
  matches, finished arms, cached evaluations), so it reuses the first
  process's work: two ``preschool prepare`` of one config prepare once;
- held by a live process **with another config** (or one that gave no key):
  :class:`DataError` naming that process (two configs in one folder would
  overwrite each other's data and checkpoints);
- the file names a process on this host that is no longer running (a killed
  run): the lock is stale and is taken over, with a warning on stderr;
- the file names a process on another host (a shared file system): it cannot
  be checked from here, so the command stops and says which file to delete if
  that process is gone, unless the caller's ``holder_alive`` can tell (``run
  --arm`` asks Slurm whether the holder's job, recorded as ``slurm_job``, still
  runs: a job killed at its time limit on one node leaves a lock its
  resubmission on another node takes over).

Within one process the lock is re-entrant: ``preschool prepare`` holds it and
calls :func:`preschool.experiment.prepare_experiment`, which takes it again.

``preschool train`` holds it on its run folder (rank 0, keyed by its config); the runner's
trainer (``preschool run``, and ``run --arm`` in a cluster job) holds it on each arm x seed's run
folder while training it, without a key, so a second trainer of that folder stops
(:func:`preschool.experiment.runner.run_lock`).
``export``, ``generate`` and ``transform l2t`` replace their ``--out`` whole, so
they hold it *beside* the folder (``beside=True``: ``<parent>/.<name>.preschool.lock``)
and without a key: a second writer of the same ``--out`` stops (:mod:`preschool.outdir`).

Example (what :func:`experiment_lock` does)::

    with output_lock(exp.out_dir, "preschool prepare exp.yaml", key=config_key(exp.cfg)):
        ...  # build what is missing
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import DataError

LOCK_NAME = ".preschool.lock"
_RECORD_MAX = 1 << 16  # a record is about 200 bytes; a larger file is no lock of ours


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (owned by anyone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _describe(info: dict) -> str:
    job = f" (Slurm job {info['slurm_job']})" if info.get("slurm_job") else ""
    return (f"pid {info.get('pid', '?')} on {info.get('host', '?')}{job}, started {info.get('started', '?')}, "
            f"command: {info.get('command', '?')}")


def _read(fd: int, path: Path) -> dict:
    """The lock record in ``fd`` ({} while it is empty: its holder has not written it yet). A file that
    holds anything else is no lock of ours (someone's notes, a file of another program): refused, kept."""
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while len(raw) <= _RECORD_MAX and (chunk := os.read(fd, 65536)):
        raw += chunk
    if not raw.strip():
        return {}
    try:
        info = json.loads(raw.decode("utf-8")) if len(raw) <= _RECORD_MAX else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        info = None
    if not isinstance(info, dict) or not {"pid", "host"} <= info.keys():
        os.close(fd)
        raise DataError(f"{path}: not a preschool lock (it holds {raw[:40]!r}{'...' if len(raw) > 40 else ''}); "
                        "it was left as it is: move it away (or use another --out) and rerun")
    return info


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (a holder removes its file as it ends)."""
    try:
        return os.fstat(fd).st_ino == os.lstat(path).st_ino
    except FileNotFoundError:
        return False


def _open_lock_file(path: Path) -> int:
    """An fd of the lock file at ``path``, created if missing. Only a regular file with one name is a lock:
    a symbolic link is never followed (truncating and writing the record would overwrite what it points
    to, in a shared folder someone else's file), and a folder, a FIFO, a device or a second hard link to
    another file are refused, each in one line, left as they are."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise DataError(f"{path}: is a symbolic link, not a lock file; a lock is never followed (writing it "
                            "would overwrite what the link points to): remove the link (or use another --out) "
                            "and rerun") from None
        if e.errno == errno.EISDIR:
            raise DataError(f"{path}: is a folder, not a lock file; it was left as it is: move it away (or use "
                            "another --out) and rerun") from None
        raise
    st = os.fstat(fd)
    why = ("is not a regular file" if not stat.S_ISREG(st.st_mode)
           else "has another hard link (a lock is a file of its own)" if st.st_nlink != 1 else None)
    if why:
        os.close(fd)
        raise DataError(f"{path}: {why}, not a lock file preschool made; it was left as it is: move it away (or "
                        "use another --out) and rerun")
    return fd


def _open_locked(path: Path) -> tuple[int, bool]:
    """Open ``path`` and try its flock: ``(fd, got_it)``; retried if the file was replaced meanwhile."""
    while True:
        fd = _open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return fd, False
        if _same_file(fd, path):
            return fd, True
        os.close(fd)  # the holder removed the file between our open and flock: take the new one


#: config fields that change how a command runs, not what it writes: equal keys whatever their values
#: (``rung`` picks which of a ladder's runs a command trains, each run the same whichever command does it)
EXECUTION_ONLY = ("out", "workers", "rung")


def config_key(cfg: Any) -> str:
    """The key two processes compare to know they work on the same config (16 hex digits of a sha256).

    ``cfg`` is an experiment config (a dataclass or a dict); :data:`EXECUTION_ONLY`
    fields are left out, so ``preschool prepare`` (which sets ``workers``) and
    ``preschool run`` of one YAML have the same key.
    """
    from .config import to_dict

    tree = to_dict(cfg)
    if isinstance(tree, dict):
        tree = {k: v for k, v in tree.items() if k not in EXECUTION_ONLY}
    return hashlib.sha256(json.dumps(tree, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]


def command_line(command: str, config: str, overrides: list[str], out: str | None) -> str:
    """The ``preschool`` command line a lock records (what a second process is told is running)."""
    parts = ["preschool", command, str(config), *(f"--set {o}" for o in overrides)]
    return " ".join(parts + ([f"--out {out}"] if out else []))


def _busy(folder: Path, other: dict, key: str | None) -> DataError:
    theirs = other.get("key")
    why = (f"with another config (its config key {theirs}, this one {key})" if key and theirs else "")
    return DataError(f"{folder} is in use by another preschool process ({_describe(other)}){' ' + why if why else ''}; "
                     "wait for it to finish or give another --out (two runs in one folder overwrite each other's "
                     "files)")


def _acquire(folder: Path, path: Path, key: str | None,
             holder_alive: Callable[[dict], bool | None] | None = None) -> int:
    """The flocked fd of ``path``: waits for a live holder with the same ``key``, raises for any other.

    A holder on another host whose flock is gone (a network file system releases a dead host's locks)
    is asked about with ``holder_alive`` (its lock record -> alive, or None when it cannot tell): one
    known dead is stale, as a dead pid on this host is."""
    host = socket.gethostname()
    waited = False
    unwritten = 0
    while True:
        fd, got = _open_locked(path)
        other = _read(fd, path)
        if not got and not other and unwritten < 100:  # a holder writes who it is right after its flock
            os.close(fd)
            unwritten += 1
            time.sleep(0.05)
            continue
        if not got:
            if key is None or other.get("key") != key or other.get("host") != host:
                os.close(fd)
                raise _busy(folder, other, key)
            if not waited:
                print(f"[preschool] waiting for {_describe(other)} to finish its work on {folder} (the same "
                      "config); what it builds will be reused", file=sys.stderr, flush=True)
                waited = True
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the holder ends (or dies)
            if not _same_file(fd, path):  # it removed its file as it ended: start over on the current one
                os.close(fd)
                continue
            other = _read(fd, path)  # still there: the holder died without cleaning up
        if other and other.get("pid") != os.getpid():
            if other.get("host") != host and (holder_alive is None or holder_alive(other) is not False):
                os.close(fd)
                raise DataError(f"{folder} is locked by a process on another host ({_describe(other)}), which cannot "
                                f"be checked from {host}; if it is no longer running, delete {path}")
            if other.get("host") == host and isinstance(other.get("pid"), int) and pid_alive(other["pid"]):
                os.close(fd)
                raise _busy(folder, other, key)
            print(f"[preschool] warning: taking over the stale lock {path} of a process that is no longer running "
                  f"({_describe(other)})", file=sys.stderr)
        return fd


_held: dict[Path, list] = {}  # folder (resolved) -> [key, depth]: the locks this process holds


def lock_path(folder: str | Path, beside: bool = False) -> Path:
    """The lock file of ``folder``: ``<folder>/.preschool.lock``, or with ``beside``
    ``<parent>/.<name>.preschool.lock`` (for a folder that is replaced whole, which would take a lock
    file inside it along)."""
    folder = Path(folder)
    return folder.parent / f".{folder.name}{LOCK_NAME}" if beside else folder / LOCK_NAME


@contextlib.contextmanager
def output_lock(folder: str | Path, command: str, key: str | None = None, beside: bool = False,
                holder_alive: Callable[[dict], bool | None] | None = None) -> Iterator[Path]:
    """Hold the lock on ``folder`` (created if missing) for the ``with`` block; yields the lock file's path.

    ``command`` is shown to a second process that finds the folder locked;
    ``key`` (:func:`config_key`) lets a second process with the same key wait
    instead of failing. Raises :class:`DataError` when a live process with
    another key (or none) holds it. Re-entrant within a process.
    ``beside``: the lock file sits next to ``folder`` (:func:`lock_path`) and
    only the parent is created: for outputs written whole by ``io.atomic_dir``
    (``export``, ``transform l2t``, ``generate``). ``holder_alive``: see :func:`_acquire`. The record
    names the Slurm job (``SLURM_JOB_ID``) of a holder that runs in one.
    """
    folder = Path(folder)
    (folder.parent if beside else folder).mkdir(parents=True, exist_ok=True)
    path = lock_path(folder, beside)
    held = folder.resolve()  # once: the folder may be replaced (or a link retargeted) while the lock is held
    mine = _held.get(held)
    if mine is not None:  # this process holds it already (prepare CLI -> experiment.prepare_experiment)
        if key is not None and mine[0] is not None and key != mine[0]:
            raise DataError(f"{folder}: this process holds its lock for config key {mine[0]}, not {key}")
        mine[1] += 1
        try:
            yield path
        finally:
            mine[1] -= 1
        return
    fd = _acquire(folder, path, key, holder_alive)
    try:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "command": command, "key": key, "slurm_job": os.environ.get("SLURM_JOB_ID")}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
        os.fsync(fd)
        _held[held] = [key, 1]
        try:
            yield path
        finally:
            del _held[held]
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # while still holding the flock, so no one takes a file that is going away
    finally:
        os.close(fd)


def experiment_lock(cfg: Any, command: str):
    """The lock the runner takes on an experiment: ``<out>/.preschool.lock`` keyed by the config
    (:func:`config_key` of ``cfg``, an experiment config). ``preschool run`` holds it for every step,
    ``preschool prepare`` (:func:`preschool.experiment.prepare_experiment`) for the data; a second process
    of the same config waits, one of another config stops naming ``command``."""
    return output_lock(cfg.out_dir, command, key=config_key(cfg))
