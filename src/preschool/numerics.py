"""Numerics shared by the evaluators and the report: bootstrap confidence intervals and the MAD.

They live below both ``evals/`` and ``analysis/`` because the report reads the
evaluators' results (``analysis -> evals``) while an evaluator (verbatim) summarises
its own per-stimulus rows with them; ``analysis.stats`` re-exports them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .errors import ConfigError, DataError

Stat = str | Callable[[np.ndarray], Any]


def float_array(values: Any, name: str) -> np.ndarray:
    """``values`` as a float64 array; DataError naming ``name`` when they are not numbers."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{name}: expected numbers, got {values!r:.80}") from None
    return arr


def _stat_fn(stat: Stat) -> Callable[[np.ndarray], np.ndarray]:
    """Vectorised statistic over the last axis."""
    if stat == "mean":
        return lambda x: x.mean(axis=-1)
    if stat == "median":
        return lambda x: np.median(x, axis=-1)
    if callable(stat):
        return lambda x: np.apply_along_axis(stat, -1, x)
    raise ConfigError("stat", f"must be 'mean', 'median' or a callable, got {stat!r}")


def bootstrap_ci(
    values: Sequence[float],
    n_resamples: int = 10000,
    ci: float = 0.95,
    seed: int = 12345,
    stat: Stat = "mean",
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval ``(lo, hi)`` for ``stat`` of ``values``.

    Resamples with replacement ``n_resamples`` times from ``np.random.default_rng(seed)``;
    NaNs are dropped first. A single value gives ``(v, v)``.
    """
    if n_resamples < 1:
        raise ConfigError("n_resamples", f"must be >= 1, got {n_resamples}")
    if not 0 < ci < 1:
        raise ConfigError("ci", f"must be in (0, 1), got {ci}")
    x = float_array(values, "values").ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise DataError("bootstrap_ci: no finite values")
    fn = _stat_fn(stat)
    if x.size == 1:
        v = float(fn(x[None, :])[0])
        return v, v
    rng = np.random.default_rng(seed)
    # Chunk the resample matrix so 10k x (many thousand) values stays small in memory.
    chunk = max(1, min(n_resamples, 4_000_000 // x.size))
    stats = []
    done = 0
    while done < n_resamples:
        k = min(chunk, n_resamples - done)
        idx = rng.integers(0, x.size, size=(k, x.size))
        stats.append(np.asarray(fn(x[idx]), dtype=np.float64))
        done += k
    s = np.concatenate(stats)
    alpha = (1 - ci) / 2
    lo, hi = np.quantile(s, [alpha, 1 - alpha])
    return float(lo), float(hi)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    x = float_array(values, "values").ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise DataError("mad: no finite values")
    return float(np.median(np.abs(x - np.median(x))))
