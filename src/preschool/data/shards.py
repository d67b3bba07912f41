"""Token shards: fixed-length training rows in memory-mapped arrays plus a manifest.

A shard set is a folder::

    manifest.json          format, row_len, dtype, counts, provenance, per-file sha256
    tokens-00000.bin       uint16 or uint32, shape (rows, row_len), C order
    loss_mask-00000.bin    optional uint8, same shape: 1 where the token is a loss target
    segments-00000.bin     optional uint16, same shape: document index within the row
                           (0, 1, 2...), for attention/position resets between packed docs

``row_len`` is ``seq_len + 1``: a row yields ``seq_len`` next-token predictions
(inputs ``row[:-1]``, targets ``row[1:]``), so one document of exactly
``row_len`` tokens fills one row with no cross-document leakage.
``loss_mask[j] == 1`` means the prediction *of token j* is trained (j >= 1).

The manifest records the largest token id of each ``tokens`` file (``max_id``)
and of the whole set (``max_token_id``), so a model's vocabulary can be checked
against the data when the set is opened rather than deep inside an embedding.
The manifest's word is not taken on trust where the ids are read anyway: a
``verify="full"`` open finds each file's largest id in its hash pass (a manifest
that under-states it is caught before any step); ``verify="size"`` reads no file
whole, so after :meth:`ShardSet.check_vocab` each tokens row read from such a file
is checked against the vocabulary (an id the manifest hides is caught at its row).

The writer builds everything in a temporary folder and renames it into place,
so a set either exists whole or not at all. On open, every file's size is
checked against the manifest (truncation), and with ``verify="full"`` (the
default) its sha256 too (corruption). Hashing streams each file once per
process (a file already verified, unchanged since, is not read again) and
prints its one-time cost to stderr. Manifests written before ``max_id`` existed
get it computed in the same pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..errors import DataError
from ..io import atomic_dir, code_version, sha256_file, write_errors_named, write_json
from ..layout import MANIFEST

FORMAT = "preschool-shards-v1"
OPTIONAL_ARRAYS = {"loss_mask": np.uint8, "segments": np.uint16}
# "full": sizes and sha256 of every file; "size": sizes only ("sha256" is the older name of "full")
VERIFY_MODES = ("full", "size")
MAX_VOCAB = 2**32  # token ids are stored as uint16 or uint32


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned dtype that holds every id of a vocabulary."""
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.uint32)


def shard_manifest(row_len: int, dtype: np.dtype, vocab_size: int, arrays: list[str], shards: list[dict],
                   **extra: Any) -> dict:
    """A shard set's ``manifest.json`` content from its per-file entries (``{"rows", "files"}``)."""
    n_rows = sum(int(e["rows"]) for e in shards)
    return {
        "format": FORMAT,
        "row_len": row_len,
        "seq_len": row_len - 1,
        "dtype": np.dtype(dtype).name,
        "vocab_size": vocab_size,
        "arrays": list(arrays),
        "n_rows": n_rows,
        "n_tokens": n_rows * row_len,
        "max_token_id": max((e["files"]["tokens"]["max_id"] for e in shards), default=-1),
        "shards": shards,
        "code_version": code_version(),
        **extra,
    }


def write_array(path: Path, arr: np.ndarray) -> None:
    """Write ``arr``'s bytes (C order) to ``path``. Unlike ``ndarray.tofile``, whose short write on a
    full disk is an OSError with neither errno nor path ("N requested and M written"), a failure here
    is an OSError with both, which :func:`~preschool.io.write_errors_named` and the CLI report as one line."""
    try:
        with open(path, "wb") as fh:
            fh.write(np.ascontiguousarray(arr).data)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


class ShardWriter:
    """Accumulate rows and write a shard set atomically on ``close()``.

    Use as a context manager; if the block raises, nothing is left at ``out``.
    """

    def __init__(
        self,
        out: str | Path,
        row_len: int,
        vocab_size: int,
        arrays: Iterable[str] = (),
        rows_per_shard: int = 65536,
    ):
        if row_len < 2:
            raise ValueError(f"row_len must be >= 2, got {row_len}")
        self.out = Path(out)
        self.row_len = row_len
        self.vocab_size = vocab_size
        self.dtype = token_dtype(vocab_size)
        self.arrays = list(arrays)
        for a in self.arrays:
            if a not in OPTIONAL_ARRAYS:
                raise ValueError(f"unknown shard array {a!r}; known: {list(OPTIONAL_ARRAYS)}")
        self.rows_per_shard = rows_per_shard
        self._ctx = atomic_dir(self.out)
        self._tmp = self._ctx.__enter__()
        self._files: list[dict] = []
        self._buf: dict[str, list[np.ndarray]] = {"tokens": [], **{a: [] for a in self.arrays}}
        self._buffered = 0
        self.n_rows = 0
        self._closed = False

    def add_rows(self, tokens: np.ndarray, **extra: np.ndarray) -> None:
        """Append rows: ``tokens`` of shape (n, row_len) (or one row of shape (row_len,))."""
        tokens = np.asarray(tokens)
        if tokens.ndim == 1:
            tokens = tokens[None, :]
            extra = {k: np.asarray(v)[None, :] for k, v in extra.items()}
        if tokens.shape[1] != self.row_len:
            raise ValueError(f"row length {tokens.shape[1]} != row_len {self.row_len}")
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"token id out of range [0, {self.vocab_size}): {tokens.min()}..{tokens.max()}")
        if set(extra) != set(self.arrays):
            raise ValueError(f"expected arrays {self.arrays}, got {sorted(extra)}")
        self._buf["tokens"].append(tokens.astype(self.dtype, copy=False))
        for k, v in extra.items():
            v = np.asarray(v)
            if v.shape != tokens.shape:
                raise ValueError(f"{k} shape {v.shape} != tokens shape {tokens.shape}")
            self._buf[k].append(v.astype(OPTIONAL_ARRAYS[k], copy=False))
        self._buffered += tokens.shape[0]
        self.n_rows += tokens.shape[0]
        while self._buffered >= self.rows_per_shard:
            self._flush(self.rows_per_shard)

    def _flush(self, n: int) -> None:
        if n == 0:
            return
        idx = len(self._files)
        entry: dict[str, Any] = {"rows": n, "files": {}}
        for name, parts in self._buf.items():
            block = np.concatenate(parts, axis=0)
            head, rest = block[:n], block[n:]
            self._buf[name] = [rest] if len(rest) else []
            fname = f"{name}-{idx:05d}.bin"
            path = self._tmp / fname
            with write_errors_named(self.out, self._tmp):  # rows are flushed as they come, outside close()
                write_array(path, head)
            entry["files"][name] = {"name": fname, "bytes": path.stat().st_size, "sha256": sha256_file(path)}
            if name == "tokens":
                entry["files"][name]["max_id"] = int(head.max())
        self._files.append(entry)
        self._buffered -= n

    def close(self, **manifest_extra: Any) -> dict:
        """Flush, write ``manifest.json`` (with ``manifest_extra``) and move the set into place."""
        self._flush(self._buffered)
        manifest = shard_manifest(self.row_len, self.dtype, self.vocab_size, ["tokens", *self.arrays], self._files,
                                  **manifest_extra)
        write_json(self._tmp / MANIFEST, manifest)
        self._ctx.__exit__(None, None, None)
        self._closed = True
        return manifest

    def abort(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                raise RuntimeError("aborted")
            except RuntimeError as e:
                try:
                    self._ctx.__exit__(type(e), e, e.__traceback__)
                except RuntimeError:
                    pass

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()


@dataclass
class _Shard:
    start: int
    rows: int
    arrays: dict[str, np.memmap]
    tokens_file: Path
    max_read: bool = False  # its tokens file's max id was read from the file (checked whole by check_vocab)


def content_sha256(dataset_dir: str | Path, verify: str = "full") -> str | None:
    """Fingerprint of a dataset's bytes: sha256 over the shard checksums of its ``train``/``val``
    manifests (not the manifests themselves, which also record the code version). Each split is
    opened with ``verify`` first, so with ``"full"`` the checksums hashed are those of the files as
    they are on disk (a corrupt file raises DataError). None if the folder holds no shard set."""
    h = hashlib.sha256()
    found = False
    for split in ("train", "val"):
        path = Path(dataset_dir) / split
        if not (path / MANIFEST).is_file():
            continue
        found = True
        man = ShardSet(path, verify=verify).manifest
        h.update(split.encode())
        for entry in man.get("shards", []):
            for name in sorted(entry["files"]):
                h.update(f"{name}:{entry['files'][name]['sha256']};".encode())
    return h.hexdigest() if found else None


# What this process has already read of each shard file, keyed by (path, inode, size, mtime):
# (sha256, largest value). A file is hashed once per process, not once per open.
_SCANNED: dict[tuple[str, int, int, int], tuple[str | None, int | None]] = {}


def _scan(f: Path, dtype: np.dtype, want_sha: bool, want_max: bool) -> tuple[str | None, int | None, int]:
    """One streamed pass over a shard file for its sha256 and/or largest value.

    Returns ``(sha256, max, bytes read)``; what an earlier pass already found is reused
    (bytes read 0), so repeated opens cost nothing.
    """
    st = f.stat()
    key = (str(f.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    sha, mx = _SCANNED.get(key, (None, None))
    need_sha, need_max = want_sha and sha is None, want_max and mx is None
    if not (need_sha or need_max):
        return sha, mx, 0
    h, m = hashlib.sha256(), -1
    chunk = (1 << 22) // dtype.itemsize * dtype.itemsize  # whole elements per block
    with open(f, "rb") as fh:
        while block := fh.read(chunk):
            if need_sha:
                h.update(block)
            if need_max:
                m = max(m, int(np.frombuffer(block, dtype=dtype).max()))
    sha = h.hexdigest() if need_sha else sha
    mx = m if need_max else mx
    _SCANNED[key] = (sha, mx)
    return sha, mx, st.st_size


_WRONG_TOKENIZER = ("the data was tokenized with another tokenizer: rebuild it with the run's tokenizer, "
                    "or train with the tokenizer it was built with")


def _rebuild_hint(path: Path) -> str:
    return f"rebuild the dataset that holds {path} (rerun the command that wrote it into a new folder)"


def _field(mpath: Path, manifest: dict, key: str, kind: Any) -> Any:
    """``kind(manifest[key])``, or a DataError naming the manifest and the field that is missing or malformed."""
    if key not in manifest:
        raise DataError(f"{mpath}: no {key!r} field (the manifest is incomplete); {_rebuild_hint(mpath.parent)}")
    try:
        return kind(manifest[key])
    except (TypeError, ValueError) as e:
        raise DataError(f"{mpath}: field {key!r} is {manifest[key]!r}, not a valid {getattr(kind, '__name__', kind)} "
                        f"({e}); {_rebuild_hint(mpath.parent)}") from None


class ShardSet:
    """Read-only view over a shard set; rows indexed globally across shard files.

    ``verify``: "full" (default) checks every file's size and sha256, "size" sizes only
    ("sha256" is accepted as the older name of "full"). Call :meth:`check_vocab` before
    feeding the ids to a model.
    """

    def __init__(self, path: str | Path, verify: str = "full"):
        if verify not in (*VERIFY_MODES, "sha256"):
            raise ValueError(f"verify must be one of {VERIFY_MODES}, got {verify!r}")
        full = verify != "size"
        self.path = Path(path)
        mpath = self.path / MANIFEST
        if not mpath.is_file():
            raise DataError(f"{self.path}: not a shard set (no manifest.json)")
        try:
            self.manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"{mpath}: manifest is corrupt ({e}); {_rebuild_hint(self.path)}") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != FORMAT:
            got = self.manifest.get("format") if isinstance(self.manifest, dict) else self.manifest
            raise DataError(f"{mpath}: unknown format {got!r} (expected {FORMAT})")
        self.row_len = _field(mpath, self.manifest, "row_len", int)
        self.dtype = _field(mpath, self.manifest, "dtype", np.dtype)
        if self.dtype not in (np.uint16, np.uint32):  # numpy reads `object` too, then fails on the bytes
            raise DataError(f"{mpath}: field 'dtype' is {self.manifest['dtype']!r}, not uint16 or uint32 (the "
                            f"token ids a shard holds); {_rebuild_hint(self.path)}")
        self.vocab_size = _field(mpath, self.manifest, "vocab_size", int)
        self.array_names = _field(mpath, self.manifest, "arrays", list)
        _field(mpath, self.manifest, "n_rows", int)
        shard_entries = _field(mpath, self.manifest, "shards", list)
        if self.row_len < 2:
            raise DataError(f"{mpath}: field 'row_len' is {self.row_len} (a row holds at least 2 tokens); "
                            f"{_rebuild_hint(self.path)}")
        unknown = [a for a in self.array_names if a != "tokens" and a not in OPTIONAL_ARRAYS]
        if unknown:
            raise DataError(f"{mpath}: field 'arrays' names unknown arrays {unknown} (known: tokens, "
                            f"{', '.join(OPTIONAL_ARRAYS)}); {_rebuild_hint(self.path)}")
        self._shards: list[_Shard] = []
        self._max_ids: dict[Path, int | None] = {}  # per tokens file; None until read (old manifests)
        self._vocab_limit: int | None = None  # set by check_vocab: tokens rows read are held to it
        self._max_read: set[Path] = set()  # tokens files whose max id was read from the file, not the manifest
        start, hashed, t0 = 0, 0, time.perf_counter()
        for k, entry in enumerate(shard_entries):
            arrays = {}
            try:
                files, rows = dict(entry["files"]), int(entry["rows"])
                files["tokens"]  # every shard has its tokens file
                for name, info in files.items():
                    lacking = [x for x in ("name", "bytes", "sha256") if x not in info]
                    if lacking or (name != "tokens" and name not in OPTIONAL_ARRAYS):
                        raise KeyError(f"files.{name}.{lacking[0]}" if lacking else f"files.{name}")
            except (KeyError, TypeError, ValueError) as e:
                raise DataError(f"{mpath}: shards[{k}] is malformed (at {e}); {_rebuild_hint(self.path)}") from None
            for name, info in files.items():
                f = self.path / info["name"]
                if not f.is_file():
                    raise DataError(f"{f}: shard file missing; {_rebuild_hint(self.path)}")
                size = f.stat().st_size
                if size != info["bytes"]:
                    raise DataError(f"{f}: truncated or resized ({size} bytes, manifest says {info['bytes']}); "
                                    f"{_rebuild_hint(self.path)}")
                dt = self.dtype if name == "tokens" else np.dtype(OPTIONAL_ARRAYS[name])
                if name == "tokens":
                    self._max_ids[f] = info.get("max_id")
                if full:
                    # the largest id comes from the same pass over the file, so the manifest's (or an old
                    # manifest's missing) max_id is replaced by what the file holds, at no extra read
                    want_max = name == "tokens"
                    sha, mx, n = _scan(f, dt, True, want_max)
                    hashed += n
                    if sha != info["sha256"]:
                        raise DataError(f"{f}: checksum mismatch (file is corrupt: sha256 {sha[:12]}..., "
                                        f"manifest says {info['sha256'][:12]}...); {_rebuild_hint(self.path)}")
                    if want_max:
                        self._max_ids[f] = mx
                        self._max_read.add(f)
                arrays[name] = np.memmap(f, dtype=dt, mode="r", shape=(rows, self.row_len))
            self._shards.append(_Shard(start, rows, arrays, self.path / files["tokens"]["name"]))
            start += rows
        self.n_rows = start
        if self.n_rows != self.manifest["n_rows"]:
            raise DataError(f"{mpath}: shards hold {self.n_rows} rows, manifest says {self.manifest['n_rows']}")
        self._starts = np.array([s.start for s in self._shards], dtype=np.int64)
        if hashed and os.environ.get("RANK", "0") == "0":
            print(f"[preschool] verified {self.path}: {hashed / 1e6:.1f} MB sha256 in "
                  f"{time.perf_counter() - t0:.2f} s (once per process; verify: size skips it)",
                  file=sys.stderr, flush=True)

    def max_token_ids(self) -> dict[Path, int]:
        """Largest token id of each tokens file: from the manifest, or (old manifests) read once."""
        for f, mx in self._max_ids.items():
            if mx is None:
                self._max_ids[f] = _scan(f, self.dtype, False, True)[1]
                self._max_read.add(f)
        return dict(self._max_ids)  # type: ignore[arg-type]

    def check_vocab(self, vocab_size: int) -> None:
        """Raise DataError naming the first tokens file holding an id >= ``vocab_size`` (the model's).

        The per-file maxima are the file's own under ``verify="full"``, the manifest's under "size";
        for a file whose maximum is only the manifest's word, every tokens row read from here on
        (:meth:`row`, :meth:`rows`) is checked too, so an id a manifest under-states stops the read
        naming the file and row instead of reaching an embedding.
        """
        for f, mx in self.max_token_ids().items():
            if mx >= vocab_size:
                raise DataError(f"{f}: token id {mx} >= the model's vocab_size {vocab_size}; {_WRONG_TOKENIZER}")
        for shard in self._shards:
            shard.max_read = shard.tokens_file in self._max_read
        self._vocab_limit = vocab_size

    def __len__(self) -> int:
        return self.n_rows

    @property
    def has_loss_mask(self) -> bool:
        return "loss_mask" in self.array_names

    def _locate(self, i: int) -> tuple[_Shard, int]:
        if not 0 <= i < self.n_rows:
            raise IndexError(f"row {i} out of range for {self.path} ({self.n_rows} rows)")
        k = int(np.searchsorted(self._starts, i, side="right") - 1)
        return self._shards[k], i - self._shards[k].start

    def row(self, i: int, name: str = "tokens") -> np.ndarray:
        shard, j = self._locate(int(i))
        out = np.asarray(shard.arrays[name][j])
        # one max over a row already in memory, for files whose max id is only the manifest's word: what
        # keeps an id the manifest hid out of the model (files read whole on open were checked then)
        if (name == "tokens" and self._vocab_limit is not None and not shard.max_read and out.size
                and out.max() >= self._vocab_limit):
            raise DataError(f"{shard.arrays[name].filename}: row {j} holds token id {out.max()} >= the model's "
                            f"vocab_size {self._vocab_limit}, above the max_id its manifest records "
                            f"(the manifest was edited or written by other code); {_rebuild_hint(self.path)}")
        return out

    def rows(self, indices: Iterable[int], name: str = "tokens") -> np.ndarray:
        """Gather rows (any order) into one int64 array of shape (n, row_len)."""
        idx = list(indices)
        out = np.empty((len(idx), self.row_len), dtype=np.int64)
        for r, i in enumerate(idx):
            out[r] = self.row(i, name)
        return out

    def iter_arrays(self, name: str = "tokens"):
        for s in self._shards:
            yield s.arrays[name]
