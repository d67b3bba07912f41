"""What every text source shares (the package face, ``corpora/sources/__init__.py``, says what sources there
are and how they read): the :class:`Source` and :class:`FileSource` base classes, the folder walk, the
checks a resumed read makes, and :func:`iter_documents`, which applies the shared chunking, cuts, drops and
limits to any source's documents."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ...config import from_dict
from ...errors import ConfigError, DataError
from ..base import SOURCES, CorpusConfig, Document, ReadStats, chunk_text, utf16_policy

DEFAULT_GLOB = "**/*"
SEGMENT_BYTES = 1 << 20  # a line is read in pieces of at most this many bytes
RECORD_CHARS_FACTOR = 16  # a JSON line may hold up to this many bytes per max_chars (escapes, markup)
PARQUET_MAGIC = b"PAR1"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # after json.loads, any left is unpaired (a pair decodes whole)


def glob_regex(pattern: str) -> re.Pattern:
    """A regex matching relative POSIX paths as ``Path.glob(pattern)`` would (``**`` = any folders, ``*`` within one)."""
    parts = pattern.split("/")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        rx = []
        k = 0
        while k < len(part):
            ch = part[k]
            if ch == "*":
                rx.append("[^/]*")
            elif ch == "?":
                rx.append("[^/]")
            elif ch == "[" and part.find("]", k + 2) != -1:
                end = part.find("]", k + 2)
                body = part[k + 1:end]
                rx.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
                k = end
            else:
                rx.append(re.escape(ch))
            k += 1
        out.append("".join(rx) + ("" if last else "/"))
    return re.compile("".join(out))


def walk_files(root: Path, glob: str, stats: ReadStats) -> list[tuple[Path, str]]:
    """``(path, relative path)`` of the files under ``root`` matching ``glob``, sorted, each real file once.

    Follows symbolic links to files and folders; a link to a folder above it
    (a loop) is not followed. Hidden names are skipped. Dangling links are
    counted as ``broken_link``, files reached again through a link as
    ``duplicate_file`` (the smallest relative path is kept).
    """
    rx = glob_regex(glob)
    found: list[tuple[str, Path]] = []
    chain: dict[str, frozenset[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        above = chain.get(os.path.dirname(dirpath), frozenset()) | {os.path.realpath(dirpath)}
        chain[dirpath] = above
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and os.path.realpath(os.path.join(dirpath, d)) not in above)
        for name in filenames:
            if name.startswith("."):
                continue  # editor swap files, our own .tmp files
            f = Path(dirpath) / name
            rel = f.relative_to(root).as_posix()
            if not rx.fullmatch(rel):
                continue
            if not f.exists():
                stats.drop("broken_link")
            elif not f.is_file():
                stats.drop("unsupported_file")  # a FIFO, socket or device
            else:
                found.append((rel, f))
    found.sort(key=lambda x: x[0])
    seen: set[str] = set()
    out = []
    for rel, f in found:
        real = os.path.realpath(f)
        if real in seen:
            stats.drop("duplicate_file")
            continue
        seen.add(real)
        out.append((f, rel))
    return out


def _incomplete_tail(data: bytes) -> int:
    """How many bytes at the end of ``data`` must wait for the next piece: a cut UTF-8 character, or a CR that
    may pair with an LF in the next piece (byte-order marks between them vanish in clean-up, see clean_text)."""
    keep = 0
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 != 0x80:  # the lead byte of the last character
            need = 2 if 0xC0 <= b < 0xE0 else 3 if 0xE0 <= b < 0xF0 else 4 if 0xF0 <= b < 0xF8 else 1
            keep = back if need > back else 0
            break
    if keep and not b"\xef\xbb\xbf".startswith(data[-keep:]):
        return keep  # a cut character other than a BOM: no LF can follow a CR before it
    end = len(data) - keep
    while data.endswith(b"\xef\xbb\xbf", 0, end):
        end -= 3
    return len(data) - end + 1 if data[end - 1:end] == b"\r" else keep


RESTART_HINT = ("; the read cannot continue at the recorded position: start over (remove the prepare's "
                ".<dataset>.work-* folder) or restore the files")


def listed_at(root: str, rels: list[str], at: dict) -> int:
    """The index of position ``at``'s file in ``rels`` (the sorted listing now), after checking that the same
    file is still at that index (files added, removed or renamed before it would shift what follows)."""
    i, rel = int(at["file"]), at["path"]
    if i >= len(rels) or rels[i] != rel:
        now = f"{rels[i]!r} is" if i < len(rels) else f"only {len(rels)} files are"
        raise DataError(f"{root}: file {i} of the listing was {rel!r} when the position was recorded, now {now} "
                        f"there (files were added, removed or renamed){RESTART_HINT}")
    return i


def check_same(where: str, what: str, recorded: dict, now: dict) -> None:
    """Raise a DataError naming ``where`` unless every value of ``now`` equals the ``recorded`` one."""
    changed = [f"{k} {recorded.get(k)} -> {v}" for k, v in now.items() if recorded.get(k) != v]
    if changed:
        raise DataError(f"{where}: {what} changed since the position was recorded ({', '.join(changed)})"
                        f"{RESTART_HINT}")


class Source:
    """Base class: ``documents(stats)`` yields raw documents in a deterministic order."""

    positions = False  # whether its pieces carry ``meta["stream"]``, so ``iter_documents(start=...)`` can resume
    start: dict | None = None  # a position to continue from (see ``iter_documents(start=...)``)

    def __init__(self, cfg: CorpusConfig):
        self.cfg = cfg

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        raise NotImplementedError

    def cut(self, text: str) -> list[str]:
        """One raw text -> its documents (``split_documents``, then the ``max_chars`` bound)."""
        c = self.cfg
        return chunk_text(text, c.split_documents, c.chunk_chars, c.max_chars)

    def pieces(self, stats: ReadStats) -> Iterator[tuple[str, dict, Iterable[str]]]:
        """(id, meta, texts after ``split_documents``) per raw document; a source may override it to stream."""
        for doc in self.documents(stats):
            yield doc.id, doc.meta, self.cut(doc.text)

    def local_files(self) -> list[tuple[Path, str]]:
        """``(path, relative path)`` of the local files the source reads, sorted: what ``dataset.json``
        fingerprints (data/fingerprint.py). By default ``path`` itself, or the files under it that ``glob``
        matches; none without a local ``path`` (storybook, a hub dataset, a URL)."""
        raw = self.cfg.path
        if not raw or "://" in str(raw):
            return []
        root = Path(raw).expanduser()
        if root.is_file():
            return [(root, root.name)]
        return walk_files(root, self.cfg.glob, ReadStats()) if root.is_dir() else []


class FileSource(Source):
    """A source reading files: lists them (see the module docstring), reads each with :meth:`read_file`.

    Every raw document carries its stream position (``meta["stream"]``): the file's index in
    the sorted listing, its relative path, size and mtime, a digest of the listing before it,
    and where the document starts inside the file (``at``, the reader's own: a byte offset and
    line for JSON Lines, a row for Parquet, a line's offset and the chunker's state for text,
    see :class:`TextSource`).
    A read resumed there (:attr:`start`) lists the folder without reading the files before it,
    checks that the file is the one recorded (else a DataError naming it: seeking into other
    bytes would give other documents) and continues inside it at ``at``.
    """

    positions = True
    extensions: tuple[str, ...] = ()  # kept when ``glob`` is left at its default
    # the source ``auto`` asks first whether it takes a file (lowest first); None: ``auto`` never uses it
    auto_order: int | None = None

    def accepts(self, path: Path) -> bool:
        """Whether this source reads ``path`` of a folder listed with the default ``glob``."""
        return path.name.lower().removesuffix(".gz").endswith(self.extensions)

    def files(self, stats: ReadStats) -> list[tuple[Path, str]]:
        """(path, id prefix) pairs: the file itself, or the folder's files this source reads, sorted by relative path."""
        root = Path(self.cfg.path).expanduser()
        if not root.exists():
            raise ConfigError("path", f"file or folder not found: {root}")
        if root.is_file():
            return [(root, root.name)]
        out, skipped = [], []
        for f, rel in walk_files(root, self.cfg.glob, stats):
            if self.cfg.glob == DEFAULT_GLOB and not self.accepts(f):
                stats.drop("unsupported_file")
                skipped.append(rel)
            else:
                out.append((f, rel))
        if not out:
            what = f"glob {self.cfg.glob!r}" + (f" with extension {'/'.join(self.extensions)}"
                                                 if self.cfg.glob == DEFAULT_GLOB and self.extensions else "")
            also = f" (skipped {len(skipped)}: {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''}; " \
                   "set glob to read them as this source)" if skipped else ""
            raise DataError(f"{root}: no files match {what}{also}")
        return out

    def local_files(self) -> list[tuple[Path, str]]:
        return self.files(ReadStats())  # exactly the files it reads (its extensions, not the whole folder)

    def read_file(self, path: Path, rel: str, stats: ReadStats,
                  at: dict | None = None) -> Iterator[tuple[str, dict, Iterable[str], dict]]:
        """``(id, meta, texts, where)`` per raw document of one file, from its start or from ``at``.

        ``where`` (JSON-able) is where that document starts in the file; ``read_file(..., at=where)``
        yields that document and the rest, as a read from the start would.
        """
        for doc, where in self.file_documents(path, rel, stats, at):
            yield doc.id, doc.meta, self.cut(doc.text), where

    def file_documents(self, path: Path, rel: str, stats: ReadStats,
                       at: dict | None = None) -> Iterator[tuple[Document, dict]]:
        """``(document, where it starts)`` per raw document of one file (see :meth:`read_file`)."""
        raise NotImplementedError

    def pieces(self, stats: ReadStats) -> Iterator[tuple[str, dict, Iterable[str]]]:
        """(id, meta with its ``"stream"`` position, texts) per raw document of every file, from :attr:`start`
        when it is set."""
        # resumed: the listing's drops are in the restored counts already
        files = self.files(stats if self.start is None else ReadStats())
        first, at = self.resume_at(files) if self.start is not None else (0, None)
        listing = self.listing_digest(files[:first])
        for i in range(first, len(files)):
            path, rel = files[i]
            size, mtime = self.identity(path)
            where = {"file": i, "path": rel, "size": size, "mtime_ns": mtime, "before": listing.hexdigest()}
            if i > first or self.start is None:
                stats.files += 1  # the file a resumed read starts in was counted before the position
            for doc_id, meta, texts, inside in self.read_file(path, rel, stats, at if i == first else None):
                yield doc_id, {**meta, "stream": {**where, "at": inside}}, texts
            listing.update(self.listing_entry(rel, size, mtime))

    @staticmethod
    def listing_entry(rel: str, size: int, mtime: int) -> bytes:
        return f"{rel}\0{size}\0{mtime}\n".encode()

    @classmethod
    def identity(cls, path: Path) -> tuple[int, int]:
        """``(size, mtime_ns)`` of ``path``: what a recorded position checks before seeking into the file."""
        with cls.reading(path):
            st = path.stat()
        return st.st_size, st.st_mtime_ns

    def listing_digest(self, files: list[tuple[Path, str]]):
        """sha256 over the relative paths, sizes and mtimes of ``files`` (the files a position comes after)."""
        h = hashlib.sha256()
        for path, rel in files:
            h.update(self.listing_entry(rel, *self.identity(path)))
        return h

    def resume_at(self, files: list[tuple[Path, str]]) -> tuple[int, dict]:
        """``(file index, where inside it)`` of :attr:`start`, after checking that the files are the ones it
        was recorded on: the same file at that index, with the same size and mtime, and the same files
        before it. A change raises a DataError naming the file, since the position would point into
        other bytes (the finished work was built from the old ones)."""
        s = self.start
        i = listed_at(str(self.cfg.path), [rel for _, rel in files], s)
        size, mtime = self.identity(files[i][0])
        check_same(str(files[i][0]), "the file", s, {"size": size, "mtime_ns": mtime})
        check_same(str(self.cfg.path), f"the files before {s['path']!r}", s,
                   {"before": self.listing_digest(files[:i]).hexdigest()})
        return i, s["at"]

    # -- shared file helpers
    @staticmethod
    def open_binary(path: Path):
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")

    @staticmethod
    @contextlib.contextmanager
    def reading(path: Path):
        """Turn I/O failures while reading ``path`` (a truncated .gz, a vanished file) into a DataError naming it."""
        try:
            yield
        except (OSError, EOFError) as e:
            raise DataError(f"{path}: could not be read ({type(e).__name__}: {e})") from None

    def head(self, path: Path, n: int = 4096) -> bytes:
        with self.reading(path), self.open_binary(path) as fh:
            return fh.read(n)

    def not_utf16(self, path: Path, stats: ReadStats) -> bool:
        """``False`` when the file looks like UTF-16 and ``on_bad_utf8: drop`` skips it; raises otherwise."""
        return utf16_policy(str(path), self.head(path), self.cfg.on_bad_utf8, stats)

    def raw_lines(self, path: Path, offset: int = 0, lineno: int = 1) -> Iterator[tuple[int, int, bytes, bool]]:
        """``(line number, byte offset, bytes, more)`` pieces of each line, at most ``SEGMENT_BYTES`` each.

        ``more`` says the line continues in the next piece; a piece never ends
        inside a UTF-8 character or between CR and LF. Line ends are kept and a
        leading BOM is dropped; the offset counts from the file start (BOM
        included) so error messages point at the right byte. I/O failures become
        a DataError naming the file. ``offset``/``lineno``: start at that line
        (a byte offset this method gave for it) without reading what comes before;
        a ``.gz`` file cannot seek, so it is decompressed up to there.
        """
        pos = offset
        carry = b""
        more = False
        with self.reading(path), self.open_binary(path) as fh:
            if offset:
                fh.seek(offset)
            while True:
                raw = fh.readline(SEGMENT_BYTES)
                data, carry = carry + raw, b""
                if not data:
                    if more:  # the last piece filled a whole segment exactly at the end of the file
                        yield lineno, pos, b"", False
                    return
                # readline(n) stops early only at a newline or the end of the file
                more = len(raw) >= SEGMENT_BYTES and not raw.endswith(b"\n")
                if more:
                    keep = _incomplete_tail(data)
                    if keep == len(data):
                        carry = data  # nothing whole to hand out yet: read on
                        continue
                    if keep:
                        data, carry = data[:-keep], data[-keep:]
                start, pos = pos, pos + len(data)
                if start == 0 and data.startswith(b"\xef\xbb\xbf"):
                    data, start = data[3:], 3
                yield lineno, start, data, more
                if not more:
                    lineno += 1

    @staticmethod
    def _deferred_replaced(stats: ReadStats, fn: Callable, *args):
        """``(fn(*args), how many replaced_bad_utf8 it counted)``, with that count taken back out of ``stats``.

        A record's replaced bad UTF-8 is counted once the record is handed out (the reader adds it when it
        goes on to the next one, or at the file's end): a record's position holds the counts before the
        record, and a read resumed there decodes the record again (it was counted twice).
        """
        before = stats.replaced_bad_utf8
        out = fn(*args)
        replaced, stats.replaced_bad_utf8 = stats.replaced_bad_utf8 - before, before
        return out, replaced

    def bad_record(self, stats: ReadStats, reason: str, message: str) -> None:
        if self.cfg.on_bad_record == "error":
            raise DataError(message + "; set on_bad_record: drop to skip such records")
        stats.drop(reason)


def local_files(cfg: CorpusConfig) -> list[tuple[Path, str]]:
    """``(path, relative path)`` of the local files corpus ``cfg`` reads (:meth:`Source.local_files`)."""
    return SOURCES.get(cfg.source, "source").cls(cfg).local_files()


def iter_documents(cfg: CorpusConfig | dict, stats: ReadStats | None = None,
                   count_tokens: Callable[[str], int] | None = None, start: dict | None = None) -> Iterator[Document]:
    """Documents of corpus ``cfg`` (a CorpusConfig or its fields as a dict) in a deterministic order, with stable ids.

    Files (sources ``auto``, ``text``, ``jsonl``, ``parquet``), the ``datatrove_*`` readers and a
    streamed ``hf`` corpus give each document ``meta["position"]``, where it starts: the source's
    place (files: the file's index, path, size, mtime and where the record starts in it, see
    :class:`FileSource`; datatrove: the file and the document's index in it, see
    :class:`DatatroveSource`; ``hf``: the dataset's ``state_dict`` before the record and its
    row), the piece of the record, and the counts so far. ``start=`` that position continues the read there, with the same documents,
    ids and ``stats`` an uninterrupted read gives, without reading the prefix again (inside a
    text file it may read again from an earlier piece of the same file, see :class:`TextSource`;
    a ``.gz`` file is decompressed up to the position, a datatrove reader's file read from its
    start). A position on files that changed since is refused with a DataError naming the file.

    ``stats`` (optional) is filled in as documents are read. ``count_tokens``
    (optional) measures ``target_tokens`` in tokenizer tokens instead of
    whitespace words. Documents that are empty after clean-up, or shorter than
    ``min_chars``, are dropped and counted. A document cut by ``max_chars`` in
    mode ``none`` gets chunk ids ``<id>#<k>`` like a split one.
    """
    if isinstance(cfg, dict):
        cfg = from_dict(CorpusConfig, cfg)
    stats = stats if stats is not None else ReadStats()
    source = SOURCES.get(cfg.source, "source").cls(cfg)
    n_docs = 0
    n_tokens = 0
    skip = 0  # pieces of the first record already read before ``start``
    if start is not None:
        if not source.positions:
            keep = sorted(name for name in SOURCES.names() if SOURCES.get(name).cls.positions)
            raise DataError(f"corpus source {cfg.source!r}: a stream position is only kept for sources "
                            f"{', '.join(keep)}")
        source.start = start
        n_docs, n_tokens, skip = int(start["documents"]), int(start["tokens"]), int(start["piece"])
        stats.restore(start["read"])
    for doc_id, meta, pieces in source.pieces(stats):
        stream = meta.get("stream")
        it = iter(pieces)
        piece = next(it, None)
        if piece is None:
            stats.drop("empty")  # nothing left after clean-up (an empty file, a blank record)
            continue
        # a read continued inside a record starts at piece ``at["first"]`` of it (text files)
        k = int((stream.get("at") or {}).get("first", 0)) if stream else 0
        while piece is not None:
            after = next(it, None)  # one piece of look-ahead: a single piece in mode none keeps the plain id
            # a piece may come with its own place in the record (``(text, at)``, text files)
            text, place = piece if isinstance(piece, tuple) else (piece, None)
            if k < skip:
                pass  # read (and counted) before the position this read continues from
            elif not text.strip():
                stats.drop("empty")
            elif len(text) < cfg.min_chars:
                stats.drop("too_short")
            else:
                if cfg.split_documents == "none" and k == 0 and after is None:
                    out = Document(doc_id, text, meta)
                else:
                    out = Document(f"{doc_id}#{k}", text, {**meta, "chunk": k})
                if stream is not None:  # where this document starts: ``iter_documents(start=...)`` continues here
                    out.meta = {**out.meta, "position": {
                        **stream, **({"at": place} if place is not None else {}), "piece": k, "documents": n_docs,
                        "tokens": n_tokens, "read": stats.as_dict()}}
                    del out.meta["stream"]
                words = len(text.split())
                stats.documents += 1
                stats.chars += len(text)
                stats.words += words
                n_docs += 1
                n_tokens += count_tokens(text) if count_tokens is not None else words
                yield out
                if (cfg.max_documents is not None and n_docs >= cfg.max_documents) or \
                        (cfg.target_tokens is not None and n_tokens >= cfg.target_tokens):
                    return
            piece, k = after, k + 1
        skip = 0
