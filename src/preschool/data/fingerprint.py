"""What a dataset was read from: each local source file's size, modification time and sha256.

``prepare`` records them in ``dataset.json`` when it builds a dataset from a corpus (``sources``: corpus
name -> its ``path`` and one entry per file it reads), and checks them before it reuses that dataset
(data/prepare.py ``plan_data``): a file added, removed, or holding other bytes makes the dataset stale,
named with the file, so a corpus edited in place is never reused silently::

    "sources": {"txt": {"path": "/data/corpus.txt", "files": [
        {"path": "corpus.txt", "bytes": 51234, "mtime_ns": 1764750000000000000, "sha256": "9f2c..."}]}}

The check reads no file whose size and modification time are those recorded (hashing the corpus at every
rerun would cost a full read of it); a file with a new mtime is hashed, and one with the same bytes
(touched, copied back) is still the same. So a file rewritten with the same size *and* mtime is not
noticed. Sources without local files (storybook, a hub dataset) record nothing, and a dataset prepared
before sources were recorded is reused as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io import sha256_file


def _files(cfg: Any) -> list[tuple[Path, str]]:
    from ..corpora.sources import local_files

    return local_files(cfg)


def fingerprint(corpora: dict[str, Any]) -> dict:
    """``{corpus: {"path", "files": [{"path", "bytes", "mtime_ns", "sha256"}]}}`` of the corpora (name ->
    CorpusConfig) that read local files; the others are left out."""
    out = {}
    for name, cfg in corpora.items():
        files = _files(cfg)
        if files:
            out[name] = {"path": str(cfg.path), "files": [_record(p, rel) for p, rel in files]}
    return out


def _record(path: Path, rel: str) -> dict:
    st = path.stat()
    return {"path": rel, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256_file(path)}


def changed(recorded: Any, corpora: dict[str, Any]) -> tuple[str, str] | None:
    """``(config key, detail)`` for the first file of the ``recorded`` sources (a ``dataset.json``'s
    ``sources``) that was added, removed or rewritten since, naming the file; None when all are the same
    (or nothing was recorded). A corpus no longer configured is left to the key comparison."""
    if not isinstance(recorded, dict):
        return None
    for name, rec in recorded.items():
        cfg = corpora.get(name)
        if cfg is None or not isinstance(rec, dict):
            continue
        root = Path(str(cfg.path)).expanduser()
        now = {rel: p for p, rel in _files(cfg)}
        was = {f["path"]: f for f in rec.get("files") or [] if isinstance(f, dict) and "path" in f}
        for rel in sorted(set(was) | set(now)):
            shown = now.get(rel) or (root / rel if root.is_dir() else root)
            if rel not in was:
                return f"corpora.{name}", f"{shown} was added since"
            if rel not in now:
                return f"corpora.{name}", f"{shown} was removed since"
            why = _differs(now[rel], was[rel])
            if why:
                return f"corpora.{name}", f"{shown}: {why}"
    return None


def _differs(path: Path, was: dict) -> str | None:
    """Why ``path`` is not the file recorded as ``was`` (size, then sha256 when its mtime moved), or None."""
    st = path.stat()
    if st.st_size != was.get("bytes"):
        return f"{was.get('bytes')} bytes when it was prepared, {st.st_size} now"
    if st.st_mtime_ns == was.get("mtime_ns"):
        return None
    sha = sha256_file(path)
    if sha != was.get("sha256"):
        return f"other bytes than when it was prepared (sha256 {str(was.get('sha256'))[:12]}..., now {sha[:12]}...)"
    return None
