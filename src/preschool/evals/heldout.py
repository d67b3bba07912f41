"""Held-out next-token loss and perplexity per source, on shard sets.

For each named source (a shard set, or a prepared dataset folder whose
``val/`` holds one) this scores a fixed set of rows: the first ``max_rows``
(all of them when null), so every checkpoint of a run sees exactly the same
tokens and curves are comparable. Rows and score are the trainer's validation
loss (``train/scoring.py``, one definition for both): inputs ``row[:-1]``,
targets ``row[1:]``, honouring the set's ``loss_mask`` (the prediction of
token j counts iff ``loss_mask[j] == 1``), fp32 logits, sums in float64.
Version 1 scored ``max_rows`` evenly spaced rows instead. ``loss/<name>`` is the token-weighted mean negative log-likelihood
(nats), ``ppl/<name> = exp(loss)``, ``tokens/<name>`` the targets scored;
``loss`` is the unweighted mean over sources.

Packed rows are scored with full causal attention across document
boundaries, the trainer's default. With ``attention_reset_between_docs: true``
(mirror the trainer option of that name) a set's ``segments`` array restricts
attention to the same document and restarts position ids at each document, as
the trainer does; sets without ``segments`` are scored unchanged.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..config import check
from ..data.shards import ShardSet
from ..errors import DataError
from ..io import sha256_file
from ..layout import MANIFEST
from ..train.scoring import batch_nll, scored_rows
from .base import EVALUATORS, EvalResult, Evaluator


@dataclass
class HeldoutConfig:
    """Which shard sets to score and how many rows of each."""

    sources: dict[str, str] = field(default_factory=dict)  # name -> shard set folder (or a dataset folder with val/)
    max_rows: int | None = 256  # the first max_rows rows per source (as the trainer's val_rows); null = every row
    batch_size: int = 16  # rows per forward pass; results do not depend on it
    verify: str = "full"  # shard check on open: "full" (sizes + sha256) or "size" ("sha256" = "full", older name)
    attention_reset_between_docs: bool = False  # as the trainer option: attend within a document only (segments)

    def validate(self) -> None:
        check(len(self.sources) > 0, "sources", "give at least one name: path")
        for name, path in self.sources.items():
            check(bool(name) and "/" not in name, f"sources.{name}", "source names must be non-empty, without '/'")
            check(Path(path).exists(), f"sources.{name}", f"no such folder: {path}")
        check(self.max_rows is None or self.max_rows >= 1, "max_rows", f"must be >= 1 or null, got {self.max_rows}")
        check(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.verify in ("full", "size", "sha256"), "verify", f"must be 'full' or 'size', got {self.verify!r}")


def resolve_shard_path(path: str | Path) -> Path:
    """A shard set folder as given, or the ``val/`` shard set inside a prepared dataset folder."""
    p = Path(path)
    if (p / MANIFEST).is_file() and not (p / "val" / MANIFEST).is_file():
        return p
    if (p / "val" / MANIFEST).is_file():
        return p / "val"
    raise DataError(f"{p}: neither a shard set nor a dataset folder with val/ (no manifest.json)")


def rows_nll(model, tokens: np.ndarray, loss_mask: np.ndarray | None, batch_size: int = 16,
             segments: np.ndarray | None = None) -> tuple[float, int]:
    """Summed NLL (float64) and count of the masked-in next-token predictions of ``tokens`` (n, row_len).

    Batches of ``batch_size`` rows through ``train.scoring.batch_nll`` (the trainer's validation scorer).
    """
    import torch

    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    as_t = lambda a, b: None if a is None else torch.as_tensor(a[b:b + batch_size], dtype=torch.long, device=device)  # noqa: E731
    total, count = 0.0, 0
    with torch.inference_mode():
        for b in range(0, len(tokens), batch_size):
            nll, n = batch_nll(model, as_t(tokens, b), as_t(loss_mask, b), as_t(segments, b))
            total += float(nll)
            count += int(n)
    return total, count


@EVALUATORS.register("heldout", config=HeldoutConfig)
class Heldout(Evaluator):
    """Mean next-token loss / perplexity per held-out source (shard sets), loss-mask aware, fp32."""

    # 3: reports headline each source's loss, not their mean; 2: the first max_rows rows, as the trainer's
    # validation (1: evenly spaced)
    version: ClassVar[str] = "3"
    headline_metrics: ClassVar[tuple[str, ...]] = ("loss", "loss/*")
    # each source's loss, on that source's own token axis; the unweighted mean over sources is recorded but
    # not compared: with a language set and a task set not trained yet, it is mostly the untrained task's loss
    report_patterns: ClassVar[tuple[str, ...]] = ("loss/*",)
    lower_is_better: ClassVar[tuple[str, ...]] = ("loss", "loss/*", "ppl/*")  # a loss has no chance level

    @classmethod
    def metric_source(cls, metric: str) -> str | None:
        """``loss/<name>``, ``ppl/<name>`` and ``tokens/<name>`` score the source ``name``."""
        kind, _, name = metric.partition("/")
        return name if kind in ("loss", "ppl", "tokens") and name else None

    @classmethod
    def data_fingerprint(cls, cfg: HeldoutConfig) -> str:
        """sha256 over each source's manifest.json (it lists every shard file's sha256): runner cache key."""
        h = hashlib.sha256()
        for name in sorted(cfg.sources):
            h.update(f"{name}\0{sha256_file(resolve_shard_path(cfg.sources[name]) / MANIFEST)}\0".encode())
        return h.hexdigest()

    def evaluate(self, model, tokenizer) -> EvalResult:
        vocab = getattr(getattr(model, "config", None), "vocab_size", None)
        metrics: dict[str, float] = {}
        extra: dict = {"sources": {}}
        losses = []
        for name, path in self.cfg.sources.items():
            sp = resolve_shard_path(path)
            ss = ShardSet(sp, verify=self.cfg.verify)
            if len(ss) == 0:
                raise DataError(f"{sp}: shard set has no rows (source {name!r})")
            idx = scored_rows(len(ss), self.cfg.max_rows)
            if vocab is not None:
                ss.check_vocab(vocab)
            tokens = ss.rows(idx)
            mask = ss.rows(idx, "loss_mask") if ss.has_loss_mask else None
            segs = None
            if self.cfg.attention_reset_between_docs and "segments" in ss.array_names:
                segs = ss.rows(idx, "segments")
            total, count = rows_nll(model, tokens, mask, self.cfg.batch_size, segs)
            if count == 0:
                raise DataError(f"{sp}: the loss mask leaves no target in the {len(idx)} rows scored (source {name!r})")
            loss = total / count
            losses.append(loss)
            metrics[f"loss/{name}"] = loss
            metrics[f"ppl/{name}"] = math.exp(min(loss, 700.0))  # exp overflows past ~709
            metrics[f"tokens/{name}"] = float(count)
            extra["sources"][name] = {"path": str(sp), "rows": int(len(idx)), "rows_total": len(ss),
                                      "attention_reset": segs is not None,
                                      "manifest_n_tokens": ss.manifest.get("n_tokens")}
        metrics["loss"] = float(np.mean(losses))
        return EvalResult(metrics=metrics, extra=extra)
