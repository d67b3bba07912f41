"""Atomic file writes, checksums, manifests and provenance.

Every file preschool produces is written to a temporary name in the same
folder and renamed into place, so a crash never leaves a half-written file
under the final name. A write that fails for want of space (disk full, quota,
read-only disk) raises :class:`~preschool.errors.OutputError` naming the final
path, after removing its temporary file. Manifests are JSON and carry what produced the data:
config, code version, seed, counts and sha256 checksums.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import platform
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

from . import __version__
from .errors import NO_ROOM_FIX, DataError, OutputError

# errors that mean "no room to write here", as opposed to a bug or a missing input
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# errors that mean "this place may not be written": a read-only disk anywhere; a permission refused
# only where it concerns the output itself (the same refusal on an input is that input's own error)
_READ_ONLY = {errno.EROFS}
_REFUSED = {errno.EACCES, errno.EPERM}
NOT_WRITABLE_FIX = "make it writable (or use another --out) and rerun the same command"


def _errno_of(e: BaseException) -> int | None:
    """The OS error number of a failed write: an OSError's, or that of the Rust ``SafetensorError``
    wrapping one ("... (os error 28)"); None for any other exception."""
    code = e.errno if isinstance(e, OSError) and not isinstance(e, OutputError) else None
    if code is None and type(e).__name__ == "SafetensorError":
        m = re.search(r"os error (\d+)", str(e))
        code = int(m.group(1)) if m else None
    return code


def write_failure(e: BaseException) -> tuple[str, str] | None:
    """``(reason, fix)`` when ``e`` means a write found no room or no permission to write, else None."""
    code = _errno_of(e)
    if code in _NO_ROOM:
        return os.strerror(code), NO_ROOM_FIX
    if code in _READ_ONLY or code in _REFUSED:
        return os.strerror(code), NOT_WRITABLE_FIX
    return None


def _concerns(e: BaseException, path: Path, tmp: Path | None) -> bool:
    """Whether a refused permission is about the output ``path``: the file the OS names is ``path``,
    a folder above it (creating it), inside ``tmp``, or a temporary sibling ``.<name>.*`` of it."""
    name = getattr(e, "filename", None)
    if getattr(e, "errno", None) not in _REFUSED:
        return True
    if name is None:
        return False
    f = Path(os.fsdecode(name)).absolute()
    p = path.absolute()
    return (p.is_relative_to(f) or (tmp is not None and f.is_relative_to(tmp.absolute()))
            or (f.parent == p.parent and f.name.startswith(f".{p.name}.")))


@contextlib.contextmanager
def write_errors_named(path: str | Path, tmp: Path | None = None) -> Iterator[None]:
    """Re-raise a failed write inside the block as OutputError naming ``path`` (no space, quota,
    read-only disk, or permission refused on ``path``); one raised for a file inside the temporary
    ``tmp`` (a nested atomic write) is renamed to ``path`` too."""
    try:
        yield
    except OutputError as e:
        if tmp is not None and Path(e.path).is_relative_to(tmp):
            raise OutputError(str(path), e.reason, e.fix) from None
        raise
    except BaseException as e:
        failure = write_failure(e)
        if failure is None or not _concerns(e, Path(path), tmp):
            raise
        raise OutputError(str(path), *failure) from None


def _not_a_folder(name: str) -> str:
    """The path that stands where a folder is needed: ``name`` or the nearest folder above it that exists and
    is not one (``mkdir -p a/b/c`` where ``a/b`` is a file names ``a/b``)."""
    p = Path(name)
    for q in (p, *p.parents):
        if os.path.lexists(q):
            return str(q) if not q.is_dir() else name
    return name


def os_error_line(e: OSError) -> str | None:
    """One line for an OSError that a write outside :func:`write_errors_named` raised (no space, a
    read-only disk, a refused permission), or a path of the wrong kind (a file where a folder is made, a
    folder where a file is renamed to), naming the path; None when it names none or is another error (a
    traceback is then the useful report)."""
    name, failure = getattr(e, "filename", None), write_failure(e)
    if name is not None and e.errno in (errno.EEXIST, errno.ENOTDIR):  # mkdir's exist_ok met a file
        return (f"{_not_a_folder(os.fsdecode(name))}: is not a folder, and one is made there; it was left as it "
                "is: use another --out (or move it away) and rerun")
    if name is not None and e.errno == errno.EISDIR:  # a rename or open for a file met a folder: name that one
        where = os.fsdecode(getattr(e, "filename2", None) or name)
        return (f"{where}: is a folder where a file is written; it was left as it is: move it away (or use "
                "another --out) and rerun")
    if name is None or failure is None:
        return None
    if e.errno in _REFUSED:  # a read or a write: say what the OS said, and the fix of both
        return f"{os.fsdecode(name)}: {failure[0]}; check its permissions (or use another --out) and rerun"
    return f"{os.fsdecode(name)}: cannot write ({failure[0]}); {failure[1]}"


def _umask() -> int:
    """The process umask, read without changing it (Linux: /proc/self/status; elsewhere set and restore)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _publish_mode(path: Path, mask: int | None = None) -> None:
    """Give a finished temp file or folder the mode a plain ``open``/``mkdir`` would have given it
    (``mask``: the umask, read once by a caller publishing many paths).

    ``tempfile`` makes its files 0600 and folders 0700 whatever the umask, so without this every
    report, checkpoint, prepared dataset and export stays private to its writer: on a cluster's
    shared project folder a colleague (or a job running as another user) could not read them.
    A file its writer made executable stays executable (to whom the umask allows).
    """
    full = 0o777 if path.is_dir() or path.stat().st_mode & 0o100 else 0o666
    os.chmod(path, full & ~(_umask() if mask is None else mask))


def _publish_tree(folder: Path) -> None:
    """:func:`_publish_mode` for ``folder`` and everything in it (links left alone).

    What other code writes into an :func:`atomic_dir` folder keeps that code's modes otherwise: the
    safetensors writer behind ``save_pretrained`` makes ``model.safetensors`` 0600, so checkpoint
    weights were the one file of a run a collaborator could not read.
    """
    mask = _umask()
    for dirpath, dirs, files in os.walk(folder):
        for name in files + dirs:
            p = Path(dirpath, name)
            if not p.is_symlink():
                _publish_mode(p, mask)
    _publish_mode(folder, mask)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path beside ``path``; on success fsync and rename it onto ``path``."""
    path = Path(path)
    with write_errors_named(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        with write_errors_named(path, tmp_path):
            yield tmp_path
            if tmp_path.is_file():
                with open(tmp_path, "rb") as fh:
                    os.fsync(fh.fileno())
            if tmp_path.exists():
                _publish_mode(tmp_path)
            os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            if tmp_path.is_dir():
                import shutil

                shutil.rmtree(tmp_path)
            else:
                tmp_path.unlink()
        raise


#: the record inside a temp folder of :func:`atomic_dir` saying who writes it (removed before the rename)
PARTIAL_MARK = ".preschool-partial.json"


def _temp_dir_re(name: str, suffixes: tuple[str, ...] = ("tmp", "old")) -> "re.Pattern[str]":
    # tempfile.mkdtemp's (and mkstemp's) names: prefix, 8 characters of its alphabet, suffix (.tmp: a new
    # output being written; .old: atomic_dir's output it replaces, on its way out)
    return re.compile(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.({'|'.join(suffixes)})")


def _own_dir(path: Path, suffix: str) -> Path:
    """A new hidden folder ``.<name>.XXXXXXXX<suffix>`` beside ``path`` holding the record (:data:`PARTIAL_MARK`:
    pid, host, ``path``'s name) by which :func:`remove_dead_temps` knows it as ours."""
    import socket

    d = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent))
    (d / PARTIAL_MARK).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "for": path.name}),
                                  encoding="utf-8")
    return d


def remove_orphan_temp_files(folder: str | Path, names: list[str] | None = None) -> list[Path]:
    """Remove from ``folder`` the temp files :func:`atomic_path` left when its writer was killed (each
    ``.<name>.XXXXXXXX.tmp``, for every ``name`` of ``names``, or any name); return them.

    Such a file names no writer, so only a caller that holds the lock every writer of these files takes
    may call this: no live writer is then midway. Folders and other names are never touched.
    """
    folder = Path(folder)
    pats = [_temp_dir_re(n, ("tmp",)) for n in names] if names is not None else [re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")]
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for f in sorted(folder.iterdir()):
            if any(p.fullmatch(f.name) for p in pats) and f.is_file() and not f.is_symlink():
                f.unlink(missing_ok=True)
                removed.append(f)
    return removed


def remove_dead_temps(path: str | Path) -> list[Path]:
    """Remove the temp folders :func:`atomic_dir` left beside ``path`` when its writer was killed; return them.

    A folder is removed only when all of these hold: its name is one atomic_dir gives a folder of
    ``path`` (``.<name>.XXXXXXXX.tmp``, or ``.old`` for the output it was replacing), it holds
    atomic_dir's record (:data:`PARTIAL_MARK`) naming ``path``, and the process the record names ran
    on this host and is gone. A writer still running, one on another host (which cannot be checked
    from here) and anything else keep their folders.
    """
    import shutil
    import socket

    from .lock import pid_alive

    path = Path(path)
    pattern, host, removed = _temp_dir_re(path.name), socket.gethostname(), []
    try:
        candidates = list(path.parent.iterdir())
    except OSError:
        return removed
    for cand in candidates:
        if not pattern.fullmatch(cand.name) or cand.is_symlink() or not cand.is_dir():
            continue
        try:
            rec = json.loads((cand / PARTIAL_MARK).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # no record of ours (or an unreadable one): not ours to delete
        if (not isinstance(rec, dict) or rec.get("for") != path.name or rec.get("host") != host
                or not isinstance(rec.get("pid"), int) or pid_alive(rec["pid"])):
            continue
        shutil.rmtree(cand, ignore_errors=True)
        removed.append(cand)
    return removed


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temp folder beside ``path``; on success replace ``path`` with it, every file and folder
    in it given the mode the umask gives a plain ``open``/``mkdir`` (:func:`_publish_tree`).

    The temp folder (``.<name>.XXXXXXXX.tmp``) records who writes it until the rename, so the next
    writer of ``path`` removes what a killed one left (:func:`remove_dead_temps`). The output it
    replaces moves into a folder of the same kind (``.<name>.XXXXXXXX.old``, new each time) and goes
    with it: a folder of the user's beside ``path`` is never removed, whatever its name.
    """
    import shutil

    path = Path(path)
    with write_errors_named(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temps(path)
        tmp = _own_dir(path, ".tmp")
    try:
        with write_errors_named(path, tmp):
            yield tmp
        (tmp / PARTIAL_MARK).unlink(missing_ok=True)  # the folder is complete: it becomes ``path`` as it is
        _publish_tree(tmp)
        old = None
        if path.exists() or path.is_symlink():
            old = _own_dir(path, ".old")
            os.replace(path, old / path.name)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


class _ErrorKeepingWriter:
    """A binary file for ``torch.save`` that keeps the OSError of a failed write: torch reports
    a full disk only as "unexpected pos", so :func:`torch_save` re-raises the real cause."""

    def __init__(self, fh):
        self.fh, self.error = fh, None

    def write(self, data) -> int:
        try:
            return self.fh.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.fh.flush()


def torch_save(obj: Any, path: str | Path) -> None:
    """``torch.save(obj, path)`` whose failures on a full disk say so (see :func:`write_errors_named`)."""
    import torch

    with open(path, "wb") as fh:
        w = _ErrorKeepingWriter(fh)
        try:
            torch.save(obj, w)
        except RuntimeError:
            if w.error is not None:
                raise w.error from None
            raise


@contextlib.contextmanager
def quiet_unpickler() -> Iterator[None]:
    """Within: torch's ``weights_only`` unpickler prints no warning of its own (a raw ``pickle.dump`` file's
    protocol gets two lines of UserWarning). Its loads still refuse anything beyond tensors and plain data;
    the caller's one-line refusal (or the load) is all a user sees."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._weights_only_unpickler")
        yield


class UnreadableJSON(DataError, ValueError):
    """A JSON file (or JSON Lines line) that cannot be read: not UTF-8, not JSON, nested too deeply, a
    number no Python value holds, or not the kind of value expected. Its message names the file (and line);
    a ValueError too, so a caller that treats an unreadable file as absent still catches it."""


def parse_json(text: str | bytes, where: str) -> Any:
    """The JSON value of ``text`` (bytes are decoded as UTF-8), or :class:`UnreadableJSON` naming ``where``
    ("file" or "file:line") and what is wrong. One place for every way a crafted or damaged JSON text
    fails: bad bytes, bad syntax, nesting deeper than Python's recursion limit, an integer of more digits
    than Python converts (``sys.get_int_max_str_digits``)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UnreadableJSON(f"{where}: not UTF-8 text (byte {e.start} is {text[e.start:e.start + 1]!r})") \
                from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UnreadableJSON(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise UnreadableJSON(f"{where}: not valid JSON (nested too deeply to read)") from None
    except ValueError as e:  # an integer past the digit limit
        raise UnreadableJSON(f"{where}: not valid JSON ({e})") from None


def read_json(path: str | Path, expect: type | None = None) -> Any:
    """The JSON value in the file ``path``; with ``expect`` (``dict``, ``list``) it must be one. A file that
    cannot be read as JSON is :class:`UnreadableJSON`, one line naming it (:func:`parse_json`); a missing file
    stays a FileNotFoundError."""
    path = Path(path)
    if path.is_dir():
        raise UnreadableJSON(f"{path}: is a folder, not a JSON file")
    value = parse_json(path.read_bytes(), str(path))
    if expect is not None and not isinstance(value, expect):
        raise UnreadableJSON(f"{path}: holds a JSON {json_kind(value)}, not a JSON {json_kind(expect())}")
    return value


def json_kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "true/false", type(None): "null"}.get(
        type(value), "number")


def iter_jsonl(path: str | Path, last_line_may_be_cut: bool = False,
               encoding: str = "utf-8-sig") -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSONL file, streaming.

    A line that is not a JSON object (nor text in ``encoding``) raises ``DataError`` naming ``path:line``,
    except, with ``last_line_may_be_cut``, an invalid *last* line: a row an append-only writer
    (``metrics.jsonl``) was cut off in by a crash, skipped.
    """
    with open(path, "rb") as fh:
        for ln, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                try:
                    line = raw.decode(encoding if ln == 1 else "utf-8")  # a BOM can only lead the file
                except UnicodeDecodeError as e:
                    raise UnreadableJSON(f"{path}:{ln}: not {encoding.removesuffix('-sig').upper()} text (byte "
                                         f"{e.start + 1} of the line)") from None
                rec = parse_json(line, f"{path}:{ln}")
            except UnreadableJSON:
                if last_line_may_be_cut and not fh.read().strip():
                    return
                raise
            if not isinstance(rec, dict):
                raise UnreadableJSON(f"{path}:{ln}: expected a JSON object, got {type(rec).__name__}")
            yield ln, rec


def _json_default(o: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(o):
        from .config import to_dict

        return to_dict(o)
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


_CODE_VERSION: dict | None = None


def code_version() -> dict:
    """Package version plus git commit (and dirty flag) of the source tree, when available."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        info: dict[str, Any] = {"preschool": __version__, "python": platform.python_version()}
        src = Path(__file__).resolve().parent
        try:
            commit = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, timeout=5
            )
            if commit.returncode == 0:
                info["git_commit"] = commit.stdout.strip()
                dirty = subprocess.run(
                    ["git", "status", "--porcelain", "--untracked-files=no"],
                    cwd=src, capture_output=True, text=True, timeout=5,
                )
                info["git_dirty"] = bool(dirty.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
        # installed versions from package metadata: importing torch and transformers only to read their
        # versions costs seconds in a process that needs neither (a data-only prepare)
        from importlib.metadata import PackageNotFoundError, version

        for pkg in ("torch", "transformers"):
            try:
                info[pkg] = version(pkg)
            except PackageNotFoundError:
                pass
        _CODE_VERSION = info
    return dict(_CODE_VERSION)


def provenance(config: Any = None, data_manifests: Any = None, **extra: Any) -> dict:
    """The block every results file carries: config, code version, data manifests."""
    from .config import to_dict

    out = {"code_version": code_version()}
    if config is not None:
        out["config"] = to_dict(config)
    if data_manifests is not None:
        out["data_manifests"] = data_manifests
    out.update(extra)
    return out
