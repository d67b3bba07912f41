"""Documents, read statistics, the corpus config, text clean-up and the train/val split.

A corpus is read as a stream of :class:`Document` (``id``, ``text``, ``meta``).
Ids are stable across runs and machines (``<relative file>``,
``<relative file>#<chunk>``, ``<relative file>:<line>``, ``storybook:<index>``)
and documents come in a deterministic order (files sorted by relative path),
so anything keyed on ids -- the train/validation split, exclusion lists,
``doc_ids.txt`` -- is reproducible.

Every source passes its raw text through :func:`clean_text` (BOM and CR
removed) and then through :func:`chunk_lines`, which turns one long text (a
novel) into many documents of about ``chunk_chars`` characters made of whole
paragraphs when ``split_documents`` asks for it, and in every mode cuts a
document longer than ``max_chars`` into pieces of at most ``max_chars``, so no
reader or transform ever holds more than about ``max_chars`` of one document.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal

from ..config import check
from ..errors import ConfigError, DataError
from ..registry import Registry
from .storybook import StorybookConfig

SOURCES = Registry("source", packages=("preschool.corpora.sources",), plugin_module="sources")  # corpora/sources/, a module per source


@dataclass
class Document:
    """One training document. ``id`` is unique within its corpus and stable across runs."""

    id: str
    text: str
    meta: dict = field(default_factory=dict)


@dataclass
class ReadStats:
    """What a read produced and what it skipped (by reason), for manifests and logs.

    ``drops`` reasons, each counted once per input unit it removed (a file, a
    record or a chunk): ``empty`` (no non-whitespace text: empty files, blank
    records), ``too_short`` (under ``min_chars``), ``bad_utf8``
    (``on_bad_utf8: drop``), ``utf16`` (a UTF-16 file, or a Parquet binary
    value, under ``on_bad_utf8: drop``; a JSON line is never one, its file's
    head is what is checked), ``bad_json``, ``missing_field`` and ``too_long``
    (a JSON line over the record limit; ``on_bad_record: drop``), and for folders
    ``unsupported_file`` (an extension no reader of this source knows),
    ``duplicate_file`` (the same file reached twice through a symbolic link)
    and ``broken_link``. ``replaced_bad_utf8`` counts inputs (files or lines)
    in which undecodable bytes were replaced by U+FFFD.
    """

    files: int = 0
    documents: int = 0
    chars: int = 0
    words: int = 0  # whitespace-separated words in yielded documents
    replaced_bad_utf8: int = 0
    drops: Counter = field(default_factory=Counter)

    def drop(self, reason: str, n: int = 1) -> None:
        self.drops[reason] += n

    def dropped(self) -> int:
        return sum(self.drops.values())

    def summary(self) -> str:
        """``"empty: 2, bad_json: 1"``, most frequent first (``"none"`` when nothing was dropped)."""
        return drop_summary(self.drops)

    def as_dict(self) -> dict:
        return {"files": self.files, "documents": self.documents, "chars": self.chars, "words": self.words,
                "replaced_bad_utf8": self.replaced_bad_utf8, "drops": dict(sorted(self.drops.items()))}

    def restore(self, saved: dict) -> None:
        """Set every count to ``saved`` (an :meth:`as_dict`), e.g. where a resumed read continues."""
        self.files, self.documents, self.chars = int(saved["files"]), int(saved["documents"]), int(saved["chars"])
        self.words, self.replaced_bad_utf8 = int(saved["words"]), int(saved["replaced_bad_utf8"])
        self.drops.clear()
        self.drops.update(saved["drops"])


def drop_summary(drops: dict, top: int | None = None) -> str:
    """Drop counts as ``"reason: n, ..."``, most frequent first; ``"none"`` for no drops."""
    items = sorted(drops.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ", ".join(f"{k}: {v}" for k, v in items) or "none"


SplitMode = Literal["none", "paragraphs", "lines"]


@dataclass
class CorpusConfig:
    """Where a corpus comes from and how it is cut into documents (see docs/corpora.md).

    ``source``: ``auto`` | ``text`` | ``jsonl`` | ``parquet`` | ``hf`` |
    ``storybook``; ``auto`` picks the reader per file (by extension, Parquet
    also by its magic bytes), so a folder may mix formats.
    ``path``: a file or folder (auto/text/jsonl/parquet); for ``hf`` an optional
    local ``save_to_disk`` folder or data files for a builder such as
    ``parquet``. Reading stops after ``max_documents`` documents or once
    ``target_tokens`` whitespace words (or tokens, when ``iter_documents`` gets
    a ``count_tokens`` callback) have been yielded; storybook with neither is
    an endless stream the consumer stops.
    """

    source: str = "auto"
    path: str | None = None
    text_field: str = "text"
    id_field: str | None = None  # jsonl/parquet/hf: use this field as the document id (default: file:line / row)
    glob: str = "**/*"  # for folders; the default '**/*' keeps only the source's own extensions
    hf_name: str | None = None
    hf_config: str | None = None
    hf_split: str = "train"
    streaming: bool = True
    max_documents: int | None = None
    target_tokens: int | None = None
    split_documents: SplitMode = "none"
    chunk_chars: int = 4000
    max_chars: int = 1_000_000  # longer documents (or lines) are cut into pieces of at most this many characters
    on_bad_utf8: Literal["error", "replace", "drop"] = "error"
    on_bad_record: Literal["error", "drop"] = "error"
    min_chars: int = 1
    seed: int = 0
    storybook: StorybookConfig = field(default_factory=StorybookConfig)

    def validate(self) -> None:
        SOURCES.get(self.source, "source")  # unknown source -> ConfigError with "did you mean"
        if self.source in ("auto", "text", "jsonl", "parquet"):
            check(bool(self.path), "path", f"source {self.source!r} needs a file or folder path")
        if self.source == "hf":
            check(bool(self.hf_name) or bool(self.path), "hf_name",
                  "source 'hf' needs hf_name (a hub dataset or a builder like 'parquet') or a save_to_disk path")
        check(self.max_documents is None or self.max_documents > 0, "max_documents",
              f"must be > 0 (or null for no limit), got {self.max_documents}")
        check(self.target_tokens is None or self.target_tokens > 0, "target_tokens",
              f"must be > 0 (or null for no limit), got {self.target_tokens}")
        check(self.chunk_chars >= 100, "chunk_chars", f"must be >= 100, got {self.chunk_chars}")
        check(self.max_chars >= max(1000, self.chunk_chars), "max_chars",
              f"must be >= 1000 and >= chunk_chars ({self.chunk_chars}), got {self.max_chars}")
        check(self.min_chars >= 1, "min_chars", f"must be >= 1, got {self.min_chars}")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        check(bool(self.text_field), "text_field", "must not be empty")
        check(bool(self.glob), "glob", "must not be empty")
        try:
            self.storybook.validate()
        except Exception as e:  # re-root the nested field name
            if isinstance(e, ConfigError):
                raise ConfigError(f"storybook.{e.field}", str(e).split(": ", 1)[-1]) from None
            raise


# ---------------------------------------------------------------- text clean-up

_CR = re.compile(r"\r\n?")


def clean_text(text: str) -> str:
    """Drop byte-order marks and turn CRLF / lone CR into LF; nothing else is changed."""
    if "\ufeff" in text:
        text = text.replace("\ufeff", "")  # a BOM mid-text comes from concatenated files
    if "\r" in text:
        text = _CR.sub("\n", text)
    return text


def bad_utf8_message(where: str, offset: int, line: int | None, snippet: bytes) -> str:
    at = f"byte offset {offset}" + (f", line {line}" if line is not None else "")
    return f"{where}: invalid UTF-8 at {at} ({snippet!r}); set on_bad_utf8: replace or drop to read it anyway"


_UTF16_BOMS = {b"\xff\xfe": "FF FE", b"\xfe\xff": "FE FF"}


def utf16_hint(head: bytes) -> str | None:
    """Why ``head`` (the first bytes of a file or value) looks like UTF-16, or ``None``.

    Two signs: a UTF-16 byte-order mark, or NUL bytes at (nearly) every other
    position -- ASCII text in UTF-16 -- which is valid UTF-8 and would
    otherwise come out as text interleaved with NULs.
    """
    for bom, name in _UTF16_BOMS.items():
        if head.startswith(bom):
            return f"it starts with the UTF-16 byte-order mark {name}"
    sample = head[:4096]
    if len(sample) < 4 or b"\x00" not in sample:
        return None
    even, odd = sample[0::2], sample[1::2]
    z = sorted((even.count(0) / len(even), odd.count(0) / len(odd)))
    if z[1] >= 0.3 and z[0] <= 0.05:
        return "NUL bytes stand at every other position"
    return None


def utf16_message(where: str, hint: str) -> str:
    return (f"{where}: looks like UTF-16, not UTF-8 ({hint}); convert it to UTF-8 first, e.g. "
            f"iconv -f UTF-16 -t UTF-8 <file> > <file>.utf8.txt (on_bad_utf8: drop skips such files)")


def utf16_policy(where: str, head: bytes, policy: str, stats: ReadStats) -> bool:
    """``False`` when ``head`` looks like UTF-16 and ``policy`` drops it (counted); raises under error/replace.

    ``replace`` does not apply: U+FFFD replacement would turn UTF-16 into NUL-interleaved noise.
    """
    hint = utf16_hint(head)
    if hint is None:
        return True
    if policy == "drop":
        stats.drop("utf16")
        return False

    raise DataError(utf16_message(where, hint))


def decode_bytes(data: bytes, where: str, policy: str, stats: ReadStats, base_offset: int = 0,
                 first_line: int | None = None, check_utf16: bool = True) -> str | None:
    """UTF-8 decode under ``on_bad_utf8``; ``None`` means dropped.

    ``where`` names the file (and line); the error gives the byte offset in the
    file (``base_offset`` + position in ``data``) and, when ``first_line`` (the
    line ``data`` starts on) is given, the line of the bad byte. With
    ``check_utf16``, data that looks like UTF-16 is reported as such
    (:func:`utf16_policy`); a reader that already checked the whole file's head
    passes ``False`` for the records inside it.
    """
    if (check_utf16 and (data[:2] in _UTF16_BOMS or b"\x00" in data[:4096])
            and not utf16_policy(where, data, policy, stats)):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if policy == "error":
            line = None if first_line is None else first_line + data.count(b"\n", 0, e.start)
            raise DataError(bad_utf8_message(where, base_offset + e.start, line, data[e.start:e.start + 4])) from None
        if policy == "drop":
            stats.drop("bad_utf8")
            return None
        stats.replaced_bad_utf8 += 1
        return data.decode("utf-8", errors="replace")


_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def _cut_point(text: str, start: int, limit: int) -> int:
    """Where to end the piece of ``text`` that starts at ``start`` and may hold ``limit`` characters.

    After the last sentence end in the window, else after its last space, else
    a hard cut at ``limit``; a cut in the first quarter of the window would
    waste a piece, so it is only taken when nothing better exists.
    """
    window = text[start:start + limit]
    cut = max((m.end() for m in _SENT_END.finditer(window)), default=0)
    min_cut = max(1, limit // 4)
    if cut < min_cut:
        sp = window.rfind(" ")
        cut = sp + 1 if sp + 1 >= min_cut else limit
    return start + cut


def _cut_long(line: str, chunk_chars: int) -> Iterator[str]:
    """Pieces of at most ``chunk_chars`` of one long line: cut after a sentence end, else at a space."""
    start = 0
    n = len(line)
    while n - start > chunk_chars:
        cut = _cut_point(line, start, chunk_chars)
        piece = line[start:cut].rstrip()
        if piece.strip():
            yield piece
        start = cut
    if line[start:].strip():
        yield line[start:]


def join_segments(segments: Iterable[tuple[str, bool, Any]], max_chars: int) -> Iterator[tuple[str, Any]]:
    """``(line, mark)`` from ``(text, ends_line, mark)`` segments of a stream, each line at most ``max_chars`` long.

    A line longer than ``max_chars`` comes out as several lines, cut as
    :func:`_cut_long` cuts (sentence end, else space), so memory stays about
    ``max_chars`` plus one segment however long the line is in the input. The
    last segment of a stream ends no line: what follows the last line end is
    the last line (empty when the input ends with a newline), as ``str.split("\\n")``; the blank rest of
    a cut line is no line (as :func:`_cut_long` drops it).
    A line carries the mark of the segment it starts with (a reader's place in its
    input, see :func:`chunk_marked`); the pieces after a cut carry None.
    """
    buf: list[str] = []
    size = 0
    mark = None
    cut_off = False  # a piece of the current line went out already: a blank rest is no line (as in _cut_long)
    for text, ends_line, m in segments:
        if not buf:
            mark = m
        buf.append(text)
        size += len(text)
        if size > max_chars:
            joined = "".join(buf)
            start = 0
            while len(joined) - start > max_chars:
                cut = _cut_point(joined, start, max_chars)
                piece = joined[start:cut].rstrip()
                if piece.strip():
                    yield piece, mark
                    mark = None
                start, cut_off = cut, True
            buf, size, mark = [joined[start:]], len(joined) - start, None
        if ends_line:
            rest = "".join(buf)
            if not cut_off or rest.strip():
                yield rest, mark
            buf, size, mark, cut_off = [], 0, None, False
    rest = "".join(buf)
    if not cut_off or rest.strip():
        yield rest, mark


def _bounded(lines: Iterable[tuple[str, Any]], max_chars: int | None) -> Iterator[tuple[str, Any]]:
    """``(line, mark)`` pairs with every line over ``max_chars`` cut into pieces (see :func:`_cut_long`); only a
    first piece that starts its line (the line does not start with a space) keeps the line's mark."""
    for ln, mark in lines:
        if max_chars is None or len(ln) <= max_chars:
            yield ln, mark
        else:
            keep = mark if ln[:1].strip() else None  # else the first window may be blank and not come out
            for piece in _cut_long(ln, max_chars):
                yield piece, keep
                keep = None


def _place(mark: Any, **state: Any) -> tuple[Any, dict] | None:
    """Where a chunk starting at a line with ``mark`` can be produced again: the mark and the chunker state there."""
    return None if mark is None else (mark, state)


def _pack_lines(lines: Iterable[tuple[str, Any]], max_chars: int | None,
                cut: bool = False) -> Iterator[tuple[str, tuple | None]]:
    """Mode ``none``: the whole text (lines joined with newlines), cut at line ends into pieces of at most ``max_chars``.

    A text that fits is returned exactly; otherwise whitespace-only pieces are skipped. ``cut``:
    a piece was already cut off before ``lines`` (a read continued inside the text).
    """
    buf: list[str] = []
    size = 0
    start = None
    for ln, mark in _bounded(lines, max_chars):
        add = len(ln) + (1 if buf else 0)
        if buf and max_chars is not None and size + add > max_chars:
            text = "\n".join(buf)
            if text.strip():
                yield text, start
            buf, size, cut, add = [], 0, True, len(ln)
        if not buf:
            start = _place(mark, cut=cut)
        buf.append(ln)
        size += add
    text = "\n".join(buf)
    if not cut or text.strip():
        yield text, start


class _Packer:
    """Greedy chunk builder: pieces (with the separator that stood before them) until the next would overflow.

    Each chunk comes out with the place of its first piece (``add``'s ``place``)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.cur: list[str] = []
        self.size = 0
        self.place: tuple | None = None

    def add(self, piece: str, sep: str, place: tuple | None = None) -> Iterator[tuple[str, tuple | None]]:
        if self.cur and self.size + len(sep) + len(piece) > self.limit:
            yield "".join(self.cur), self.place
            self.cur, self.size = [], 0
        if self.cur:
            self.cur.append(sep)
            self.size += len(sep)
        else:
            self.place = place
        self.cur.append(piece)
        self.size += len(piece)

    def add_line(self, line: str, sep: str, place: tuple | None = None) -> Iterator[tuple[str, tuple | None]]:
        if len(line) <= self.limit:
            yield from self.add(line, sep, place)
            return
        for k, piece in enumerate(_cut_long(line, self.limit)):
            yield from self.add(piece, sep if k == 0 else " ", place if k == 0 and line[:1].strip() else None)

    def flush(self) -> Iterator[tuple[str, tuple | None]]:
        if self.cur:
            yield "".join(self.cur), self.place
        self.cur, self.size = [], 0


def chunk_lines(lines: Iterable[str], mode: str, chunk_chars: int, max_chars: int | None = None) -> Iterator[str]:
    """Cut a cleaned text, given as its lines (no newlines), into documents; streams in bounded memory.

    ``none``: the whole text. ``lines``: each non-blank line. ``paragraphs``: a
    paragraph is a run of lines without a blank (empty or spaces/tabs only)
    line; paragraphs are joined with a blank line until adding the next would
    pass ``chunk_chars``. A paragraph longer than that is taken line by line
    (joined with a newline), and a line longer than that is cut after a
    sentence end, else at a space, so no chunk is over ``chunk_chars``. A text
    with one paragraph per line and no blank lines is thus cut at line ends.

    ``max_chars`` bounds every mode: a line longer than it is first cut into
    pieces (sentence end, else space), and in mode ``none`` a text longer than
    it is cut at line ends into pieces of at most ``max_chars``. Memory stays
    about ``chunk_chars`` (``max_chars`` in mode ``none``) plus the longest line.
    """
    for chunk, _ in chunk_marked(((ln, None) for ln in lines), mode, chunk_chars, max_chars):
        yield chunk


def chunk_marked(lines: Iterable[tuple[str, Any]], mode: str, chunk_chars: int, max_chars: int | None = None,
                 state: dict | None = None) -> Iterator[tuple[str, tuple | None]]:
    """:func:`chunk_lines` over ``(line, mark)`` pairs, each chunk with the place it can be produced again from.

    A mark (anything but None; None: no mark) says where a reader can start reading again at
    that line, e.g. its byte offset. A chunk's place is ``(mark, state)`` when the chunk starts
    at the start of a marked line where the chunker's state is small (``state``, a dict: mode
    ``none`` whether a piece was cut off before, ``paragraphs`` whether the paragraph is being
    taken line by line), else None. Given the lines from that mark on and ``state``, this
    function yields that chunk and the ones after it, exactly as the whole text does.
    """
    state = state or {}
    if mode == "none":
        yield from _pack_lines(lines, max_chars, bool(state.get("cut", False)))
        return
    lines = _bounded(lines, max_chars)
    if mode == "lines":
        yield from ((ln, _place(mark)) for ln, mark in lines if ln.strip())
        return
    pack = _Packer(chunk_chars)
    para: list[str] = []
    marks: list[Any] = []
    size = 0
    big = bool(state.get("big", False))  # the current paragraph overflowed: its lines go out one by one
    for ln, mark in lines:
        if not ln.strip(" \t"):
            if para and not big and "".join(para).strip():
                yield from pack.add("\n".join(para), "\n\n", _place(marks[0], big=False))
            para, marks, size, big = [], [], 0, False
        elif big:
            if ln.strip():
                yield from pack.add_line(ln, "\n", _place(mark, big=True))
        else:
            size += len(ln) + (1 if para else 0)
            para.append(ln)
            marks.append(mark)
            if size > chunk_chars:
                big = True
                sep = "\n\n"
                # from its first line the paragraph overflows again; from a later line on, the lines go out
                # one by one (``big``) as they do here
                for i, held in enumerate(para):
                    if held.strip():
                        yield from pack.add_line(held, sep, _place(marks[i], big=i > 0))
                        sep = "\n"
                para, marks = [], []
    if para and not big and "".join(para).strip():
        yield from pack.add("\n".join(para), "\n\n", _place(marks[0], big=False))
    yield from pack.flush()


def chunk_text(text: str, mode: str, chunk_chars: int, max_chars: int | None = None) -> list[str]:
    """:func:`chunk_lines` over a whole text held in memory."""
    if mode == "none" and (max_chars is None or len(text) <= max_chars):
        return [text]
    return list(chunk_lines(text.split("\n"), mode, chunk_chars, max_chars))

# ---------------------------------------------------------------- train / validation split

def is_validation(doc_id: str, val_fraction: float, seed: int = 0) -> bool:
    """Whether ``doc_id`` is held out: sha256("<seed>:<id>") read as a fraction of 2^64, compared to ``val_fraction``.

    Depends only on (seed, id) -- never on order or worker count -- and
    is the one split rule every layer uses (data.prepare, L2T, Control).
    """
    if val_fraction <= 0:
        return False
    h = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < val_fraction


def split_documents(docs: Iterable[Document | str], val_fraction: float, seed: int = 0,
                    by_source: bool = False) -> tuple[list[str], list[str]]:
    """Split documents (or ids) into (train_ids, val_ids) by hashing (seed, id); keeps input order.

    ``by_source``: hash the id without its ``#<chunk>`` suffix, so every chunk of
    one file or record (a whole novel) lands on the same side.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ConfigError("val_fraction", f"must be in [0, 1), got {val_fraction}")
    train: list[str] = []
    val: list[str] = []
    for d in docs:
        did = d if isinstance(d, str) else d.id
        key = did.rsplit("#", 1)[0] if by_source else did
        (val if is_validation(key, val_fraction, seed) else train).append(did)
    return train, val
