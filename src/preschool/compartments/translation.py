"""Translation rows: one text span shown in two compartments, joined by TRANSLATION markers.

Follows Howe & Wingate's "standard" paired-row format (vinhowe/compartmentalization
``src/data.py``; spec B.4). For a row of ``row_len = T + 1`` tokens (T next-token
predictions) and ``h = T // 2``::

    position   0        1 .. h-1            h        h+1 .. 2h-1          2h .. T
    token      TRANS    span in comp. i     TRANS    same span in comp. j  TRANS (padding)

The span is ``h - 1`` base tokens. Loss positions (``loss_mask[p] == 1`` means
the prediction *of token p* is trained, as everywhere in preschool):

- ``loss_on="all"`` (the paper): every p in ``1 .. 2h-1`` - the source half,
  the second marker and the target half. The paper's "last position is
  ignored" is our padding slot ``2h`` (and, for odd T, ``2h+1``): never trained.
- ``loss_on="target"`` (our option): only ``h+1 .. 2h-1``, the translation itself.

The paper's "interleaved" mode (alternating n-gram chunks after one marker) is
not implemented; its configs use the standard layout.

Which rows are translation rows, and which (i, j) pairs, is the plan's job
(``compartments.plan``: ``absolute`` / ``compartment`` ratio conventions).
The model recovers per-half compartment ids from the ids themselves: a marker
belongs to the compartment of the token after it (``compartments.model``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config import check
from ..errors import DataError
from .offsets import Presentation


@dataclass
class TranslationConfig:
    """Translation rows: fraction of rows, ratio convention, and where the loss goes."""

    fraction: float = 0.0
    mode: Literal["absolute", "compartment"] = "absolute"
    loss_on: Literal["all", "target"] = "all"

    def validate(self) -> None:
        check(self.fraction >= 0, "fraction", f"must be >= 0, got {self.fraction}")


def span_length(row_len: int) -> int:
    """Base tokens per translated span for a row of ``row_len`` tokens."""
    return (row_len - 1) // 2 - 1


def layout(row_len: int) -> dict:
    """Positions of the layout (for docs and tests)."""
    T = row_len - 1
    h = T // 2
    return {"h": h, "marker_positions": [0, h], "source": (1, h), "target": (h + 1, 2 * h),
            "padding": (2 * h, row_len)}


def translation_row(span: np.ndarray, pres: Presentation, src: int, dst: int, row_len: int,
                    loss_on: str = "all") -> tuple[np.ndarray, np.ndarray]:
    """One translation row of ``row_len`` tokens and its loss mask (see module docstring)."""
    m = span_length(row_len)
    if m < 1:
        raise DataError(f"row_len {row_len} too short for a translation row (needs >= 5)")
    span = np.asarray(span, dtype=np.int64)
    if span.shape != (m,):
        raise DataError(f"translation span must have {m} tokens for row_len {row_len}, got {span.shape}")
    if src == dst:
        raise DataError(f"translation row needs two different compartments, got {src} -> {dst}")
    h = m + 1
    tr = pres.translation_id
    toks = np.full(row_len, tr, dtype=np.int64)
    toks[1:h] = pres.encode(span, src)
    toks[h + 1:2 * h] = pres.encode(span, dst)
    mask = np.zeros(row_len, dtype=np.uint8)
    if loss_on == "all":
        mask[1:2 * h] = 1
    elif loss_on == "target":
        mask[h + 1:2 * h] = 1
    else:
        raise DataError(f"loss_on must be 'all' or 'target', got {loss_on!r}")
    return toks, mask


def translation_rows(spans: np.ndarray, pres: Presentation, src: np.ndarray, dst: np.ndarray, row_len: int,
                     loss_on: str = "all") -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`translation_row` over ``spans`` of shape (n, span_length)."""
    n = len(spans)
    toks = np.empty((n, row_len), np.int64)
    masks = np.empty((n, row_len), np.uint8)
    for r in range(n):
        toks[r], masks[r] = translation_row(spans[r], pres, int(src[r]), int(dst[r]), row_len, loss_on)
    return toks, masks
