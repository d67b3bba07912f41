"""Input documents for ``preschool transform l2t``.

``iter_texts(src)`` yields ``(doc_id, text)`` in a fixed order (the order defines
document indices, hence seeds and previous-document distractors):

- a ``.txt`` file: the whole file is one document;
- a ``.jsonl`` file: one document per line, text under ``text_field``;
- a folder: its ``*.txt`` / ``*.jsonl`` files (recursively), sorted by path.

Text is read as UTF-8 with a byte-order mark removed and CRLF turned into LF.
When ``preschool.corpora`` provides ``CorpusConfig``/``iter_documents``, a
``.yaml`` corpus spec is read through it instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from ..errors import ConfigError, DataError


def _read_txt(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as e:
        raise DataError(f"{p}: not UTF-8 text ({e})") from None


def _read_jsonl(p: Path, field: str) -> Iterator[tuple[str, str]]:
    with open(p, encoding="utf-8-sig") as fh:
        for ln, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{p}:{ln}: not JSON ({e})") from None
            if not isinstance(row, dict) or not isinstance(row.get(field), str):
                raise DataError(f"{p}:{ln}: no string field {field!r}")
            yield f"{p.name}:{ln}", row[field].replace("\r\n", "\n")


def iter_texts(src: str | Path, text_field: str = "text") -> Iterator[tuple[str, str]]:
    p = Path(src)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        try:
            from ..config import from_dict, load_yaml
            from ..corpora import CorpusConfig, iter_documents  # type: ignore[attr-defined]
        except ImportError:
            raise ConfigError("input", f"{p}: corpus specs need preschool.corpora, which is not available") from None
        for d in iter_documents(from_dict(CorpusConfig, load_yaml(p))):
            yield str(d.id), d.text
        return
    if not p.exists():
        raise ConfigError("input", f"no such file or folder: {p}")
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.suffix in (".txt", ".jsonl") and f.is_file())
    if not files:
        raise ConfigError("input", f"{p}: no .txt or .jsonl files")
    for f in files:
        if f.suffix == ".jsonl":
            yield from _read_jsonl(f, text_field)
        else:
            yield f.name, _read_txt(f)
