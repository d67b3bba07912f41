"""Slowdown of a compartmented run against its c=1 baseline, and the loss plateau vs c.

Follows Howe & Wingate's slowdown metric (vinhowe/compartmentalization
``experiment/plot_compartmented_slowdown.py``; spec B.3):

1. each run is a curve of (checkpoint step, val loss averaged over compartments);
2. the comparable loss range is the overlap of the two runs' realised ranges,
   ``[max(min_a, min_b), min(max_a, max_b)]``;
3. for each checkpoint (s_c, l_c) of the compartmented run with l_c in the
   overlap, the baseline step at which the baseline reached l_c is found by
   scanning consecutive baseline checkpoints for the *first* pair whose losses
   bracket l_c and interpolating the step linearly (equal losses -> midpoint);
4. slowdown = s_c / s_base(l_c).

Disjoint ranges give an empty curve, not an error. Checkpoints at step 0 are
skipped (the ratio is undefined there). ``slowdown_at_targets`` evaluates the
same ratio at named losses, interpolating the compartmented run's step too.
``plateau`` reports each run's final loss (mean of the last ``k`` points).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..analysis.collect import val_rows
from ..errors import DataError
from ..layout import metrics_path


@dataclass
class Curve:
    steps: np.ndarray
    losses: np.ndarray

    def __post_init__(self):
        self.steps = np.asarray(self.steps, dtype=np.float64)
        self.losses = np.asarray(self.losses, dtype=np.float64)
        if self.steps.shape != self.losses.shape or self.steps.ndim != 1:
            raise DataError(f"curve needs equal-length 1-D steps and losses, got {self.steps.shape}, {self.losses.shape}")
        order = np.argsort(self.steps, kind="stable")
        self.steps, self.losses = self.steps[order], self.losses[order]
        keep = np.isfinite(self.losses)
        self.steps, self.losses = self.steps[keep], self.losses[keep]

    def __len__(self) -> int:
        return len(self.steps)

    def restrict(self, steps) -> "Curve":
        """Only the given (canonical) steps."""
        sel = np.isin(self.steps, np.asarray(list(steps), dtype=np.float64))
        return Curve(self.steps[sel], self.losses[sel])


def interpolate_step(curve: Curve, target: float) -> float | None:
    """Step at which ``curve`` first reaches ``target`` (linear between checkpoints); None if never bracketed."""
    s, l = curve.steps, curve.losses
    for k in range(len(s) - 1):
        a, b = l[k], l[k + 1]
        if min(a, b) <= target <= max(a, b):
            if a == b:
                return float((s[k] + s[k + 1]) / 2)
            return float(s[k] + (target - a) / (b - a) * (s[k + 1] - s[k]))
    if len(s) == 1 and l[0] == target:
        return float(s[0])
    return None


def overlap(a: Curve, b: Curve) -> tuple[float, float] | None:
    if len(a) == 0 or len(b) == 0:
        return None
    lo = max(a.losses.min(), b.losses.min())
    hi = min(a.losses.max(), b.losses.max())
    return (float(lo), float(hi)) if lo <= hi else None


def slowdown_curve(base: Curve, run: Curve) -> list[dict]:
    """Per checkpoint of ``run`` in the loss overlap: {step, loss, base_step, slowdown}. Empty if none."""
    ov = overlap(base, run)
    if ov is None:
        return []
    lo, hi = ov
    out = []
    for s, l in zip(run.steps, run.losses):
        if s <= 0 or not lo <= l <= hi:
            continue
        sb = interpolate_step(base, float(l))
        if sb is None or sb <= 0:
            continue
        out.append({"step": float(s), "loss": float(l), "base_step": sb, "slowdown": float(s) / sb})
    return out


def slowdown_at_targets(base: Curve, run: Curve, targets) -> dict[str, dict | None]:
    """{str(target): {loss, step, base_step, slowdown}} or None where a run never reaches the target."""
    out: dict[str, dict | None] = {}
    for t in targets:
        sr, sb = interpolate_step(run, float(t)), interpolate_step(base, float(t))
        if sr is None or sb is None or sb <= 0:
            out[str(t)] = None
        else:
            out[str(t)] = {"loss": float(t), "step": sr, "base_step": sb, "slowdown": sr / sb}
    return out


def plateau(curves: dict, k: int = 1) -> dict:
    """Final loss (mean of the last ``k`` points) per key, e.g. {c: loss}."""
    return {key: (float(np.mean(c.losses[-k:])) if len(c) else math.nan) for key, c in curves.items()}


def read_val_curve(arm_dir: str | Path, keys: list[str] | None = None, prefix: str = "val/") -> Curve:
    """Val-loss curve from ``<arm>/metrics.jsonl``: mean over ``keys`` (default: every ``val/*`` key of
    the first val row) at each val event that has all of them. Rows are read as the report reads them
    (:func:`~preschool.analysis.collect.val_rows`): a value that is no number makes its point NaN, dropped
    as a non-finite one is, and a row whose step is no whole number is left out, each named in one line."""
    steps, losses = [], []
    for row in val_rows(arm_dir, missing_ok=False):
        if keys is None:
            keys = sorted(k for k in row if k.startswith(prefix))
            if not keys:
                raise DataError(f"{metrics_path(arm_dir)}: val row at step {row.get('step')} has no {prefix}* keys")
        if all(k in row for k in keys):
            steps.append(row["step"])
            losses.append(float(np.mean([row[k] for k in keys])))
    return Curve(np.asarray(steps), np.asarray(losses))
