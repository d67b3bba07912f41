"""Held-out loss: the one scorer and the one row selection, shared by the trainer and the ``heldout`` evaluator.

The trainer's validation callback (``val/<source>`` rows of ``metrics.jsonl``)
and the ``heldout`` evaluator (``loss/<source>`` of a checkpoint) compute the
same number on the same rows, so a curve logged while training and one
evaluated afterwards line up:

- **rows**: the first ``max_rows`` rows of the shard set (all of them when it
  has fewer), the same rows at every step and in every run;
- **score**: inputs ``row[:-1]``, targets ``row[1:]``; the prediction of token
  j counts iff the set's ``loss_mask[j] == 1`` (all count without a mask);
  cross-entropy of fp32 logits, summed in float64; the loss is the sum over
  the counted targets divided by their number (a token-weighted mean). With
  ``segments`` (``attention_reset_between_docs``) attention and position ids
  restart at each document, as in training.

Before this module the evaluator scored ``max_rows`` evenly spaced rows; on a
set longer than ``max_rows`` its numbers differ from version 1 (no committed
result used it). The trainer's definition was kept so that no committed
``val/*`` curve changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported when scoring, so importing the evaluator registry stays light
    import torch


def scored_rows(n_rows: int, max_rows: int | None) -> np.ndarray:
    """Indices of the rows scored from a set of ``n_rows``: the first ``max_rows`` (all when None)."""
    return np.arange(n_rows if max_rows is None else min(n_rows, int(max_rows)))


def batch_nll(model, tokens: torch.Tensor, loss_mask: torch.Tensor | None = None,
              segments: torch.Tensor | None = None, amp_dtype: torch.dtype | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(summed NLL, number of targets)`` (float64 tensors) of a batch of rows ``(B, row_len)`` on the model's device.

    ``loss_mask`` and ``segments`` are the shard arrays of the same rows (full
    ``row_len``); ``amp_dtype`` runs the forward under autocast (logits are
    upcast to fp32 before the loss either way).
    """
    import torch
    import torch.nn.functional as F

    from .attention import doc_attention_kwargs

    kw = {"use_cache": False}
    if segments is not None:
        kw.update(doc_attention_kwargs(model, segments[:, :-1]))
    with torch.autocast(tokens.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        out = model(input_ids=tokens[:, :-1], **kw)  # the last token is only ever a target
    logits = (out.logits if hasattr(out, "logits") else out).float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1), reduction="none")
    w = (torch.ones_like(ce, dtype=torch.float64) if loss_mask is None
         else (loss_mask[:, 1:].reshape(-1) != 0).double())
    return (ce.double() * w).sum(), w.sum()
