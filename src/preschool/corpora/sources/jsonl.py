"""``jsonl``: JSON Lines files (``.jsonl .json .ndjson``, optionally ``.gz``), one record per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from ...errors import DataError
from ..base import SOURCES, CorpusConfig, Document, ReadStats, clean_text, decode_bytes
from .source import FileSource, RECORD_CHARS_FACTOR, LONE_SURROGATE


@SOURCES.register("jsonl", config=CorpusConfig)
class JsonlSource(FileSource):
    """JSON Lines files: one JSON object per line; the text is ``record[text_field]``.

    Lines that are empty or whitespace only are not records. A line over
    ``16 x max_chars`` bytes is a bad record (``too_long``) and is skipped
    without being held in memory.
    """

    extensions = (".jsonl", ".json", ".ndjson")
    auto_order = 1  # `auto` reads these files with this source

    def _lines(self, path: Path, offset: int, lineno: int) -> Iterator[tuple[int, int, bytes | None, int]]:
        """``(line number, byte offset, bytes or None when over the limit, size)`` per line from line ``lineno``
        at byte ``offset``, line end removed."""
        limit = RECORD_CHARS_FACTOR * self.cfg.max_chars
        parts: list[bytes] = []
        size = 0
        first = None
        for lineno, start, raw, more in self.raw_lines(path, offset, lineno):
            first = start if first is None else first
            size += len(raw)
            if size <= limit + 2:  # + the line end
                parts.append(raw)
            if more:
                continue
            yield lineno, first, b"".join(parts).rstrip(b"\r\n") if size <= limit + 2 else None, size
            parts, size, first = [], 0, None

    def file_documents(self, path: Path, rel: str, stats: ReadStats,
                       at: dict | None = None) -> Iterator[tuple[Document, dict]]:
        c = self.cfg
        if not self.not_utf16(path, stats):
            return
        # where a record starts: its line's byte offset (a resumed read seeks there) and number
        offset, line = (int(at["offset"]), int(at["line"])) if at else (0, 1)
        replaced = 0  # see _deferred_replaced
        for lineno, start, raw, size in self._lines(path, offset, line):
            stats.replaced_bad_utf8, replaced = stats.replaced_bad_utf8 + replaced, 0
            where = f"{path}:{lineno}"
            if raw is None:
                self.bad_record(stats, "too_long", f"{where}: record of {size:,} bytes is over the limit of "
                                f"{RECORD_CHARS_FACTOR * c.max_chars:,} bytes ({RECORD_CHARS_FACTOR} x max_chars); "
                                "raise max_chars or split the record")
                continue
            if lineno == 1 and raw.lstrip().startswith(b"[") and not raw.rstrip().endswith(b"]"):
                raise DataError(f"{path}: looks like one JSON array, not JSON Lines (one object per line); "
                                "convert it, or read it with source: hf, hf_name: json")
            if not raw.strip():
                continue  # blank lines (a trailing newline pair) are not records
            # The file's head was checked for UTF-16 above. A line with raw NULs in a file that is not UTF-16
            # can never be valid JSON: it is one bad record (bad_utf8 or bad_json), never a "utf16" drop,
            # which in JSON Lines means the whole file was skipped.
            line, replaced = self._deferred_replaced(stats, decode_bytes, raw, where, c.on_bad_utf8, stats, start,
                                                     None, False)
            if line is None:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                self.bad_record(stats, "bad_json", f"{where}: not valid JSON ({e.msg} at column {e.colno})")
                continue
            except RecursionError:
                self.bad_record(stats, "bad_json", f"{where}: JSON nested too deeply to read")
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get(c.text_field), str):
                got = type(rec.get(c.text_field)).__name__ if isinstance(rec, dict) else type(rec).__name__
                self.bad_record(stats, "missing_field",
                                f"{where}: no string field {c.text_field!r} (text_field) in this record, got {got}")
                continue
            did = str(rec[c.id_field]) if c.id_field and c.id_field in rec else f"{rel}:{lineno}"
            if (lone := LONE_SURROGATE.search(rec[c.text_field]) or LONE_SURROGATE.search(did)) is not None:
                # JSON may escape half a UTF-16 pair alone; Python keeps it, but no UTF-8 writer (the
                # tokenizer, a shard, a manifest) can, so the record would crash whatever reads it next
                self.bad_record(stats, "bad_json", f"{where}: a lone surrogate \\u{ord(lone.group()):04x} "
                                "(half of a UTF-16 pair) is not text UTF-8 can hold")
                continue
            yield (Document(did, clean_text(rec[c.text_field]), {"source": "jsonl", "path": rel, "line": lineno}),
                   {"offset": start, "line": lineno})
        stats.replaced_bad_utf8 += replaced
