"""Token efficiency: how many training tokens an arm needs to reach a target score.

Follows the "tokens saved" analysis described for verify-ppt ("Synthetic
Pre-pretraining Survives Scale, but Not as a Grammatical Prior"; spec
synthetic_ppt.md A.7, flagged there as needing confirmation against the paper):

1. the target is the baseline's value at its final checkpoint, a given value,
   or (in reports) the baseline's value at a given step;
2. each curve is scanned for the checkpoint where it reaches the target, by one of
   two rules (``crossing``), interpolating linearly between that checkpoint and the
   one before it:

   - ``stays`` (default): the first checkpoint from which the curve **stays** at or
     past the target to its end; a curve that ends short never reaches it;
   - ``first``: the first checkpoint at or past the target, whatever follows
     (spec A.7's reading of verify-ppt's "first point reaching the target");
3. efficiency is the absolute ``tokens_base - tokens_arm`` and the fraction
   ``1 - tokens_arm / tokens_base`` (and the ratio ``tokens_base /
   tokens_arm``), reported both without and with the PPT tokens added to the
   arm's count. verify-ppt measures it on the average of its downstream tasks
   (reports: ``report.efficiency.downstream``).

Both curves must have a checkpoint short of the target: a curve already at the
target at its first checkpoint crossed it at some unknown point before (another
stage trained it, or it is read on an axis it was not trained on), so the pair
is **not comparable** (``comparable = False``, counted as not reached) rather
than "saved 100 %".

Curves may be non-monotone. Under ``first`` a later dip does not undo a crossing,
so an arm whose curve touches the target once and then falls back "saves" tokens on
a metric where the stable-gain rule finds it worse (a harm over the window and a
saving on the same metric); under ``stays`` a crossing counts only when the curve
holds past the target to its last checkpoint, so the two tables agree. A curve that
never reaches the target gives ``None`` (reported as
``reached = False``), never an exception. Optional smoothing is a trailing
running mean over ``smooth`` checkpoints (fewer at the start), so a single
noisy spike cannot create a spurious early crossing; the trailing window keeps
the crossing causal (it never uses later checkpoints).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError, DataError


def _curve(tokens: Sequence[float], values: Sequence[float], name: str = "curve") -> tuple[np.ndarray, np.ndarray]:
    """Sorted (tokens, values) without NaNs; duplicate token counts are an error."""
    try:
        t = np.asarray(tokens, dtype=np.float64).ravel()
        v = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise DataError(f"{name}: tokens and values must be numbers") from None
    if t.shape != v.shape:
        raise DataError(f"{name}: {t.size} token counts but {v.size} values")
    keep = np.isfinite(t) & np.isfinite(v)
    t, v = t[keep], v[keep]
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    if t.size > 1 and (np.diff(t) == 0).any():
        raise DataError(f"{name}: duplicate token counts {sorted(set(t[1:][np.diff(t) == 0].tolist()))}")
    return t, v


def smooth_values(values: Sequence[float], smooth: int = 1) -> np.ndarray:
    """Trailing running mean over ``smooth`` points (fewer at the start); ``smooth=1`` is the identity."""
    if int(smooth) != smooth or smooth < 1:
        raise ConfigError("smooth", f"must be an integer >= 1, got {smooth}")
    v = np.asarray(values, dtype=np.float64)
    if smooth == 1 or v.size == 0:
        return v.copy()
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(1, v.size + 1)
    lo = np.maximum(0, i - int(smooth))
    return (c[i] - c[lo]) / (i - lo)


CROSSINGS = ("stays", "first")  # the rules of when a curve reaches a target (module docstring)


def check_crossing(crossing: str, field: str = "crossing") -> None:
    if crossing not in CROSSINGS:
        raise ConfigError(field, f"must be one of {list(CROSSINGS)}, got {crossing!r}")


def tokens_to_target(
    tokens: Sequence[float],
    values: Sequence[float],
    target: float,
    higher_is_better: bool = True,
    smooth: int = 1,
    crossing: str = "stays",
) -> float | None:
    """Tokens at which the curve reaches ``target`` (linear interpolation), or None.

    "Reaches" means ``value >= target`` (``<=`` when lower is better); ``crossing``
    says which checkpoint counts: ``stays`` the first from which every later one
    reaches it too, ``first`` the first that reaches it. If the first checkpoint
    counts, its token count is returned (nothing is extrapolated before it).
    """
    check_crossing(crossing)
    t, v = _curve(tokens, values)
    if t.size == 0:
        return None
    v = smooth_values(v, smooth)
    sign = 1.0 if higher_is_better else -1.0
    reached = sign * (v - target) >= 0
    if crossing == "first":
        hit = np.nonzero(reached)[0]
        if hit.size == 0:
            return None
        i = int(hit[0])
    else:
        if not reached[-1]:
            return None
        short = np.nonzero(~reached)[0]
        i = 0 if short.size == 0 else int(short[-1]) + 1
    if i == 0:
        return float(t[0])
    t0, t1, v0, v1 = t[i - 1], t[i], v[i - 1], v[i]
    # v0 is strictly short of target and v1 reaches it, so v1 != v0.
    frac = (target - v0) / (v1 - v0)
    return float(t0 + frac * (t1 - t0))


def _split(curve: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Accept ``(tokens, values)`` or a list of ``(tokens, value)`` pairs."""
    if isinstance(curve, dict) and "tokens" in curve and "values" in curve:
        return _curve(curve["tokens"], curve["values"], name)
    if isinstance(curve, tuple) and len(curve) == 2 and np.ndim(curve[0]) == 1:
        return _curve(curve[0], curve[1], name)
    arr = np.asarray(curve, dtype=np.float64) if len(curve) else np.zeros((0, 2))
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise DataError(f"{name}: expected (tokens, values) or a list of (tokens, value) pairs")
    return _curve(arr[:, 0], arr[:, 1], name)


def token_efficiency(
    base_curve: Any,
    arm_curve: Any,
    target: float | None = None,
    extra_tokens: float = 0.0,
    higher_is_better: bool = True,
    smooth: int = 1,
    crossing: str = "stays",
) -> dict:
    """Tokens saved by an arm relative to the baseline at a target score.

    ``base_curve``/``arm_curve``: ``(tokens, values)`` or ``[(tokens, value), ...]``
    with tokens on the same axis (PT tokens). ``target`` defaults to the
    baseline's final (smoothed) value. ``extra_tokens`` (the PPT tokens) is
    added to the arm's count for the ``*_incl_ppt`` fields. ``crossing``: the rule
    of :func:`tokens_to_target` both curves are read with.

    Returns ``{target, base_tokens, arm_tokens, arm_tokens_incl_ppt, saved_tokens,
    saved_tokens_incl_ppt, saved_fraction, saved_fraction_incl_ppt, ratio, ratio_incl_ppt, reached,
    base_reached, arm_reached, comparable}`` where ``saved_fraction = 1 - arm/base`` and
    ``ratio = base/arm`` (> 1: the arm needs fewer tokens). ``comparable`` is False when either
    curve is at the target from its first checkpoint (see the module docstring). Fields that need
    a crossing are None and ``reached`` is False unless both curves cross and are comparable.
    """
    if extra_tokens < 0:
        raise ConfigError("extra_tokens", f"must be >= 0, got {extra_tokens}")
    bt, bv = _split(base_curve, "base_curve")
    at, av = _split(arm_curve, "arm_curve")
    if bt.size == 0:
        raise DataError("base_curve: no checkpoints")
    if target is None:
        target = float(smooth_values(bv, smooth)[-1])
    base_tokens = tokens_to_target(bt, bv, target, higher_is_better, smooth, crossing)
    arm_tokens = tokens_to_target(at, av, target, higher_is_better, smooth, crossing) if at.size else None
    comparable = not any(t is not None and t == float(ts[0]) for t, ts in ((base_tokens, bt), (arm_tokens, at)))
    out: dict[str, Any] = {
        "target": float(target),
        "higher_is_better": bool(higher_is_better),
        "smooth": int(smooth),
        "crossing": crossing,
        "extra_tokens": float(extra_tokens),
        "base_tokens": base_tokens,
        "arm_tokens": arm_tokens,
        "arm_tokens_incl_ppt": None if arm_tokens is None else arm_tokens + float(extra_tokens),
        "saved_tokens": None,
        "saved_tokens_incl_ppt": None,
        "saved_fraction": None,
        "saved_fraction_incl_ppt": None,
        "ratio": None,
        "ratio_incl_ppt": None,
        "base_reached": base_tokens is not None,
        "arm_reached": arm_tokens is not None,
        "comparable": comparable,
        "reached": base_tokens is not None and arm_tokens is not None and comparable,
    }
    if out["reached"]:  # absolute tokens saved, as the papers report beside the fraction
        out["saved_tokens"] = base_tokens - arm_tokens
        out["saved_tokens_incl_ppt"] = base_tokens - out["arm_tokens_incl_ppt"]
    if out["reached"] and base_tokens > 0:
        out["saved_fraction"] = 1.0 - arm_tokens / base_tokens
        out["saved_fraction_incl_ppt"] = 1.0 - out["arm_tokens_incl_ppt"] / base_tokens
    if out["reached"] and arm_tokens > 0:
        out["ratio"] = base_tokens / arm_tokens
    if out["reached"] and out["arm_tokens_incl_ppt"] > 0:
        out["ratio_incl_ppt"] = base_tokens / out["arm_tokens_incl_ppt"]
    return out
