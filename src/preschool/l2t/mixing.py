"""Mixing raw text and L2T samples: scenarios, ratios and row order.

Scenarios (Yamaguchi et al. 2026, section 2 of the spec):

- ``disjoint``: each document goes to the raw side OR the L2T side.
  ``ratio_by: documents`` (the paper's rule) sends document ``i`` to raw when
  ``u(seed, i) < raw_ratio`` — an independent draw per document, so the split is
  streaming and a pure function of the index (the reference splits a loaded
  shard exactly with ``train_test_split``; our share is binomial around
  ``raw_ratio``). ``ratio_by: tokens`` sends each document, in order, to the
  side that is furthest below its target token share (raw share of all output
  tokens = ``raw_ratio``); that needs both versions of every document, so it
  costs one extra transform per document.
- ``shared``: every document is used twice, as raw text and as L2T samples.

``raw_ratio: 0`` gives L2T-only data (with one task: the single-task runs);
``raw_ratio: 1`` gives the raw baseline.

Row order: rows of both kinds are shuffled together with ``shuffle_seed`` (the
reference shuffles the concatenated rows with seed 21). A ``curriculum``
``[start, end]`` instead orders rows so the L2T share of rows goes linearly from
``start`` to ``end`` over the output (the paper's suggested follow-up of
confining L2T to early training); each pool is shuffled within itself and
spread along the schedule (see :func:`row_order`); the realised shares are
reported per tenth of the output in the manifest.
"""

from __future__ import annotations


import numpy as np
from ..seeds import L2T_ROUTE

_ROUTE = L2T_ROUTE


def doc_uniform(seed: int, index: int, salt: int) -> float:
    return float(np.random.default_rng([seed, int(index), salt]).random())


def route_by_documents(seed: int, index: int, raw_ratio: float) -> str:
    """``"raw"`` or ``"l2t"`` for a disjoint split by documents."""
    if raw_ratio <= 0:
        return "l2t"
    if raw_ratio >= 1:
        return "raw"
    return "raw" if doc_uniform(seed, index, _ROUTE) < raw_ratio else "l2t"


class TokenRouter:
    """Disjoint split by tokens: send each document where the running share is furthest below target."""

    def __init__(self, raw_ratio: float):
        self.raw_ratio = raw_ratio
        self.raw = 0
        self.l2t = 0

    def route(self, raw_tokens: int, l2t_tokens: int) -> str:
        if self.raw_ratio <= 0 or raw_tokens == 0:
            side = "l2t"
        elif self.raw_ratio >= 1 or l2t_tokens == 0:
            side = "raw"
        else:
            # Pick the side whose choice leaves the running raw share closest to target.
            a = abs((self.raw + raw_tokens) / (self.raw + raw_tokens + self.l2t) - self.raw_ratio)
            b = abs(self.raw / (self.raw + self.l2t + l2t_tokens) - self.raw_ratio)
            side = "raw" if a <= b else "l2t"
        if side == "raw":
            self.raw += raw_tokens
        else:
            self.l2t += l2t_tokens
        return side


def _quantile_times(n: int, density: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Positions in [0, 1] of ``n`` rows spread out as the quantiles of ``density`` on ``grid``."""
    if n == 0:
        return np.zeros(0)
    q = (np.arange(n) + 0.5) / n
    if density.sum() <= 0:
        return q  # nothing to follow: spread evenly
    cdf = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(grid))])
    return np.interp(q, cdf / cdf[-1], grid)


def row_order(n_l2t: int, n_raw: int, seed: int = 21, curriculum: list[float] | None = None) -> np.ndarray:
    """Output order as global indices: ``i < n_l2t`` is L2T row i, else raw row ``i - n_l2t``.

    With a curriculum, L2T rows are placed at the quantiles of the density
    ``s(f) = start + (end - start) f`` and raw rows at those of ``1 - s(f)``
    (f = position in the output, 0..1), then merged by position; when the pool
    sizes match the schedule's mean (``n_l2t / total = (start + end) / 2``) the
    L2T share at f is exactly s(f), otherwise the schedule is followed in shape.
    """
    total = n_l2t + n_raw
    rng = np.random.default_rng(seed)
    if not curriculum:
        return rng.permutation(total)
    start, end = curriculum
    grid = np.linspace(0.0, 1.0, 4097)
    share = start + (end - start) * grid
    t_l2t = _quantile_times(n_l2t, share, grid)
    t_raw = _quantile_times(n_raw, 1.0 - share, grid)
    ids = np.concatenate([rng.permutation(n_l2t), rng.permutation(n_raw) + n_l2t])
    times = np.concatenate([t_l2t, t_raw])
    return ids[np.argsort(times, kind="stable")]


def share_profile(order: np.ndarray, n_l2t: int, parts: int = 10) -> list[float]:
    """L2T share of rows in each tenth (``parts``) of the output order."""
    if len(order) == 0:
        return []
    return [round(float((p < n_l2t).mean()), 4) for p in np.array_split(order, parts) if len(p)]
