"""``text``: plain-text files (``.txt .text .md``), one document per file or per chunk."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Iterable, Iterator

from ...errors import DataError
from ..base import SOURCES, CorpusConfig, ReadStats, bad_utf8_message, chunk_marked, join_segments
from .source import FileSource


@SOURCES.register("text", config=CorpusConfig)
class TextSource(FileSource):
    """Plain-text files: each file is one document (cut into chunks by ``split_documents`` and ``max_chars``).

    A file is streamed line by line in pieces (:meth:`FileSource.raw_lines`),
    so memory stays bounded by ``max_chars`` whatever the file's size and line
    lengths.

    Its pieces carry places inside the file (``(text, at)`` pairs): the byte offset and
    number of the line where the latest piece that a fresh read can produce again starts,
    the chunker's state there (:func:`~preschool.corpora.base.chunk_marked`), whether
    bad UTF-8 was replaced before it, and that piece's index (``first``). A read resumed
    at such a place seeks to the line and passes over the pieces from ``first`` up to the
    position's, so it reads again at most from the latest such piece: in mode ``lines`` a
    line, in ``paragraphs`` a chunk, in ``none`` a ``max_chars`` piece. (Under
    ``on_bad_utf8: drop`` the whole file is checked first, on a resumed read too.)
    """

    extensions = (".txt", ".text", ".md")
    auto_order = 0  # `auto` reads these files with this source

    def read_file(self, path: Path, rel: str, stats: ReadStats,
                  at: dict | None = None) -> Iterator[tuple[str, dict, Iterable[tuple[str, dict]], dict]]:
        c = self.cfg
        if not self.not_utf16(path, stats):
            return
        if c.on_bad_utf8 == "drop" and not self._valid_utf8(path):
            stats.drop("bad_utf8")  # checked first: chunks already handed out could not be taken back
            return
        at = at or {}
        seen = {"replaced": bool(at.get("replaced", False))}  # bad UTF-8 replaced in this file so far
        lines = join_segments(self._segments(path, at, seen), c.max_chars)
        chunks = chunk_marked(lines, c.split_documents, c.chunk_chars, c.max_chars, at.get("state"))
        yield rel, {"source": "text", "path": rel}, self._placed(chunks, at), at
        # Counted once the file's documents are all handed out (this generator resumes for the next file), so
        # no position inside the file includes it and a read resumed there counts it once.
        if seen["replaced"]:
            stats.replaced_bad_utf8 += 1

    @staticmethod
    def _placed(chunks: Iterator[tuple[str, tuple | None]], at: dict) -> Iterator[tuple[str, dict]]:
        """``(chunk, place)``: each chunk with the latest place at or before it (``at``: where this read began)."""
        k = int(at.get("first", 0))
        last = at
        for chunk, place in chunks:
            if place is not None:
                (offset, line, replaced), state = place
                last = {"offset": offset, "line": line, "replaced": replaced, "state": state, "first": k}
            yield chunk, last
            k += 1

    def _valid_utf8(self, path: Path) -> bool:
        dec = codecs.getincrementaldecoder("utf-8")()
        with self.reading(path), self.open_binary(path) as fh:
            try:
                while block := fh.read(1 << 20):
                    dec.decode(block)
                dec.decode(b"", final=True)
            except UnicodeDecodeError:
                return False
        return True

    def _segments(self, path: Path, at: dict, seen: dict) -> Iterator[tuple[str, bool, tuple | None]]:
        """``(text, ends_line, mark)`` pieces of the file, cleaned like :func:`clean_text` (no BOM; CRLF and lone CR
        end lines), from the line at ``at`` (or the start). ``mark`` is where a read can start again at this piece
        (its line's ``(offset, number, whether bad UTF-8 was replaced before it)``) when it starts a line of the
        file, else None (a piece after a lone CR, the rest of a line over ``SEGMENT_BYTES``). Sets
        ``seen["replaced"]`` when it replaces bad UTF-8 (``on_bad_utf8: replace``)."""
        inside = False  # the previous piece's line goes on in this one
        for lineno, start, raw, more in self.raw_lines(path, int(at.get("offset", 0)), int(at.get("line", 1))):
            mark = None if inside else (start, lineno, seen["replaced"])
            inside = more
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                if self.cfg.on_bad_utf8 == "error":
                    raise DataError(bad_utf8_message(str(path), start + e.start, lineno, raw[e.start:e.start + 4])) from None
                text, seen["replaced"] = raw.decode("utf-8", errors="replace"), True
            if "\ufeff" in text:  # removed before the line end is read: CR, BOM, LF is one line end (clean_text)
                text = text.replace("\ufeff", "")
            ends = text.endswith("\n")
            if ends:
                text = text[:-2] if text.endswith("\r\n") else text[:-1]
            if "\r" in text:
                *done, text = text.split("\r")
                for part in done:
                    yield part, True, mark
                    mark = None
            yield text, ends, mark
