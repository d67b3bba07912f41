"""``auto`` (the default source): the reader per file (``text``, ``jsonl``, ``parquet``) by extension or magic bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from ..base import SOURCES, CorpusConfig, ReadStats
from . import FileSource


@SOURCES.register("auto", config=CorpusConfig)
class AutoSource(FileSource):
    """Every file with the reader its kind asks for (see the module docstring): a folder may mix formats."""

    KINDS = ("text", "jsonl", "parquet")

    def __init__(self, cfg: CorpusConfig):
        super().__init__(cfg)
        self.readers: dict[str, FileSource] = {k: SOURCES.get(k).cls(cfg) for k in self.KINDS}

    def kind(self, path: Path) -> str | None:
        for k, reader in self.readers.items():
            if reader.accepts(path):
                return k
        return None

    def accepts(self, path: Path) -> bool:
        return self.kind(path) is not None

    def read_file(self, path: Path, rel: str, stats: ReadStats,
                  at: dict | None = None) -> Iterator[tuple[str, dict, Iterable[str], dict]]:
        # A file named directly, or matched by an explicit glob, was asked for: read it as text if nothing else.
        yield from self.readers[self.kind(path) or "text"].read_file(path, rel, stats, at)
