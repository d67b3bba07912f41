"""The ``l2t`` dataset builder: a corpus turned into L2T samples and raw text (``corpus:`` + an ``l2t:`` block).

It lives here, not in ``data/builders/``, because l2t builds on ``data`` and never the reverse;
``DATASET_BUILDERS`` finds it all the same (data/builder.py). It reads its corpus as the
``corpus`` builder does (data/builders/corpus.py) and writes through l2t/prepare.py.
"""

from __future__ import annotations

from pathlib import Path

from ..corpora.base import ReadStats
from ..data.builder import DATASET_BUILDERS, BuildContext, TokenizedBuilder
from ..data.builders.corpus import corpus_of, read_record
from .prepare import write_l2t_dataset


@DATASET_BUILDERS.register("l2t")
class L2TBuilder(TokenizedBuilder):
    """Language-learning tasks on a corpus's documents, mixed with the raw text (Language Learning Tasks)."""

    def claims(self, spec) -> bool:
        return spec.kind is None and spec.l2t is not None

    def build(self, name: str, spec, key: dict, h: str, ctx: BuildContext, tmp: Path, final: Path) -> dict:
        corpus_cfg = corpus_of(name, spec, ctx)
        read = ReadStats()  # what the corpus read gave and dropped, recorded in dataset.json
        m = write_l2t_dataset(name, spec.l2t, corpus_cfg, ctx.tok, ctx.row_len, ctx.seed, tmp, spec.tokens,
                              spec.val_tokens, spec.val_fraction, ctx.workers, ctx.progress, read,
                              unit_tokens=spec.unit_tokens, resume_as=final)
        return self.entry(spec, key, h, m, read=read_record(name, read))
