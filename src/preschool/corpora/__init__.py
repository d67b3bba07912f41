"""Text sources (plain text, JSONL, Parquet, Hugging Face datasets) and the built-in ``storybook`` corpus.

``iter_documents(CorpusConfig(...))`` streams :class:`Document` s with stable
ids in a deterministic order; ``split_documents`` makes a train/validation
split by document id. See docs/corpora.md.
"""

from .base import (CorpusConfig, Document, ReadStats, chunk_lines, chunk_text, clean_text, is_validation,  # noqa: F401
                   split_documents)
from .grammar import is_grammatical  # noqa: F401
from .sources import SOURCES, Source, iter_documents  # noqa: F401
from .storybook import PARADIGMS, Storybook, StorybookConfig, write_minimal_pairs  # noqa: F401
