"""The ``l2t`` dataset builder: a corpus turned into L2T samples and raw text (``corpus:`` + an ``l2t:`` block).

It lives here, not in ``data/builders/``, because l2t builds on ``data`` and never the reverse;
``DATASET_BUILDERS`` finds it all the same (data/builder.py). It reads its corpus as the
``corpus`` builder does (data/builders/corpus.py) and writes through l2t/prepare.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..corpora.base import ReadStats
from ..data.builder import DATASET_BUILDERS, BuildContext, DocumentSpec, TokenizedBuilder
from ..data.builders.corpus import corpus_of, read_record
from ..data.flat_spec import FlatRecord
from .prepare import l2t_build_config, write_l2t_dataset


@dataclass(kw_only=True)
class L2TSpec(FlatRecord, DocumentSpec):
    """``data.<name>: {corpus: <corpora entry>, l2t: {...}, tokens: ...}``: a corpus as L2T samples + raw text.

    Named by ``l2t`` (its ``corpus`` is the text it transforms, so ``corpus:`` + ``l2t:`` is this kind, not
    a corpus dataset). ``l2t`` holds l2t.build.BuildConfig fields (scenario, tasks, mixing); there is no
    ``params``."""

    named_by = "l2t"
    l2t: dict[str, Any]  # l2t.build.BuildConfig fields

    def document_start(self) -> str | None:
        return "bos"  # the reference tokenizes every sample and raw document with BOS, no EOS (l2t/build.py)

    def check_refs(self, name: str, experiment: Any) -> None:
        super().check_refs(name, experiment)
        l2t_build_config(self.l2t, experiment.seq_len, experiment.seed, self.tokens, self.val_tokens,
                         self.val_fraction, field=f"data.{name}.l2t")


@DATASET_BUILDERS.register("l2t", config=L2TSpec)
class L2TBuilder(TokenizedBuilder):
    """Language-learning tasks on a corpus's documents, mixed with the raw text (Language Learning Tasks)."""

    def build(self, name: str, spec, key: dict, h: str, ctx: BuildContext, tmp: Path, final: Path) -> dict:
        corpus_cfg = corpus_of(name, spec, ctx)
        read = ReadStats()  # what the corpus read gave and dropped, recorded in dataset.json
        m = write_l2t_dataset(name, spec.l2t, corpus_cfg, ctx.tok, ctx.row_len, ctx.seed, tmp, spec.tokens,
                              spec.val_tokens, spec.val_fraction, ctx.workers, ctx.progress, read,
                              unit_tokens=spec.unit_tokens, resume_as=final)
        return self.entry(spec, key, h, m, read=read_record(name, read))
