"""Report section across the rungs of a scale ladder ("Scale ladder"; docs/ladder.md).

Switches on when the experiment has a ``ladder:``. For every rung it collects and computes the
standard report (analysis/report.py ``build_report``: collect → compute) of that rung's runs, so the
per-rung
values, differences from the baseline and one-SD verdicts are the standard tables' own; then, per
headline metric (continuous proxies included):

- **value vs training compute**: each finished run's final value against its training FLOPs (every
  stage, whole steps; ``train/flops.py``'s count, which the trainer records in the run's ``DONE`` with
  the model's parameters, as ``preschool plan`` prices it), per arm the seed mean with the seeds' range;
  one plot per metric (``plots/ladder_<metric>.png``);
- **a saturating power law per arm**, ``L(C) = E + A * C^-alpha`` fitted to the seed means by least
  squares (:func:`fit_power_law`; ``A`` may be negative: an accuracy rising to ``E``), with
  percentile intervals from resampling the seeds (:func:`bootstrap_over_seeds`: the same seeds at every
  rung and for every arm, as the runs pair them); refused, with the reason, with fewer rungs than its
  three parameters;
- **the gain over the baseline at every rung** with the stable-gain verdict of that rung's standard
  report (analysis/compute.py ``stable_gains``), and whether the gain's sign is the same at every rung;
- **where the fitted curves cross** (:func:`crossing`), searched from the smallest rung to
  ``extrapolate`` x the largest rung's compute, with its interval over the resamples, else "none";
- **a decision table** (DataDecide, Magnusson et al. 2025): for each pair of arms, whether the order
  at each smaller rung is the order at the largest, and the share of pairs that agree.

A fit over a few small rungs read far beyond them is a guess: the report says so beside every number
that lies beyond the largest rung (a crossing past it, the asymptote ``E``). Every plotted number is in
``results.json`` under ``sections.ladder``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import check
from .sections import SECTIONS, Section, SectionContext

N_PARAMS = 3  # E, A, alpha
ALPHA_RANGE = (1e-3, 4.0)  # the exponents searched (log-spaced grid, then golden-section refinement)
_GUESS = "a fit over {n} small rungs extrapolated {x} is a guess, not a prediction"


# ----------------------------------------------------------------------------- the power law


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


def seed_resamples(n: int, draws: int, seed: int) -> list[tuple[tuple[int, ...], float]]:
    """The bootstrap resamples of ``n`` seeds as ``(indices, weight)``: every multiset of ``n`` draws
    with its multinomial probability when there are at most ``draws`` of them (3 seeds: 10), so the
    interval is the bootstrap's own and not a Monte-Carlo estimate of it; else ``draws`` random ones."""
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
    """The ``level`` percentile interval of weighted values (the lower inverse CDF at each tail)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    v, cw = v[order], np.cumsum(w[order]) / w.sum()
    tail = (1 - level) / 2
    lo = v[min(int(np.searchsorted(cw, tail - 1e-12)), v.size - 1)]
    hi = v[min(int(np.searchsorted(cw, 1 - tail - 1e-12)), v.size - 1)]
    return [float(lo), float(hi)]


def seed_means(per_seed: np.ndarray) -> np.ndarray:
    """Column means of ``per_seed`` (seeds x rungs) over the seeds with a value; NaN for a rung without any."""
    ok = np.isfinite(per_seed)
    total = np.where(ok, per_seed, 0.0).sum(axis=0)
    n = ok.sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


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


# ----------------------------------------------------------------------------- decisions


def decision_table(values: dict[str, dict[str, float]], rungs: list[str], higher: bool) -> dict[str, Any]:
    """DataDecide's decision accuracy for one metric. ``values``: rung -> arm -> seed-mean value; ``rungs``
    from the smallest to the largest compute (the last is the target).

    For each pair of arms (in the order given) and each smaller rung: the arm the rung ranks better
    (``higher``: is a larger value better), and whether the largest rung ranks it better too. A tie, or
    an arm without a value at either rung, does not agree. Returns ``{target, pairs: [{pair, better:
    {rung: arm|"tie"|None}, agree: {rung: bool}}], share: {rung: fraction of pairs that agree}}``.
    """
    target = rungs[-1]
    arms = list(dict.fromkeys(a for r in rungs for a in values.get(r, {})))
    pairs = []

    def better(r: str, a: str, b: str) -> str | None:
        va, vb = values.get(r, {}).get(a), values.get(r, {}).get(b)
        if va is None or vb is None or not (math.isfinite(va) and math.isfinite(vb)):
            return None
        if va == vb:
            return "tie"
        return a if (va > vb) == higher else b

    for a, b in itertools.combinations(arms, 2):
        ranks = {r: better(r, a, b) for r in rungs}
        top = ranks[target]
        agree = {r: top not in (None, "tie") and ranks[r] == top for r in rungs[:-1]}
        pairs.append({"pair": [a, b], "better": ranks, "agree": agree})
    share = {r: (sum(p["agree"][r] for p in pairs) / len(pairs) if pairs else None) for r in rungs[:-1]}
    return {"target": target, "pairs": pairs, "share": share}


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


# ----------------------------------------------------------------------------- collecting the rungs


def rung_results(view, rep=None) -> dict[str, Any]:
    """One rung's numbers: the standard report's (``rep``, else ``collect`` → ``compute`` on the rung's
    config ``view``) and, from each finished run's ``DONE``, its training FLOPs and parameters.

    Returns ``{rung, arms: {arm: {flops, params, params_non_embedding, seeds: {seed: {metric: final}},
    unfinished: [seeds]}}, headline, higher, stable_gain}``; a run that has not finished is left out of the
    values (its final value is not the rung's) and listed, and so is a finished run whose ``DONE`` predates
    the FLOPs record (``no_flops``)."""
    from ..io import read_json
    from ..layout import done_path
    from .report import build_report

    rep = build_report(view) if rep is None else rep
    out: dict[str, Any] = {}
    for name in rep.names:
        seeds, unfinished, no_flops, cost = {}, [], [], {}
        for seed, s in rep.seed_results(name).items():
            if not s.done:
                if s.curves:
                    unfinished.append(seed)
                continue
            done = read_json(done_path(s.run_dir))
            if done.get("flops") is None:
                no_flops.append(seed)
                continue
            model = done["model"]
            cost = {"flops": float(done["flops"]), "params": int(model["params_total"]),
                    "params_non_embedding": int(model["params_non_embedding"])}
            seeds[seed] = {m: c[-1][1] for m, c in s.curves.items() if c and m in rep.headline}
        out[name] = {"flops": None, "params": None, "params_non_embedding": None, **cost, "seeds": seeds,
                     "unfinished": unfinished, "no_flops": no_flops}
    return {"rung": view.rung, "arms": out, "headline": rep.headline, "higher": rep.higher,
            "stable_gain": [g.to_json() for g in rep.stable_gain]}


# ----------------------------------------------------------------------------- the section


@dataclass
class LadderSectionConfig:
    """``report.sections.ladder``: the resampling and the crossing search."""

    draws: int = 1000  # bootstrap resamples of the seeds (every distinct one when there are fewer)
    seed: int = 12345
    extrapolate: float = 100.0  # search for crossings up to this multiple of the largest rung's compute
    level: float = 0.95

    def validate(self) -> None:
        check(self.draws >= 10, "draws", f"must be >= 10, got {self.draws}")
        check(self.extrapolate >= 1, "extrapolate", f"must be >= 1, got {self.extrapolate}")
        check(0 < self.level < 1, "level", f"must be in (0, 1), got {self.level}")


def _fmt(x: float | None, digits: int = 4) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def _metric_file(m: str) -> str:
    return "ladder_" + m.replace("/", "_") + ".png"


@SECTIONS.register("ladder", LadderSectionConfig)
class LadderSection(Section):
    """Across the rungs of a ladder: value vs compute, power-law fits, gains per rung, crossings, decisions."""

    order = 5  # first of the sections: it reads the whole ladder, the others the largest rung

    @classmethod
    def applies(cls, ctx: SectionContext) -> bool:
        return bool(ctx.ladder)

    def write(self, ctx: SectionContext) -> tuple[dict | None, list[str]]:
        cfg = self.cfg or LadderSectionConfig()
        if not ctx.ladder:  # named in report.sections of an experiment without one
            return None, ["## Scale ladder", "", "This experiment has no `ladder:`: there are no rungs to compare.", ""]
        # the rung the standard tables read is already collected and computed (ctx.report)
        if ctx.stored is None:
            every = [rung_results(v, ctx.report if v.rung == ctx.config.get("rung") else None) for v in ctx.ladder]
        else:  # a re-render: every rung's numbers as results.json stored them (analysis/from_results.py)
            from .from_results import stored_rungs

            every = stored_rungs(ctx.stored, ctx.seeds)
        per_rung = [r for r in every if any(a["seeds"] for a in r["arms"].values())]
        waiting = [r["rung"] for r in every if not any(a["seeds"] for a in r["arms"].values())]
        if not per_rung:
            return {"rungs": [], "without_finished_runs": waiting}, [
                "## Scale ladder", "", "No rung has a finished run yet.", ""]
        baseline = ctx.baseline
        # smallest to largest compute (the ladder lists them so, but the FLOPs decide)
        per_rung.sort(key=lambda r: max(a["flops"] for a in r["arms"].values() if a["flops"] is not None))
        rungs = [r["rung"] for r in per_rung]
        arms = list(per_rung[-1]["arms"])
        higher = {k: v for r in per_rung for k, v in r["higher"].items()}
        metrics = list(dict.fromkeys(m for r in per_rung for m in r["headline"]))
        seeds = sorted({s for r in per_rung for a in r["arms"].values() for s in a["seeds"]}, key=str)
        results: dict[str, Any] = {"rungs": [], "metrics": {}, "baseline": baseline, "level": cfg.level,
                                   "extrapolate": cfg.extrapolate, "without_finished_runs": waiting}
        for r in per_rung:
            results["rungs"].append({"rung": r["rung"], "arms": {
                a: {k: v for k, v in d.items() if k != "seeds"} | {"seeds": sorted(d["seeds"], key=str)}
                for a, d in r["arms"].items()}})
        for m in metrics:
            results["metrics"][m] = self._metric(ctx, cfg, m, per_rung, rungs, arms, seeds, higher.get(m, True))
        results["tables_above"] = ctx.config.get("rung")
        results["rung_results"] = every  # what a re-render from results.json reads the rungs from
        lines = self._lines(results, rungs, arms, baseline)
        return results, lines

    def _metric(self, ctx, cfg, m, per_rung, rungs, arms, seeds, higher) -> dict[str, Any]:
        baseline = ctx.baseline
        out: dict[str, Any] = {"direction": "higher" if higher else "lower", "arms": {}, "gains": {},
                               "crossings": {}}
        matrices = {}
        for a in arms:
            compute = [np.nan if r["arms"][a]["flops"] is None else r["arms"][a]["flops"] for r in per_rung]
            mat = np.full((len(seeds), len(rungs)), np.nan)
            for j, r in enumerate(per_rung):
                for i, s in enumerate(seeds):
                    v = r["arms"][a]["seeds"].get(s, {}).get(m)
                    if v is not None:
                        mat[i, j] = v
            matrices[a] = (compute, mat)
            means = seed_means(mat)
            points = []
            for j, rung in enumerate(rungs):
                col = mat[:, j][np.isfinite(mat[:, j])]
                points.append({"rung": rung, "flops": compute[j], "n": int(col.size),
                               "mean": float(means[j]) if col.size else None,
                               "sd": float(col.std(ddof=1)) if col.size > 1 else None,
                               "min": float(col.min()) if col.size else None,
                               "max": float(col.max()) if col.size else None,
                               "seeds": {str(s): float(mat[i, j]) for i, s in enumerate(seeds)
                                         if math.isfinite(mat[i, j])}})
            fit = fit_power_law(compute, means)
            if "refused" not in fit:
                fits, weights = bootstrap_over_seeds(compute, mat, cfg.draws, cfg.seed)
                fit["resamples"] = len(fits)
                if len(seeds) > 1 and fits:
                    for p in ("E", "A", "alpha"):
                        fit[f"{p}_interval"] = weighted_interval([f[p] for f in fits], weights, cfg.level)
            out["arms"][a] = {"points": points, "fit": fit}
        # the gain over the baseline at every rung: the standard report's stable-gain row of that rung
        for a in arms:
            if a == baseline:
                continue
            row = {}
            for r in per_rung:
                g = next((g for g in r["stable_gain"] if g["arm"] == a and g["metric"] == m), None)
                row[r["rung"]] = None if g is None else {k: g[k] for k in ("mean", "sd", "n", "verdict", "seeds")}
            out["gains"][a] = {"rungs": row, "same_sign": same_sign([g["mean"] if g else None for g in row.values()])}
            out["crossings"][a] = self._crossing(cfg, matrices[a], matrices[baseline], out["arms"][a]["fit"],
                                                 out["arms"][baseline]["fit"], len(seeds))
        values = {p["rung"]: {a: out["arms"][a]["points"][j]["mean"] for a in arms}
                  for j, p in enumerate(out["arms"][baseline]["points"])}
        out["decisions"] = decision_table(values, rungs, higher)
        out["plot"] = self._plot(ctx, cfg, m, out, rungs)
        return out

    def _crossing(self, cfg, arm, base, fit_a, fit_b, n_seeds) -> dict[str, Any]:
        """Where the arm's and the baseline's fitted curves cross, with its interval over paired resamples."""
        if "refused" in fit_a or "refused" in fit_b:
            return {"refused": fit_a.get("refused") or fit_b.get("refused")}
        both = [c for c in [*arm[0], *base[0]] if math.isfinite(c)]  # the rungs where either has runs
        lo, top = min(both), max(both)
        hi = top * cfg.extrapolate
        at = crossing(fit_a, fit_b, lo, hi)
        res: dict[str, Any] = {"flops": at, "largest_rung_flops": top, "searched": [lo, hi],
                               "beyond_largest": None if at is None else at / top}
        if n_seeds > 1:
            found, weights, total = [], [], 0.0
            for idx, w in seed_resamples(n_seeds, cfg.draws, cfg.seed):
                fa = fit_power_law(arm[0], seed_means(arm[1][list(idx)]))
                fb = fit_power_law(base[0], seed_means(base[1][list(idx)]))
                if "refused" in fa or "refused" in fb:
                    continue
                total += w
                c = crossing(fa, fb, lo, hi)
                if c is not None:
                    found.append(c)
                    weights.append(w)
            res["share_crossing"] = sum(weights) / total if total else None
            if found:
                res["interval"] = weighted_interval(found, weights, cfg.level)
        return res

    def _plot(self, ctx, cfg, m, out, rungs) -> str | None:
        from .plots import new_figure, save_figure

        fig = new_figure()
        ax = fig.add_subplot(1, 1, 1)
        measured = [p["flops"] for a in out["arms"].values() for p in a["points"] if p["mean"] is not None]
        if not measured:  # only unfinished runs logged this metric
            return None
        top, low = max(measured), min(measured)
        for a, d in out["arms"].items():
            pts = [p for p in d["points"] if p["mean"] is not None]
            if not pts:
                continue
            xs = np.array([p["flops"] for p in pts])
            ys = np.array([p["mean"] for p in pts])
            err = np.array([[p["mean"] - p["min"], p["max"] - p["mean"]] for p in pts]).T
            line = ax.errorbar(xs, ys, yerr=err, marker="o", ms=4, capsize=3, linestyle="none",
                               label=f"{a} (seed mean, range)")
            color = line[0].get_color()
            for p in pts:
                ax.scatter([p["flops"]] * len(p["seeds"]), list(p["seeds"].values()), s=8, color=color, alpha=0.4)
            if "refused" not in d["fit"]:
                inside = np.geomspace(low, top, 100)
                beyond = np.geomspace(top, top * cfg.extrapolate, 100)
                ax.plot(inside, power_law(d["fit"], inside), color=color, linewidth=1,
                        label=f"{a}: E + A C^-α, α = {d['fit']['alpha']:.3g}")
                ax.plot(beyond, power_law(d["fit"], beyond), color=color, linewidth=1, linestyle=":")
        ax.set_xscale("log")
        ax.set_xlabel("training compute (FLOPs; dotted: extrapolated)")
        ax.set_ylabel(m)
        ax.set_title(f"{m} across the ladder ({out['direction']} is better)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        path = save_figure(fig, ctx.plots / _metric_file(m))
        ctx.figure(f"{m} vs training compute (ladder)", path)
        return path.relative_to(ctx.out).as_posix()

    # ------------------------------------------------------------------------- markdown

    def _lines(self, res: dict, rungs: list[str], arms: list[str], baseline: str) -> list[str]:
        n = len(rungs)
        pct = f"{res['level']:.0%}"
        lines = ["## Scale ladder",
                 f"The same arms at {n} rung(s), from the smallest to the largest training compute: "
                 f"{', '.join(rungs)}. Each value is a finished run's final value (as in Results); compute is "
                 "the run's training FLOPs (every stage, whole steps; `train/flops.py`). Fits: "
                 f"L(C) = E + A·C^-α per arm on the seed means, {pct} intervals from resampling the seeds "
                 "(the same seeds at every rung and for every arm). Gains and verdicts per rung are that "
                 "rung's own stable-gain rows (mean > SD over the last window). docs/ladder.md says how to "
                 "read this and what it cannot tell. The tables above (Results, differences, efficiency, "
                 f"other sections) are rung {res['tables_above']}'s."
                 + (f" Not read yet (no finished run): {', '.join(res['without_finished_runs'])}."
                    if res["without_finished_runs"] else ""), "",
                 "| rung | " + " | ".join(f"{a}: params (non-emb.) | {a}: FLOPs / run" for a in arms) + " |",
                 "|---|" + "---|---|" * len(arms)]
        for r in res["rungs"]:
            cells = []
            for a in arms:
                d = r["arms"][a]
                left = f" ({len(d['unfinished'])} unfinished left out)" if d["unfinished"] else ""
                if d["no_flops"]:
                    left += (f" ({len(d['no_flops'])} without a FLOPs record in DONE left out: trained before it "
                             "was kept)")
                if d["flops"] is None:
                    cells += ["–", "–" + left]
                else:
                    cells += [f"{d['params']:,} ({d['params_non_embedding']:,})", f"{d['flops']:.3g}{left}"]
            lines.append(f"| {r['rung']} | " + " | ".join(cells) + " |")
        lines.append("")
        for m, d in res["metrics"].items():
            lines += [f"### {m} ({d['direction']} is better)", "",
                      "| rung | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
            for j, rung in enumerate(rungs):
                cells = []
                for a in arms:
                    p = d["arms"][a]["points"][j]
                    cells.append("–" if p["mean"] is None else
                                 f"{p['mean']:.4g}" + (f" ± {p['sd']:.2g}" if p["sd"] is not None else "")
                                 + f" (n={p['n']})")
                lines.append(f"| {rung} | " + " | ".join(cells) + " |")
            lines += ["", "Fit E + A·C^-α per arm:", ""]
            for a in arms:
                f = d["arms"][a]["fit"]
                if "refused" in f:
                    lines.append(f"- {a}: not fitted: {f['refused']}")
                    continue

                def iv(p: str, f=f) -> str:
                    i = f.get(f"{p}_interval")
                    return f" [{_fmt(i[0])}, {_fmt(i[1])}]" if i else ""

                note = " (α at the edge of the searched range: the values do not bend like a power law)" \
                    if f["at_bound"] else ""
                if f["rungs"] == N_PARAMS:
                    note += f"; {N_PARAMS} rungs for {N_PARAMS} parameters: the curve passes through every point, " \
                            "nothing tests its form"
                lines.append(f"- {a}: E = {_fmt(f['E'])}{iv('E')}, A = {_fmt(f['A'])}{iv('A')}, "
                             f"α = {_fmt(f['alpha'])}{iv('alpha')}{note}. E is the curve at unlimited compute: "
                             + _GUESS.format(n=f["rungs"], x="that far"))
            if any("E_interval" not in d["arms"][a]["fit"] for a in arms if "refused" not in d["arms"][a]["fit"]):
                lines.append("- (no interval: one seed)")
            if d["gains"]:
                lines += ["", f"Gain over {baseline} (positive = better) per rung, with that rung's verdict:", "",
                          "| arm | " + " | ".join(rungs) + " | same sign at every rung |",
                          "|---|" + "---|" * (len(rungs) + 1)]
                for a, g in d["gains"].items():
                    cells = []
                    for rung in rungs:
                        x = g["rungs"].get(rung)
                        cells.append("–" if x is None or x["mean"] is None else
                                     f"{x['mean']:+.4g} ± {x['sd']:.2g}: {x['verdict']}")
                    lines.append(f"| {a} | " + " | ".join(cells) + f" | {g['same_sign']} |")
                lines.append("")
                for a, c in d["crossings"].items():
                    lines.append(f"- {a} vs {baseline}: " + self._crossing_text(c, res["extrapolate"], n))
            dec = d["decisions"]
            if dec["pairs"] and len(rungs) > 1:
                lines += ["", f"Decisions: does each smaller rung rank the pair as the largest ({dec['target']}) does?",
                          "", "| pair | " + " | ".join(rungs) + " |", "|---|" + "---|" * len(rungs)]
                for p in dec["pairs"]:
                    cells = [(p["better"][r] or "–") + ("" if r == dec["target"] else
                                                        (" ✓" if p["agree"][r] else " ✗")) for r in rungs]
                    lines.append(f"| {p['pair'][0]} vs {p['pair'][1]} | " + " | ".join(cells) + " |")
                lines.append("| share of pairs agreeing | " + " | ".join(
                    "target" if r == dec["target"] else ("–" if dec["share"][r] is None else f"{dec['share'][r]:.0%}")
                    for r in rungs) + " |")
            lines.append("")
        return lines

    @staticmethod
    def _crossing_text(c: dict, extrapolate: float, n: int) -> str:
        if "refused" in c:
            return f"no crossing computed ({c['refused']})"
        iv = ""
        if c.get("interval"):
            iv = (f" ({_fmt(c['interval'][0], 3)} to {_fmt(c['interval'][1], 3)} FLOPs over the resamples that "
                  f"cross, {c['share_crossing']:.0%} of them)")
        elif c.get("share_crossing") is not None:
            iv = " (none of the resamples cross)"
        if c["flops"] is None:
            return f"the fitted curves do not cross within {extrapolate:g}x of the largest rung{iv}"
        where = f"{c['flops']:.3g} FLOPs{iv}"
        if c["beyond_largest"] > 1:
            return (f"the fitted curves cross at {where}, {c['beyond_largest']:.3g}x the largest rung's compute: "
                    + _GUESS.format(n=n, x=f"{c['beyond_largest']:.3g}x past its largest rung"))
        return f"the fitted curves cross at {where}, within the rungs measured"


__all__ = ["LadderSection", "LadderSectionConfig", "bootstrap_over_seeds", "crossing", "decision_table",
           "fit_power_law", "power_law", "rung_results", "same_sign", "seed_means", "seed_resamples",
           "weighted_interval"]
