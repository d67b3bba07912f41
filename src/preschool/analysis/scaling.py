"""The maths of a scale ladder's report (analysis/ladder.py is its section; docs/ladder.md): saturating power-law
fits, resampling the seeds for their bands and intervals, where two fitted curves cross, and the DataDecide-style
decision table.

- :func:`fit_power_law`: ``L(C) = E + A * C^-alpha`` by least squares (linear in (E, A) for a fixed alpha, alpha
  searched on a log grid, then refined by golden section); refused, with the reason, with fewer rungs than its
  three parameters.
- :func:`bootstrap_over_seeds`: the fit to the seed means of every resample of the seeds
  (:func:`seed_resamples`: every distinct multiset with its weight when there are few seeds), for the fit's band
  and its parameters' intervals (:func:`weighted_interval`). With a few seeds a resample interval is about the
  range of what the seeds give, not a 95 % interval (:func:`resample_label` words it).
- :func:`crossing`, :func:`crossing_interval`, :func:`crossing_status`: the compute where the arm's and the
  baseline's fitted curves cross, with its interval over the seed resamples, and what may be said of it.
- :func:`decision_table`, :func:`better`, :func:`same_sign`: does a metric at a rung rank each pair of arms as
  the primary metric ranks it at the largest rung (Magnusson et al. 2025)?

Seed-level verdicts and trends are not here: they are :mod:`preschool.analysis.stats`'s, one Student-t rule
for every verdict.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any, Sequence

import numpy as np

# enough resamples that a percentile interval over them is the bootstrap's own; below it, the seeds' range
BOOTSTRAP_SEEDS = 10


def seed_resamples(n: int, draws: int, seed: int) -> list[tuple[tuple[int, ...], float]]:
    """The bootstrap resamples of ``n`` seeds as ``(indices, weight)``: every multiset of ``n`` draws
    with its multinomial probability when there are at most ``draws`` of them (3 seeds: 10), so the
    interval is the bootstrap's own and not a Monte-Carlo estimate of it; else ``draws`` random ones
    from ``np.random.default_rng(seed)``."""
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


def resample_label(n_seeds: int, level: float) -> str:
    """How a report names an interval over the resamples of ``n_seeds`` seeds: a ``level`` seed-bootstrap interval
    from :data:`BOOTSTRAP_SEEDS` seeds on; below that the range the resamples give, which is not a ``level``
    interval (with 3 seeds each all-one-seed resample weighs 1/27 > 2.5 %: the tails are single seeds)."""
    if n_seeds >= BOOTSTRAP_SEEDS:
        return f"{level:.0%} seed-bootstrap interval"
    return f"range over the seed resamples ({n_seeds} seeds: not a {level:.0%} interval)"


def seed_means(per_seed: np.ndarray) -> np.ndarray:
    """Column means of ``per_seed`` (seeds x points) over the seeds with a value; NaN for a column without any."""
    ok = np.isfinite(per_seed)
    total = np.where(ok, per_seed, 0.0).sum(axis=0)
    n = ok.sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


# ----------------------------------------------------------------------------- the power law

N_PARAMS = 3  # E, A, alpha
ALPHA_RANGE = (1e-3, 4.0)  # the exponents searched (log-spaced grid, then golden-section refinement)


def _linear_fit(z: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares ``y ~ E + B z`` for each row of ``z`` (alphas x points): ``(E, B, SSE)`` per row."""
    zm, ym = z.mean(axis=1, keepdims=True), y.mean()
    dz = z - zm
    var = (dz * dz).sum(axis=1)
    b = np.where(var > 0, (dz * (y - ym)).sum(axis=1) / np.where(var > 0, var, 1.0), 0.0)
    e = ym - b * zm[:, 0]
    resid = y[None, :] - e[:, None] - b[:, None] * z
    return e, b, (resid * resid).sum(axis=1)


def fit_power_law(compute: Sequence[float], values: Sequence[float]) -> dict[str, Any]:
    """Least-squares fit of ``values = E + A * compute^-alpha`` (alpha in :data:`ALPHA_RANGE`).

    For a fixed alpha the model is linear in (E, A), solved exactly; alpha is searched on a log grid
    and refined by golden section around the best grid point. Compute is divided by its largest value
    first (the fit is the same; the numbers stay in range). Returns ``{E, A, alpha, sse, rungs,
    at_bound}`` (``at_bound``: alpha stopped at the search range's edge, so the data do not bend like a
    power law there), or ``{refused: reason}`` with fewer distinct compute values than parameters.
    """
    c = np.asarray(compute, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(c) & np.isfinite(y) & (c > 0)
    c, y = c[keep], y[keep]
    n = int(np.unique(c).size)
    if n < N_PARAMS:
        return {"refused": f"{n} rung(s) with a value for {N_PARAMS} parameters (E, A, alpha): a fit needs at "
                           f"least {N_PARAMS}", "rungs": n}
    ref = float(c.max())
    x = c / ref
    lo, hi = (math.log(a) for a in ALPHA_RANGE)
    grid = np.exp(np.linspace(lo, hi, 161))
    _, _, sse = _linear_fit(x[None, :] ** -grid[:, None], y)
    k = int(np.argmin(sse))
    a, b = math.log(grid[max(k - 1, 0)]), math.log(grid[min(k + 1, grid.size - 1)])

    def cost(log_alpha: float) -> float:
        return float(_linear_fit(x[None, :] ** -math.exp(log_alpha), y)[2][0])

    g = (math.sqrt(5) - 1) / 2
    p, q = b - g * (b - a), a + g * (b - a)
    fp, fq = cost(p), cost(q)
    for _ in range(40):
        if fp < fq:
            b, q, fq = q, p, fp
            p = b - g * (b - a)
            fp = cost(p)
        else:
            a, p, fp = p, q, fq
            q = a + g * (b - a)
            fq = cost(q)
    alpha = math.exp((a + b) / 2)
    e, bb, s = (float(v[0]) for v in _linear_fit(x[None, :] ** -alpha, y))
    at_bound = alpha <= ALPHA_RANGE[0] * 1.05 or alpha >= ALPHA_RANGE[1] / 1.05
    # E + B (C/ref)^-alpha = E + (B ref^alpha) C^-alpha
    return {"E": e, "A": bb * ref ** alpha, "alpha": alpha, "sse": s, "rungs": n, "at_bound": at_bound}


def power_law(fit: dict, compute: np.ndarray | float) -> np.ndarray | float:
    """The fitted curve ``E + A * C^-alpha`` at ``compute``."""
    return fit["E"] + fit["A"] * np.asarray(compute, dtype=np.float64) ** -fit["alpha"]


def bootstrap_over_seeds(compute: Sequence[float], per_seed: np.ndarray, draws: int = 1000,
                         seed: int = 12345) -> tuple[list[dict], list[float]]:
    """Fits of :func:`fit_power_law` to the seed means of each resample of the seeds (rows of ``per_seed``:
    seeds x rungs, NaN where a seed has no finished run). Returns ``(fits, weights)``; a resample whose
    fit is refused is left out (its weight with it)."""
    fits, weights = [], []
    for idx, w in seed_resamples(per_seed.shape[0], draws, seed):
        f = fit_power_law(compute, seed_means(per_seed[list(idx)]))
        if "refused" not in f:
            fits.append(f)
            weights.append(w)
    return fits, weights


def crossing(fit_a: dict, fit_b: dict, lo: float, hi: float) -> float | None:
    """The smallest compute in ``[lo, hi]`` where the two fitted curves cross (the sign of their difference
    changes; bisection in log compute), or None."""
    grid = np.geomspace(lo, hi, 400)
    d = np.asarray(power_law(fit_a, grid)) - np.asarray(power_law(fit_b, grid))
    sign = np.sign(d)
    for k in range(grid.size - 1):
        if sign[k] == 0:
            return float(grid[k])
        if sign[k] * sign[k + 1] < 0:
            a, b = math.log(grid[k]), math.log(grid[k + 1])
            fa = float(power_law(fit_a, grid[k]) - power_law(fit_b, grid[k]))
            for _ in range(60):
                m = (a + b) / 2
                fm = float(power_law(fit_a, math.exp(m)) - power_law(fit_b, math.exp(m)))
                if (fm < 0) == (fa < 0):
                    a, fa = m, fm
                else:
                    b = m
            return math.exp((a + b) / 2)
    return float(grid[-1]) if sign[-1] == 0 else None


# ----------------------------------------------------------------------------- crossings with their interval


def crossing_interval(pairs: Sequence[tuple[dict, dict]], weights: Sequence[float], lo: float, hi: float,
                      level: float) -> dict[str, Any]:
    """Where each resample's two fitted curves cross (:func:`crossing` in ``[lo, hi]``; a resample whose curves do
    not cross there counts as crossing past ``hi``): ``{interval, share_crossing}``, the ``level`` interval over
    all resamples (its upper end ``inf`` when more than the upper tail's share of them does not cross)."""
    at = [crossing(fa, fb, lo, hi) for fa, fb in pairs]
    found = [c if c is not None else math.inf for c in at]
    crossed = math.fsum(w for c, w in zip(at, weights) if c is not None)
    return {"interval": weighted_interval(found, weights, level), "share_crossing": crossed / math.fsum(weights)}


def crossing_status(at: float | None, interval: list[float] | None, lo: float, top: float, hi: float) -> str:
    """What may be said of a crossing: ``crossing`` (the point fit crosses and so does every resample but the
    tails, inside the searched range), ``none`` (neither the point fit nor more than the lower tail's share of the
    resamples cross), else ``undetermined``. Without an interval (one seed) a crossing is stated only inside the
    fitted range (``at <= top``); one past it is ``undetermined``."""
    if interval is None:
        return "none" if at is None else ("crossing" if at <= top else "undetermined")
    ilo, ihi = interval
    if at is None:
        return "none" if math.isinf(ilo) else "undetermined"
    if math.isinf(ihi) or (ilo <= lo and ihi >= hi):
        return "undetermined"
    return "crossing"


# ----------------------------------------------------------------------------- decisions


def better(values: dict[str, float | None], a: str, b: str, higher: bool) -> str | None:
    """The arm ``values`` (arm -> value) ranks better of ``a`` and ``b``; ``"tie"``; None without both values."""
    va, vb = values.get(a), values.get(b)
    if va is None or vb is None or not (math.isfinite(va) and math.isfinite(vb)):
        return None
    if va == vb:
        return "tie"
    return a if (va > vb) == higher else b


def decision_table(values: dict[str, dict[str, dict[str, float | None]]], rungs: list[str],
                   higher: dict[str, bool], target: dict[tuple[str, str], str | None]) -> dict[str, Any]:
    """DataDecide-style decision accuracy: does a metric at a rung rank each pair of arms as the primary metric
    ranks it at the largest rung?

    ``values``: metric -> rung -> arm -> seed-mean value; ``higher``: metric -> higher is better; ``target``:
    pair ``(a, b)`` -> the arm the primary metric ranks better at the largest rung, or None when that ranking
    is not stable (a noisy target is flagged by the caller and scored by no metric). Returns metric -> rung ->
    ``{better: {"a vs b": arm | "tie" | None}, agree, scored, share}`` (``share`` None with no pair scored; a
    tie or a missing value does not agree).
    """
    out: dict[str, Any] = {}
    for m, by_rung in values.items():
        out[m] = {}
        for r in rungs:
            ranks = {f"{a} vs {b}": better(by_rung.get(r, {}), a, b, higher.get(m, True)) for a, b in target}
            scored = [(p, t) for p, t in zip(ranks, target.values()) if t is not None]
            agree = sum(ranks[p] == t for p, t in scored)
            out[m][r] = {"better": ranks, "agree": agree, "scored": len(scored),
                         "share": agree / len(scored) if scored else None}
    return out


def same_sign(gains: Sequence[float | None]) -> str:
    """``"yes (+)"`` / ``"yes (-)"`` when every rung's mean gain has that sign, ``"no"`` when signs differ,
    ``"–"`` with fewer than two rungs compared (a zero gain has no sign: it breaks the run)."""
    signs = [math.copysign(1, g) if g != 0 else 0 for g in gains if g is not None]
    if len(signs) < 2:
        return "–"
    if all(s == 1 for s in signs):
        return "yes (+)"
    if all(s == -1 for s in signs):
        return "yes (-)"
    return "no"
