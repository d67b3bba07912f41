"""Statistics for comparing training arms: stable gain, bootstrap CIs, seed summaries.

The rules follow the statistics described for "Synthetic Pre-pretraining
Survives Scale, but Not as a Grammatical Prior" (verify-ppt; spec
synthetic_ppt.md A.7), which we could not check against the paper text:

- **stable gain**: form the per-checkpoint difference between an arm and the
  baseline over a window of checkpoints (the paper uses PT steps 5k-10k), and
  call the gain stable when its mean exceeds its standard deviation (the
  "one-SD rule"). For lower-is-better metrics (NLL, repeat surprisal) the sign
  is flipped so that a positive delta always means "the arm is better".
  Mean, SD and n are returned so callers can switch to a t-style rule.
- **bootstrap CI**: percentile bootstrap, by default 10,000 resamples with
  seed 12345 (Armeni et al.'s verbatim-memory defaults). ``bootstrap_ci`` and
  ``mad`` live in ``preschool/numerics.py`` (the verbatim evaluator uses them
  too, and evals may not import analysis) and are re-exported here.

- **seed-level verdicts and trends** (a ladder's report; docs/statistics.md): the Student-t interval of
  a per-seed effect over the seed pairs (``seed_interval``; 3 seeds at least), and the slope of a
  per-seed effect against a size with a seed-bootstrap interval (``seed_trend``, every distinct
  resample of few seeds: ``seed_resamples``), in words that follow from the interval
  (``trend_text``). The one-SD rule above stays available beside them as the verify-ppt rule.

Departures: SDs are sample SDs (``ddof=1``) unless told otherwise; undefined
quantities (fewer than two checkpoints, no shared checkpoints) come back as
``None`` with ``stable = False`` and a ``reason`` instead of raising, so a
report over a short run still renders.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, DataError
from ..numerics import Stat, bootstrap_ci, mad  # noqa: F401  (public here too; evaluators import them from numerics)
from ..numerics import float_array as _as_float_array


def _seed_mean(values: Any, n_steps: int, name: str) -> np.ndarray:
    """1-D per-checkpoint values; a 2-D (seeds x checkpoints) array is averaged over seeds first."""
    arr = _as_float_array(values, name)
    if arr.ndim == 2:
        arr = np.nanmean(arr, axis=0)
    if arr.ndim != 1:
        raise DataError(f"{name}: expected one value per checkpoint (or seeds x checkpoints), got shape {arr.shape}")
    if arr.shape[0] != n_steps:
        raise DataError(f"{name}: {arr.shape[0]} values for {n_steps} checkpoints")
    return arr


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def align(
    steps: Sequence[float],
    arm_values: Any,
    base_values: Any,
    base_steps: Sequence[float] | None = None,
    window: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checkpoints both arms have (inside ``window``, inclusive): ``(steps, arm, base)`` sorted by step.

    ``arm_values``/``base_values`` hold one value per step, or one row per seed
    (seeds x checkpoints), which is averaged over seeds first. ``base_steps``
    defaults to ``steps``. NaN values drop their checkpoint.
    """
    a_steps = _as_float_array(steps, "steps")
    b_steps = a_steps if base_steps is None else _as_float_array(base_steps, "base_steps")
    a = _seed_mean(arm_values, a_steps.shape[0], "arm_values")
    b = _seed_mean(base_values, b_steps.shape[0], "base_values")
    for nm, st in (("steps", a_steps), ("base_steps", b_steps)):
        u, c = np.unique(st, return_counts=True)
        if (c > 1).any():
            raise DataError(f"{nm}: duplicate checkpoints {[float(x) for x in u[c > 1]]}")
    if window is not None:
        lo, hi = window
        if lo > hi:
            raise ConfigError("window", f"lower bound {lo} is above upper bound {hi}")
    b_map = {float(s): float(v) for s, v in zip(b_steps, b)}
    rows = []
    for s, v in zip(a_steps, a):
        s = float(s)
        if window is not None and not (window[0] <= s <= window[1]):
            continue
        if s in b_map and math.isfinite(v) and math.isfinite(b_map[s]):
            rows.append((s, float(v), b_map[s]))
    rows.sort()
    if not rows:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    arr = np.asarray(rows, dtype=np.float64)
    return arr[:, 0], arr[:, 1], arr[:, 2]


def stable_gain(
    steps: Sequence[float],
    arm_values: Any,
    base_values: Any,
    window: tuple[float, float] | None = None,
    higher_is_better: bool = True,
    base_steps: Sequence[float] | None = None,
    ddof: int = 1,
) -> dict:
    """One-SD "stable gain" of an arm over the baseline across checkpoints.

    ``delta_t = arm_t - base_t`` (``base_t - arm_t`` when lower is better) over
    the checkpoints both curves have inside ``window`` (inclusive; ``None`` = all).
    Returns ``{mean, sd, n, stable, deltas, steps, se, t, reason}`` where
    ``stable = mean > sd``. With n < 2 the SD is undefined: ``sd``/``se``/``t``
    are None and ``stable`` is False.
    """
    st, a, b = align(steps, arm_values, base_values, base_steps=base_steps, window=window)
    deltas = (a - b) if higher_is_better else (b - a)
    n = int(deltas.shape[0])
    out: dict[str, Any] = {
        "mean": None, "sd": None, "n": n, "stable": False,
        "deltas": [float(d) for d in deltas], "steps": [float(s) for s in st],
        "se": None, "t": None, "higher_is_better": bool(higher_is_better), "window": list(window) if window else None,
        "reason": None,
    }
    if n == 0:
        out["reason"] = "no checkpoint shared by both arms in the window"
        return out
    mean = float(deltas.mean())
    out["mean"] = mean
    if n <= ddof:
        out["reason"] = f"only {n} shared checkpoint(s); SD undefined"
        return out
    sd = float(deltas.std(ddof=ddof))
    out["sd"] = sd
    out["se"] = sd / math.sqrt(n)
    out["t"] = _finite_or_none(mean / out["se"]) if out["se"] > 0 else None
    out["stable"] = one_sd_verdict(mean, sd, n) == "above"
    return out


def one_sd_verdict(mean: float | None, sd: float | None, n: int, null: float = 0.0, single: str = "one value") -> str:
    """The one-SD rule (verify-ppt's), the verdict of the standard tables on a difference (a ladder's rungs use
    :func:`seed_interval` with enough seeds).

    ``above`` when ``mean - null > sd``, ``below`` when ``null - mean > sd``,
    ``no stable difference`` otherwise; ``single`` when the SD is undefined
    (n < 2). With deltas signed so that positive means "better", ``above`` is a
    stable gain and ``below`` a stable harm.
    """
    if mean is None or sd is None or n < 2 or math.isnan(sd):
        return single
    d = mean - null
    return "no stable difference" if abs(d) <= sd else ("above" if d > 0 else "below")


def mean_sd(values: Sequence[float | None]) -> tuple[float, float, int]:
    """``(mean, sample SD, n)`` of the finite values (None and NaN dropped); SD 0 for one value, NaN for none."""
    xs = [float(x) for x in values if x is not None and not math.isnan(x)]
    if not xs:
        return float("nan"), float("nan"), 0
    # math.fsum, not sum: correctly rounded, so the same digits on every Python (3.12 changed sum's float rule)
    m = math.fsum(xs) / len(xs)
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd, len(xs)


def format_mean_sd(mean: float | None, sd: float | None, n: int, digits: int = 3, suffix: str = "",
                   show_n: bool = False) -> str:
    """``1.234 ± 0.056`` (``(n=3)`` appended with ``show_n``); one value prints alone; no value prints ``–``."""
    if mean is None or math.isnan(mean) or n == 0:
        return "–"
    tail = f" (n={n})" if show_n else ""
    if n < 2 or sd is None:
        return f"{mean:.{digits}f}{suffix}{tail}"
    return f"{mean:.{digits}f}{suffix} ± {sd:.{digits}f}{tail}"


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student-t cumulative distribution function."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Student-t quantile (inverse CDF) by bisection; accurate to ~1e-10."""
    if not 0 < p < 1:
        raise ConfigError("p", f"must be in (0, 1), got {p}")
    if df <= 0:
        raise ConfigError("df", f"must be > 0, got {df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def seed_summary(
    per_seed_values: Sequence[float] | Mapping[Any, float],
    ci: float = 0.95,
    method: str = "bootstrap",
    n_resamples: int = 10000,
    seed: int = 12345,
) -> dict:
    """Mean, SD (sample and population) and CI of one metric across seeds.

    ``per_seed_values``: one value per seed (list, or dict seed -> value).
    ``method``: ``bootstrap`` (percentile bootstrap of the mean) or ``t``
    (Student-t interval; better with few seeds, where the bootstrap interval
    shrinks towards the min-max of the seeds). Returns
    ``{mean, sd, sd_pop, n, ci_lo, ci_hi, method, values}``; with one seed the
    SD and CI are None.
    """
    if method not in ("bootstrap", "t"):
        raise ConfigError("method", f"must be 'bootstrap' or 't', got {method!r}")
    vals = list(per_seed_values.values()) if isinstance(per_seed_values, Mapping) else list(per_seed_values)
    x = _as_float_array(vals, "per_seed_values").ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise DataError("seed_summary: no finite values")
    n = int(x.size)
    out: dict[str, Any] = {
        "mean": float(x.mean()), "sd": None, "sd_pop": float(x.std(ddof=0)), "n": n,
        "ci_lo": None, "ci_hi": None, "ci": ci, "method": method, "values": [float(v) for v in x],
    }
    if n < 2:
        return out
    out["sd"] = float(x.std(ddof=1))
    if method == "bootstrap":
        out["ci_lo"], out["ci_hi"] = bootstrap_ci(x, n_resamples=n_resamples, ci=ci, seed=seed, stat="mean")
    else:
        half = t_quantile(0.5 + ci / 2, df=n - 1) * out["sd"] / math.sqrt(n)
        out["ci_lo"], out["ci_hi"] = out["mean"] - half, out["mean"] + half
    return out


def mean_sd_over_checkpoints(
    steps: Sequence[float],
    values: Any,
    window: tuple[float, float] | None = None,
    ddof: int = 1,
) -> dict:
    """Mean and SD of one arm's metric over its checkpoints inside ``window`` (inclusive).

    ``values``: one per step, or seeds x steps (averaged over seeds first).
    Returns ``{mean, sd, n, steps}``; SD is None with fewer than two checkpoints.
    """
    st = _as_float_array(steps, "steps")
    v = _seed_mean(values, st.shape[0], "values")
    keep = np.isfinite(v)
    if window is not None:
        if window[0] > window[1]:
            raise ConfigError("window", f"lower bound {window[0]} is above upper bound {window[1]}")
        keep &= (st >= window[0]) & (st <= window[1])
    x = v[keep]
    n = int(x.size)
    return {
        "mean": float(x.mean()) if n else None,
        "sd": float(x.std(ddof=ddof)) if n > ddof else None,
        "n": n,
        "steps": [float(s) for s in st[keep]],
    }


# ----------------------------------------------------------------------------- seed-level intervals and trends


def seed_resamples(n: int, draws: int, seed: int) -> list[tuple[tuple[int, ...], float]]:
    """The bootstrap resamples of ``n`` seeds as ``(indices, weight)``: every multiset of ``n`` draws
    with its multinomial probability when there are at most ``draws`` of them (3 seeds: 10), so the
    interval is the bootstrap's own and not a Monte-Carlo estimate of it; else ``draws`` random ones."""
    import itertools
    from collections import Counter

    if math.comb(2 * n - 1, n) <= draws:
        out = []
        for combo in itertools.combinations_with_replacement(range(n), n):
            counts = Counter(combo).values()
            w = math.factorial(n) / math.prod(math.factorial(k) for k in counts) / n ** n
            out.append((combo, w))
        return out
    rng = np.random.default_rng(seed)
    return [(tuple(int(i) for i in rng.integers(0, n, n)), 1.0 / draws) for _ in range(draws)]


def weighted_interval(values: Sequence[float], weights: Sequence[float], level: float = 0.95) -> list[float]:
    """The ``level`` percentile interval of weighted values (the lower inverse CDF at each tail). Values may
    be infinite (a resample without a crossing counts as one past the searched range)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    v, cw = v[order], np.cumsum(w[order]) / w.sum()
    tail = (1 - level) / 2
    lo = v[min(int(np.searchsorted(cw, tail - 1e-12)), v.size - 1)]
    hi = v[min(int(np.searchsorted(cw, 1 - tail - 1e-12)), v.size - 1)]
    return [float(lo), float(hi)]


def seed_means(per_seed: np.ndarray) -> np.ndarray:
    """Column means of ``per_seed`` (seeds x points) over the seeds with a value; NaN for a column without any."""
    ok = np.isfinite(per_seed)
    total = np.where(ok, per_seed, 0.0).sum(axis=0)
    n = ok.sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def ols_slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Least-squares slope of ``y`` on ``x`` over the finite pairs; None with fewer than two distinct x."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    if np.unique(xa).size < 2:
        return None
    dx = xa - xa.mean()
    return float((dx * (ya - ya.mean())).sum() / (dx * dx).sum())


def seed_interval(values: Sequence[float | None], level: float = 0.95, min_seeds: int = 3) -> dict:
    """The seed-level verdict on a per-seed effect (one value per seed pair, positive = the arm is better).

    Returns ``{mean, sd, n, interval, positive, negative, verdict}``: ``interval`` is the Student-t
    ``level`` interval of the mean over the seeds (None with fewer than ``min_seeds``: two or one seed
    cannot bound a mean worth reading); ``positive``/``negative`` count the seed pairs of each sign;
    ``verdict`` is ``above`` / ``below`` when the interval excludes 0, ``no difference shown`` when it
    holds it, ``too few seeds`` without an interval.
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(xs)
    out: dict[str, Any] = {"mean": None, "sd": None, "n": n, "interval": None,
                           "positive": sum(x > 0 for x in xs), "negative": sum(x < 0 for x in xs),
                           "verdict": "too few seeds"}
    if not n:
        return out
    s = seed_summary(xs, ci=level, method="t")
    out["mean"], out["sd"] = s["mean"], s["sd"]
    if n >= min_seeds:
        out["interval"] = [s["ci_lo"], s["ci_hi"]]
        out["verdict"] = ("above" if s["ci_lo"] > 0 else "below" if s["ci_hi"] < 0 else "no difference shown")
    return out


def seed_trend(x: Sequence[float], per_seed: np.ndarray, level: float = 0.95, draws: int = 1000,
               seed: int = 12345) -> dict:
    """The slope of a per-seed effect against ``x``, with a seed-bootstrap interval.

    ``per_seed``: seeds x points (one row per seed, the same seed at every point; NaN where a seed has no
    value). The slope is the least-squares slope of the seed means on ``x``; the interval is the
    ``level`` percentile interval of that slope over resamples of the seeds (:func:`seed_resamples`: with
    three seeds, all 10 of them, and the interval spans the per-seed slopes' range). Returns ``{slope,
    interval, seeds, points, per_seed, positive, negative, verdict}``: ``per_seed`` each seed's own slope
    (None with fewer than two points), ``positive``/``negative`` how many of them have each sign,
    ``verdict`` ``rises`` / ``falls`` when the interval excludes 0, ``no trend shown`` when it holds it,
    ``one point`` with fewer than two distinct x, ``one seed`` without an interval.
    """
    mat = np.asarray(per_seed, dtype=np.float64)
    xs = np.asarray(x, dtype=np.float64)
    rows = [i for i in range(mat.shape[0]) if np.isfinite(mat[i]).any()]
    mat = mat[rows]
    slope = ols_slope(xs, seed_means(mat)) if len(rows) else None
    own = [ols_slope(xs, mat[i]) for i in range(mat.shape[0])]
    out: dict[str, Any] = {"slope": slope, "interval": None, "seeds": len(rows),
                           "points": int(np.unique(xs[np.isfinite(xs) & np.isfinite(seed_means(mat))]).size)
                           if rows else 0,
                           "per_seed": own, "positive": sum(s is not None and s > 0 for s in own),
                           "negative": sum(s is not None and s < 0 for s in own)}
    if slope is None:
        out["verdict"] = "one point"
        return out
    if len(rows) < 2:
        out["verdict"] = "one seed"
        return out
    slopes, weights = [], []
    for idx, w in seed_resamples(len(rows), draws, seed):
        s = ols_slope(xs, seed_means(mat[list(idx)]))
        if s is not None:
            slopes.append(s)
            weights.append(w)
    out["interval"] = weighted_interval(slopes, weights, level)
    lo, hi = out["interval"]
    out["verdict"] = "rises" if lo > 0 else "falls" if hi < 0 else "no trend shown"
    return out


def trend_text(t: dict, per: str, rises: str, falls: str, flat: str = "no trend shown", over: str = "points") -> str:
    """A :func:`seed_trend` in words: the slope per ``per`` over its number of ``over`` (points: rungs, compartment
    counts) with its interval, then ``rises`` / ``falls`` when the interval excludes 0, ``flat`` "with N seeds"
    when it holds 0 (and without an interval: one seed)."""
    if t["verdict"] == "one point":
        return f"one of the {over} has a value: no trend"
    head = f"{t['slope']:+.3g} per {per} over {t['points']} {over}"
    if t["verdict"] == "one seed":
        return head + f" (one seed: no interval, {flat})"
    head += f" [{t['interval'][0]:+.3g}, {t['interval'][1]:+.3g}]"
    if t["verdict"] == "no trend shown":
        return head + f": {flat} with {t['seeds']} seeds"
    return head + ": " + (rises if t["verdict"] == "rises" else falls)
