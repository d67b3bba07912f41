"""``storybook``: the built-in offline corpus of grammar-generated stories (endless; limit it)."""

from __future__ import annotations

import itertools
from typing import Iterator

from ..base import SOURCES, CorpusConfig, Document, ReadStats
from ..storybook import Storybook
from .source import Source


@SOURCES.register("storybook", config=CorpusConfig)
class StorybookSource(Source):
    """The built-in offline corpus: simple English stories from a probabilistic grammar (endless; limit it)."""

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        book = Storybook(self.cfg.storybook, seed=self.cfg.seed)
        for i in itertools.count():
            yield Document(f"storybook:{i}", book.story(i), {"source": "storybook", "index": i, "seed": self.cfg.seed})
