"""Statistics for comparing training arms: seed-level verdicts, equivalence, chance, seeds needed, and the
verify-ppt within-run rule.

The unit of evidence is the **seed** (docs/statistics.md; spec statistics.md): a seed pair, the arm's run
and the baseline's run of the same training seed, gives one effect (the per-checkpoint difference averaged
over the comparison window, or the difference of final values), and every verdict is a Student-t interval
over those effects with their n, computed by one function, :func:`t_interval`:

- **seed-level verdict** (:func:`seed_interval`): the 95 % interval of the mean effect excludes 0 (a gain
  or a harm) or holds it (no difference shown); one seed gives no interval and no verdict;
- **trend** (:func:`seed_trend`): each seed's own slope of its effect against a size, then the interval
  over those slopes; "grows" / "shrinks" only when it excludes 0 (:func:`trend_text`);
- **equivalence** (:func:`equivalence`): two one-sided tests against a stated margin;
- **chance** (:func:`beyond_chance`, :func:`testability`): a comparison whose arms are all within noise of
  their metric's chance level is not testable at this scale;
- **how many seeds** (:func:`seeds_needed`, :func:`seeds_for_equivalence`, :func:`half_width`,
  :func:`width_ratio_range`).

Kept beside them, named as what they are:

- **the verify-ppt within-run rule** (:func:`stable_gain`, :func:`one_sd_verdict`), as described for
  "Synthetic Pre-pretraining Survives Scale, but Not as a Grammatical Prior" (spec synthetic_ppt.md A.7;
  not checked against the paper text): the per-checkpoint difference over a window is a stable gain when
  its mean exceeds its SD. Its n counts checkpoints (pooled over seeds in a report), which are correlated
  within a run, so it is a smoothness rule, not a seed-level verdict.
- **bootstrap CI** (:func:`bootstrap_ci`, :func:`mad`; they live in ``preschool/numerics.py``, which the
  verbatim evaluator uses too): a percentile bootstrap, by default 10,000 resamples with seed 12345 (Armeni
  et al.'s defaults). Over a few seeds it is about their range, not a 95 % interval.

For lower-is-better metrics (NLL, repeat surprisal) callers flip the sign so that a positive effect always
means "the arm is better". SDs are sample SDs (``ddof=1``); undefined quantities (fewer than two checkpoints
or seeds) come back as ``None`` with a reason or a verdict that says so, instead of raising, so a report over
a short run still renders. The power-law fits, seed resamples and crossings of a ladder are in
:mod:`preschool.analysis.scaling`.
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
    """The one-SD rule (verify-ppt's within-run rule; every seed-level verdict is :func:`seed_interval`'s).

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
    ``method``: ``t`` (the Student-t interval of :func:`t_interval`, the one every verdict uses) or
    ``bootstrap`` (percentile bootstrap of the mean; with few seeds it is about the seeds' min-max, not a
    ``ci`` interval: below about 10 seeds do not call it one). Returns
    ``{mean, sd, sd_pop, n, ci_lo, ci_hi, method, values}``; with one seed the SD and CI are None.
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
        t = t_interval(x.tolist(), ci)
        out["mean"], out["sd"] = t["mean"], t["sd"]
        out["ci_lo"], out["ci_hi"] = t["interval"]
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


# ----------------------------------------------------------------------------- seed-level verdicts
#
# The unit of evidence is the seed: each seed pair (the arm's run and the baseline's run of the same training
# seed) gives one number, its effect, and every verdict below is a Student-t interval over those numbers with
# their n (docs/statistics.md). One function computes that interval (:func:`t_interval`); the verdict on an
# effect, on a trend, on equivalence and on chance all go through it.


def t_interval(values: Sequence[float | None], level: float = 0.95) -> dict:
    """The Student-t ``level`` interval of the mean of the finite ``values``: mean ± t_{(1+level)/2, n-1} sd/sqrt(n).

    Returns ``{mean, sd, n, half, interval, level}``; ``half`` and ``interval`` are None with fewer than two
    values (one value bounds nothing), ``mean`` and ``sd`` None without any. Sums are correctly rounded
    (:func:`mean_sd`), so the digits are the same on every Python.
    """
    if not 0 < level < 1:
        raise ConfigError("level", f"must be in (0, 1), got {level}")
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    out: dict[str, Any] = {"mean": None, "sd": None, "n": n, "half": None, "interval": None, "level": level}
    if not n:
        return out
    out["mean"], sd, _ = mean_sd(xs)
    if n < 2:
        return out
    out["sd"] = sd
    out["half"] = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    out["interval"] = [out["mean"] - out["half"], out["mean"] + out["half"]]
    return out


def seed_interval(values: Sequence[float | None], level: float = 0.95, null: float = 0.0) -> dict:
    """The seed-level verdict on a per-seed effect (one value per seed pair; positive = the arm is better).

    Returns ``{mean, sd, n, interval, null, positive, negative, verdict}``: ``interval`` is the Student-t ``level``
    interval of the mean over the seeds (:func:`t_interval`; None with one seed); ``positive``/``negative`` count
    the seed pairs above / below ``null``; ``verdict`` is ``above`` / ``below`` when the interval excludes ``null``,
    ``no difference shown`` when it holds it, ``one seed`` without an interval and ``no seeds`` without a value.
    Two seeds give an interval 12.7 standard errors wide each way: it is computed and shown, and rarely excludes
    anything.
    """
    t = t_interval(values, level)
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    out: dict[str, Any] = {"mean": t["mean"], "sd": t["sd"], "n": t["n"], "interval": t["interval"], "null": null,
                           "positive": sum(x > null for x in xs), "negative": sum(x < null for x in xs)}
    if t["n"] == 0:
        out["verdict"] = "no seeds"
    elif t["interval"] is None:
        out["verdict"] = "one seed"
    else:
        lo, hi = t["interval"]
        out["verdict"] = "above" if lo > null else "below" if hi < null else "no difference shown"
    return out


def ols_slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Least-squares slope of ``y`` on ``x`` over the finite pairs; None with fewer than two distinct x."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    if np.unique(xa).size < 2:
        return None
    dx = xa - xa.mean()
    return float((dx * (ya - ya.mean())).sum() / (dx * dx).sum())


def seed_trend(x: Sequence[float], per_seed: Any, level: float = 0.95) -> dict:
    """The trend of a per-seed effect against ``x`` (a ladder: log10 of the rungs' size), seed by seed.

    ``per_seed``: seeds x points (one row per seed, the same seed at every point; NaN where a seed has no
    value). Each seed's own least-squares slope on ``x`` is one number; the trend is the mean of those slopes
    with its Student-t ``level`` interval over them (:func:`seed_interval`), n = the seeds with a slope (two
    points at least). Returns ``{slope, sd, interval, seeds, points, per_seed, positive, negative, verdict}``:
    ``per_seed`` each seed's slope (None for a seed with fewer than two points), ``points`` the distinct x some
    seed has a value at, ``verdict`` ``rises`` / ``falls`` when the interval excludes 0, ``no trend shown`` when
    it holds it, ``one seed`` (a slope but no interval) and ``one point`` (no slope at all).
    """
    mat = np.asarray(per_seed, dtype=np.float64)
    if mat.ndim == 1:
        mat = mat[None, :]
    xs = np.asarray(x, dtype=np.float64)
    own = [ols_slope(xs, row) for row in mat]
    has = np.isfinite(mat).any(axis=0) & np.isfinite(xs) if mat.size else np.zeros(xs.size, bool)
    v = seed_interval([s for s in own if s is not None], level)
    out: dict[str, Any] = {"slope": v["mean"], "sd": v["sd"], "interval": v["interval"], "seeds": v["n"],
                           "points": int(np.unique(xs[has]).size), "per_seed": own,
                           "positive": v["positive"], "negative": v["negative"]}
    out["verdict"] = {"no seeds": "one point", "one seed": "one seed", "above": "rises",
                      "below": "falls"}.get(v["verdict"], "no trend shown")
    return out


def trend_text(t: dict, per: str, rises: str, falls: str, flat: str = "no trend shown", over: str = "points") -> str:
    """A :func:`seed_trend` in words: the mean per-seed slope per ``per`` over its number of ``over`` (points: rungs,
    compartment counts) with its t interval and n, then ``rises`` / ``falls`` when the interval excludes 0, else
    ``flat`` "with N seeds" (and without an interval: one seed)."""
    if t["verdict"] == "one point":
        return f"one of the {over} has a value: no trend"
    head = f"{t['slope']:+.3g} per {per} over {t['points']} {over}"
    if t["verdict"] == "one seed":
        return head + f" (one seed: no interval, {flat})"
    head += f" [{t['interval'][0]:+.3g}, {t['interval'][1]:+.3g}] (t over {t['seeds']} per-seed slopes)"
    if t["verdict"] == "no trend shown":
        return head + f": {flat} with {t['seeds']} seeds"
    return head + ": " + (rises if t["verdict"] == "rises" else falls)


def interval_text(v: dict, digits: int = 4, suffix: str = "") -> str:
    """A :func:`seed_interval` (or :func:`t_interval`) as a cell: ``-0.0207 [-0.0445, +0.0032] (n=3)``; two seeds
    say how wide their interval is bound to be; one seed prints its value alone; none prints ``–``."""
    if v.get("mean") is None:
        return "–"
    head = f"{v['mean']:+.{digits}g}{suffix}"
    if v.get("interval") is None:
        return head + " (one seed)"
    lo, hi = v["interval"]
    tail = f"n={v['n']}" + (": t = 12.7, a very wide interval" if v["n"] == 2 else "")
    return f"{head} [{lo:+.{digits - 1}g}, {hi:+.{digits - 1}g}] ({tail})"


def signs_text(positive: int, negative: int, n: int) -> str:
    """How many of ``n`` seed pairs have the more common sign: ``"3/3 < 0"``, ``"2/3 > 0"``, ``"–"``."""
    if not n:
        return "–"
    if negative >= positive and negative:
        return f"{negative}/{n} < 0"
    return f"{positive}/{n} > 0" if positive else f"0/{n} ≠ 0"


# ----------------------------------------------------------------------------- equivalence and chance


def equivalence(values: Sequence[float | None], margin: float, level: float = 0.95) -> dict:
    """Two one-sided tests (Schuirmann 1987) of a per-seed effect against the margin ``margin`` > 0.

    Equivalent at ``1 - level`` (0.05) when the ``2 level - 1`` (90 %) t interval of the mean lies inside
    (-margin, +margin); different when the ``level`` (95 %) interval excludes 0. Returns ``{margin, interval,
    level, equivalent, different, verdict}`` (``interval``: the 90 % one): ``verdict`` is ``equivalent``,
    ``different``, ``different, within the margin`` (both: a difference smaller than the margin),
    ``inconclusive`` (neither: the interval spans a margin) or ``one seed`` (no interval).
    """
    if not margin > 0:
        raise ConfigError("margin", f"must be > 0, got {margin}")
    tost = t_interval(values, round(2 * level - 1, 12))
    diff = seed_interval(values, level)
    out: dict[str, Any] = {"margin": float(margin), "interval": tost["interval"], "level": round(2 * level - 1, 12),
                           "n": tost["n"], "equivalent": False, "different": diff["verdict"] in ("above", "below")}
    if tost["interval"] is None:
        out["verdict"] = "one seed" if tost["n"] else "no seeds"
        return out
    lo, hi = tost["interval"]
    out["equivalent"] = -margin < lo and hi < margin
    out["verdict"] = ("different, within the margin" if out["equivalent"] and out["different"] else
                      "equivalent" if out["equivalent"] else "different" if out["different"] else "inconclusive")
    return out


def beyond_chance(values: Sequence[float | None], chance: float, higher: bool, level: float = 0.95,
                  band: float | None = None) -> dict:
    """Whether one arm's final value is better than ``chance`` beyond noise (``higher``: the metric's direction).

    With two seeds or more: its ``level`` t interval over the seeds lies wholly on the better side of chance.
    With one seed there is no interval: it is better than chance by more than ``band`` (the caller's noise
    scale, say the run's checkpoint SD over the comparison window), or unknown without one. Returns
    ``{mean, n, interval, band, beyond}``; ``beyond`` is True / False / None (unknown). A value at chance or worse
    than it is not beyond: a model worse than chance has not learned the skill either.
    """
    t = t_interval(values, level)
    out: dict[str, Any] = {"mean": t["mean"], "n": t["n"], "interval": t["interval"], "band": band, "beyond": None}
    if t["interval"] is not None:
        lo, hi = t["interval"]
        out["beyond"] = bool(lo > chance) if higher else bool(hi < chance)
    elif t["mean"] is not None and band is not None:
        out["beyond"] = bool((t["mean"] - chance) * (1 if higher else -1) > band)
    return out


def testability(arms: Mapping[str, dict], chance: float) -> dict:
    """A comparison's testability from each arm's :func:`beyond_chance`: ``not testable`` when no arm is beyond
    chance (every one is within noise of it, or worse), ``testable`` when some arm is, ``unknown`` when none is
    and some cannot say (one seed without a noise scale). Returns ``{chance, arms, verdict}``."""
    said = [a["beyond"] for a in arms.values()]
    verdict = "testable" if any(s is True for s in said) else "unknown" if any(s is None for s in said) \
        else "not testable"
    return {"chance": chance, "arms": dict(arms), "verdict": verdict}


# ----------------------------------------------------------------------------- how many seeds


def half_width(sd: float, n: int, level: float = 0.95) -> float:
    """The half-width of the ``level`` t interval of a mean over ``n`` seeds whose SD is ``sd``."""
    if n < 2:
        raise ConfigError("n", f"an interval needs two seeds at least, got {n}")
    return t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)


def _smallest_n(lhs_quantiles: tuple[float, float], ratio: float, limit: int) -> int | None:
    """The smallest n >= 2 with n >= ((t_{q1, n-1} + t_{q2, n-1}) ratio)^2 (None past ``limit``). t quantiles exceed
    the normal's, so the search starts at the normal approximation and walks up."""
    from statistics import NormalDist

    q1, q2 = lhs_quantiles
    z = NormalDist().inv_cdf
    n = max(2, math.floor(((z(q1) + z(q2)) * ratio) ** 2))
    while n <= limit:
        if n >= ((t_quantile(q1, n - 1) + t_quantile(q2, n - 1)) * ratio) ** 2:
            return n
        n += 1
    return None


def seeds_needed(sd: float, effect: float, level: float = 0.95, power: float = 0.8, limit: int = 100_000) -> int | None:
    """Seeds for the ``level`` t interval of a paired mean effect to exclude 0 with probability ``power`` when the
    effect is ``effect`` and the seeds' SD is ``sd``: the smallest n with n >= ((t_{(1+level)/2, n-1} + t_{power,
    n-1}) sd / |effect|)^2 (the normal formula with t quantiles; docs/statistics.md). None when the effect is 0 or
    more than ``limit`` seeds would be needed; 2 when the seeds do not vary."""
    if not (math.isfinite(sd) and math.isfinite(effect)) or effect == 0:
        return None
    if sd == 0:
        return 2
    return _smallest_n((0.5 + level / 2, power), sd / abs(effect), limit)


def seeds_for_equivalence(sd: float, margin: float, level: float = 0.95, power: float = 0.8,
                          limit: int = 100_000) -> int | None:
    """Seeds for two one-sided tests at ``1 - level`` to show equivalence within ±``margin`` with probability
    ``power`` when the true effect is 0: n >= ((t_{level, n-1} + t_{(1+power)/2, n-1}) sd / margin)^2."""
    if not (math.isfinite(sd) and margin > 0):
        return None
    if sd == 0:
        return 2
    return _smallest_n((level, 0.5 + power / 2), sd / margin, limit)


def width_ratio_range(fit_seeds: int, coverage: float = 0.8) -> tuple[float, float]:
    """Where the realised interval width of ``fit_seeds + 1`` seeds falls, as a multiple of the width predicted
    from the SD of ``fit_seeds`` of them (both with the t quantile of ``fit_seeds + 1`` seeds), with probability
    ``coverage`` if the seeds' effects are normal: the width ratio squared is ``(k - 1 + F) / k`` with k =
    ``fit_seeds`` and F ~ F(1, k - 1), the square of a t with k - 1 degrees of freedom (adding one seed to k
    updates the sum of squares by (k/(k+1)) (y - mean)^2, and y - mean is independent of the k seeds' SD)."""
    k = int(fit_seeds)
    if k < 2:
        raise ConfigError("fit_seeds", f"an SD needs two seeds at least, got {k}")
    lo_q, hi_q = (1 - coverage) / 2, (1 + coverage) / 2
    f = [t_quantile(0.5 + q / 2, k - 1) ** 2 for q in (lo_q, hi_q)]
    return math.sqrt((k - 1 + f[0]) / k), math.sqrt((k - 1 + f[1]) / k)
