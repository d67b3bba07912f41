"""Input documents for ``preschool transform l2t``, read through ``preschool.corpora``.

``iter_texts(src)`` yields ``(doc_id, text)`` in the corpus's deterministic
order (that order defines document indices, hence seeds and the
previous-document distractors). ``src`` is one of:

- a ``.yaml``/``.yml`` file holding a :class:`preschool.corpora.CorpusConfig`;
- ``storybook``: the built-in generated corpus (endless: give ``max_documents``);
- a file or a folder (``source: auto``): each file is read by the reader its
  kind asks for -- ``.txt``/``.md`` text (one document per file), ``.jsonl``
  (text in ``text_field``), ``.parquet`` (column ``text_field``) -- so a folder
  may mix them; files no reader knows are counted (``unsupported_file``), never
  silently skipped. See docs/corpora.md for the rules (links, UTF-16, long lines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..config import from_dict, load_yaml
from ..corpora import CorpusConfig, iter_documents
from ..errors import ConfigError


def corpus_config(src: str | Path, text_field: str = "text", max_documents: int | None = None):
    s = str(src)
    p = Path(s)
    extra = {"max_documents": max_documents} if max_documents else {}
    if p.suffix in (".yaml", ".yml") and p.is_file():
        data = load_yaml(p)
        data = data.get("corpus", data)
        return from_dict(CorpusConfig, {**data, **extra}, "input")
    if s == "storybook":
        if not max_documents:
            raise ConfigError("max_documents", "the storybook corpus is endless: give --max-documents")
        return from_dict(CorpusConfig, {"source": "storybook", **extra}, "input")
    if not p.exists():
        raise ConfigError("input", f"no such file or folder: {p}")
    return from_dict(CorpusConfig, {"source": "auto", "path": s, "text_field": text_field, **extra}, "input")


def iter_texts(src: str | Path, text_field: str = "text", max_documents: int | None = None,
               stats=None) -> Iterator[tuple[str, str]]:
    """``(doc_id, text)`` of ``src``; ``stats`` (a ``corpora.ReadStats``) counts what was read and dropped."""
    for d in iter_documents(corpus_config(src, text_field, max_documents), stats):
        yield d.id, d.text
