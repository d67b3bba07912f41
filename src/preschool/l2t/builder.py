"""The ``l2t`` dataset builder: a corpus turned into L2T samples and raw text (``corpus:`` + an ``l2t:`` block).

It lives here, not in ``data/builders/``, because l2t builds on ``data`` and never the reverse;
``DATASET_BUILDERS`` finds it all the same (data/builder.py). It reads its corpus as the
``corpus`` builder does (data/builders/corpus.py) and writes the shard sets with l2t/write.py.

An experiment dataset with an ``l2t:`` block (a :class:`BuildConfig` as a
mapping, without ``seq_len``) is built from its corpus by
:func:`write_l2t_dataset` into ``<data>/<name>/{train,val}``, with the
experiment's tokenizer, ``seq_len``, seed and token budgets::

    data:
      l2t_disjoint:
        corpus: novels
        tokens: 2_000_000
        val_tokens: 65_536
        l2t: {scenario: disjoint, raw_ratio: 0.5}

Chunk sizes default to ``seq_len // 4`` tokens of the experiment's tokenizer
(the reference's 512 at 2048), counted as characters / (characters per token,
measured on the corpus). Held-out documents are chosen with
``corpora.is_validation(doc.id, val_fraction, seed)``, as for plain corpus
datasets, so every arm holds out the same documents.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import from_dict, to_dict
from ..corpora import iter_documents
from ..corpora.base import ReadStats, drop_summary
from ..data.builder import DATASET_BUILDERS, BuildContext, DocumentSpec, TokenizedBuilder
from ..data.builders.corpus import corpus_of, read_record
from ..data.flat_spec import FlatRecord
from ..data.shards import ShardSet
from ..data.tokenizer import backend
from ..errors import ConfigError
from ..io import read_json
from ..layout import MANIFEST
from .text import chars_per_token, corpus_pool
from .write import BuildConfig, build_l2t


@dataclass(kw_only=True)
class L2TSpec(FlatRecord, DocumentSpec):
    """``data.<name>: {corpus: <corpora entry>, l2t: {...}, tokens: ...}``: a corpus as L2T samples + raw text.

    Named by ``l2t`` (its ``corpus`` is the text it transforms, so ``corpus:`` + ``l2t:`` is this kind, not
    a corpus dataset). ``l2t`` holds l2t.write.BuildConfig fields (scenario, tasks, mixing); there is no
    ``params``."""

    named_by = "l2t"
    l2t: dict[str, Any]  # l2t.write.BuildConfig fields

    def document_start(self) -> str | None:
        return "bos"  # the reference tokenizes every sample and raw document with BOS, no EOS (l2t/write.py)

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


def l2t_build_config(l2t: dict[str, Any], seq_len: int, seed: int, tokens: int, val_tokens: int,
                     val_fraction: float, chars_per_token: float = 4.0, field: str = "l2t") -> BuildConfig:
    if "seq_len" in l2t:
        raise ConfigError(f"{field}.seq_len", "set by the experiment's seq_len")
    inner = {"seed": seed, "chunk_tokens": max(1, seq_len // 4), "count_tokens": "chars",
             "chars_per_token": chars_per_token, **dict(l2t.get("l2t", {}))}
    return from_dict(BuildConfig, {**l2t, "l2t": inner, "seq_len": seq_len, "train_tokens": tokens,
                                   "val_tokens": val_tokens, "val_fraction": val_fraction}, field)


def write_l2t_dataset(name: str, l2t: dict[str, Any], corpus_cfg, tok, row_len: int, seed: int, out: str | Path,
                      tokens: int, val_tokens: int, val_fraction: float, workers: int = 1,
                      progress: bool = False, read_stats=None, unit_tokens: int | None = None,
                      resume_as: str | Path | None = None) -> dict[str, dict]:
    """Build ``out/train`` (and ``out/val``) for an experiment; returns the shard manifests by split.

    ``read_stats`` (a ``corpora.ReadStats``) is filled in by the corpus read that feeds the build.
    """
    field = f"data.{name}.l2t"
    l2t_build_config(l2t, row_len - 1, seed, tokens, val_tokens, val_fraction, field=field)  # fail fast
    sample = (d.text for d in itertools.islice(iter_documents(corpus_cfg), 200))
    cfg = l2t_build_config(l2t, row_len - 1, seed, tokens, val_tokens, val_fraction,
                           chars_per_token(backend(tok), sample), field)
    pool = None
    if cfg.l2t.word_pool == "corpus":
        pool = corpus_pool(d.text for d in itertools.islice(iter_documents(corpus_cfg), 20000))
    m = build_l2t(iter_documents(corpus_cfg, read_stats), out, cfg, tok, workers=workers, pool=pool,
                  source={"kind": f"corpus of data.{name}", "config": to_dict(corpus_cfg)}, progress=progress,
                  read_stats=read_stats, resume_as=resume_as, corpus_cfg=corpus_cfg, **({"unit_tokens": unit_tokens} if unit_tokens else {}))
    got = m["splits"]["train"]["n_rows"]
    if m["splits"]["train"]["l2t_rows"] == 0:
        # Silently training on raw text only would make an "L2T" arm a copy of the baseline.
        stats_file = Path(out) / "stats.json"
        drops = read_json(stats_file).get("train", {}).get("drops", {}) if stats_file.is_file() else {}
        top = drop_summary(drops, 3) if drops else ""
        raise ConfigError(field, "no document produced an L2T sample"
                          + (f" (most common drops: {top})" if top else "")
                          + (f" (reader drops: {read_stats.summary()})" if read_stats is not None else "")
                          + "; use longer documents or a larger seq_len (chunks are seq_len // 4 tokens)")
    if got < tokens // row_len:
        raise ConfigError(f"data.{name}.tokens", f"the corpus ran out after {got * row_len} L2T+raw train tokens "
                                                 f"(asked for {tokens}); lower the budget or give a larger corpus")
    out = Path(out)
    return {s: ShardSet(out / s, verify="size").manifest for s in ("train", "val")
            if (out / s / MANIFEST).is_file() and (s == "train" or val_tokens > 0)}
