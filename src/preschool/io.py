"""Atomic file writes, checksums, manifests and provenance.

Every file preschool produces is written to a temporary name in the same
folder and renamed into place, so a crash never leaves a half-written file
under the final name. Manifests are JSON and carry what produced the data:
config, code version, seed, counts and sha256 checksums.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

from . import __version__


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path beside ``path``; on success fsync and rename it onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.is_file():
            with open(tmp_path, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            if tmp_path.is_dir():
                import shutil

                shutil.rmtree(tmp_path)
            else:
                tmp_path.unlink()
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temp folder beside ``path``; on success replace ``path`` with it."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
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


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


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


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
        try:
            import torch
            import transformers

            info["torch"] = torch.__version__
            info["transformers"] = transformers.__version__
        except ImportError:
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
