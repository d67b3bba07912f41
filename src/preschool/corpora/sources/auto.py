"""``auto`` (the default source): each file read by the first file source that takes it (``auto_order``)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from ..base import SOURCES, CorpusConfig, ReadStats
from .source import FileSource


@SOURCES.register("auto", config=CorpusConfig)
class AutoSource(FileSource):
    """Every file with the reader its kind asks for (see the module docstring): a folder may mix formats."""

    def __init__(self, cfg: CorpusConfig):
        super().__init__(cfg)
        self.readers: dict[str, FileSource] = {k: SOURCES.get(k).cls(cfg) for k in self.kinds()}

    @staticmethod
    def kinds() -> list[str]:
        """The file sources ``auto`` picks from, in the order it asks them (``auto_order``: text, jsonl,
        parquet, then any new file source that sets one, e.g. a plug-in's), so a new format joins ``auto``
        from its own file."""
        files = [e for e in SOURCES if isinstance(e.cls, type) and issubclass(e.cls, FileSource)
                 and e.cls.auto_order is not None]
        return [e.name for e in sorted(files, key=lambda e: (e.cls.auto_order, e.name))]

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
