"""Report section across the rungs of a scale ladder ("Scale ladder"; docs/ladder.md).

Switches on when the experiment has a ``ladder:``. It reads the rungs the report pipeline computed
(``ctx.ladder``: one :class:`~preschool.analysis.records.Rung` per rung, each the standard report of that
rung's runs with every finished run's cost and final values; analysis/report.py builds them) and builds
no report itself. Per headline metric (continuous proxies included):

- **value vs training compute**: each finished run's final value against its training FLOPs (every
  stage, whole steps; ``train/flops.py``'s count, which the trainer records in the run's ``DONE`` with
  the model's parameters, as ``preschool plan`` prices it), per arm the seed mean with the seeds' range;
  one plot per metric (``plots/ladder_<metric>.png``);
- **a saturating power law per arm**, ``L(C) = E + A * C^-alpha`` fitted to the seed means by least
  squares (analysis/scaling.py :func:`~preschool.analysis.scaling.fit_power_law`; ``A`` may be negative: an
  accuracy rising to ``E``), with percentile intervals and a band on the plot from resampling the seeds (the
  same seeds at every rung and for every arm, as the runs pair them; with fewer than 10 seeds that is the range
  the resamples give, and the report calls it so); refused, with the reason, with fewer rungs than its three
  parameters;
- **the gain over the baseline at every rung**, per seed pair (arm − baseline of the same seed, final
  values), with the seed-level verdict (``rule: seeds``: the Student-t interval over the seed pairs
  excludes 0; one seed pair gives none, and its cell shows the rung's verify-ppt within-run row instead,
  named so; ``rule: verify-ppt`` shows that row at every rung), how many seed pairs have each sign, and
  **the trend**: each seed's slope of its gain against log10 of the rungs' size, and the Student-t interval
  over those slopes, whose words ("harm shrinks with size", "no trend shown with 3 seeds") follow from that
  interval (:func:`trend_words`; the same t rule as the per-rung verdicts, analysis/stats.py). A rung where
  every arm is within noise of the metric's chance level is "not testable at this scale";
- **where the fitted curves cross** (:func:`crossing`), searched from the smallest rung to
  ``extrapolate`` x the largest rung's compute, stated only with its interval over the seed resamples
  (:func:`crossing_status`: "undetermined" when the interval reaches past the searched range, and for
  one past the largest rung without an interval);

and **a decision table** (DataDecide, Magnusson et al. 2025): for each pair of arms, does each metric at
each rung rank it as the primary metric (``primary``) ranks it at the largest rung; a target ranking
that is not itself stable is flagged and scored by no metric (:func:`decision_table`).

A fit over a few small rungs read far beyond them is a guess: the report says so beside every number
that lies beyond the largest rung (a crossing past it, the asymptote ``E``). Every plotted number is in
``results.json`` under ``sections.ladder``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import check
from ..errors import ConfigError
from .compute import NOT_TESTABLE, SEED_VERDICTS
from .records import Rung, direction_word
from .sections import SECTIONS, Section, SectionContext
from .scaling import (N_PARAMS, bootstrap_over_seeds, crossing, crossing_interval, crossing_status,
                      decision_table, fit_power_law, power_law, resample_label, same_sign, seed_means,
                      seed_resamples, weighted_interval)
from .stats import beyond_chance, interval_text, seed_interval, seed_trend, signs_text, testability, trend_text

_GUESS = "a fit over {n} small rungs extrapolated {x} is a guess, not a prediction"


def trend_words(t: dict, means: Sequence[float | None], per: str, gain: str = "gain", harm: str = "harm") -> str:
    """The words a :func:`~preschool.analysis.stats.seed_trend` allows about an effect (positive = ``gain``):
    the slope per ``per`` with its interval, then "<harm> shrinks / grows with size" (every rung's mean is a
    harm), "<gain> grows / shrinks" (every one a gain), "rises / falls" (mixed), or "no trend shown with N
    seeds" when the interval holds 0 (:func:`~preschool.analysis.stats.trend_text`)."""
    ms = [m for m in means if m is not None]
    if ms and all(m < 0 for m in ms):
        return trend_text(t, per, f"{harm} shrinks with size", f"{harm} grows with size", over="rungs")
    if ms and all(m > 0 for m in ms):
        return trend_text(t, per, f"{gain} grows with size", f"{gain} shrinks with size", over="rungs")
    return trend_text(t, per, f"{gain} rises with size", f"{gain} falls with size", over="rungs")


def rung_json(r: Rung) -> dict[str, Any]:
    """What a re-render from ``results.json`` rebuilds the rung from (analysis/from_results.py
    ``stored_rungs``): each arm's cost and finished runs' final values, the rung's headline metrics, their
    directions and its stable-gain rows."""
    return {"rung": r.name,
            "arms": {a: {"flops": d.flops, "params": d.params, "params_non_embedding": d.params_non_embedding,
                         "seeds": d.finals, "unfinished": d.unfinished, "no_flops": d.no_flops}
                     for a, d in r.arms.items()},
            "headline": r.report.headline, "higher": r.report.higher,
            "stable_gain": [g.to_json() for g in r.report.stable_gain]}


# ----------------------------------------------------------------------------- the section

RULES = ("seeds", "verify-ppt")
SIZES = {"non_embedding": "non-embedding parameters", "params": "parameters", "flops": "training FLOPs"}


@dataclass
class LadderSectionConfig:
    """``report.sections.ladder``: the resampling, the crossing search, the per-rung verdict rule, the size a
    trend is read against and the metric the decision table predicts."""

    draws: int = 1000  # resamples of the seeds for the fits' bands (every distinct one when there are fewer)
    seed: int = 12345
    extrapolate: float = 100.0  # search for crossings up to this multiple of the largest rung's compute
    level: float = 0.95
    # per-rung verdicts: "seeds" (t interval over the per-seed final gains; one seed pair: none, the verify-ppt
    # row shown instead) or "verify-ppt" (one SD over the last window's checkpoints, pooled over the seeds)
    rule: str = "seeds"
    size: str = "non_embedding"  # trends per decade of: non_embedding (Kaplan's N), params (total) or flops
    # the metric whose largest-rung ranking the decisions predict (None: the first headline metric on the
    # language axis, else the first)
    primary: str | None = None

    def validate(self) -> None:
        check(self.draws >= 10, "draws", f"must be >= 10, got {self.draws}")
        check(self.extrapolate >= 1, "extrapolate", f"must be >= 1, got {self.extrapolate}")
        check(0 < self.level < 1, "level", f"must be in (0, 1), got {self.level}")
        check(self.rule in RULES, "rule", f"must be one of {list(RULES)}, got {self.rule!r}")
        check(self.size in SIZES, "size", f"must be one of {list(SIZES)}, got {self.size!r}")


def _fmt(x: float | None, digits: int = 4) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def _direction_text(direction: str | None) -> str:
    return f"{direction} is better" if direction else "no declared direction: shown, not judged"


def _metric_file(m: str) -> str:
    return "ladder_" + m.replace("/", "_") + ".png"


def rung_size(rung: Rung, baseline: str, size: str) -> float | None:
    """A rung's size for trends: the baseline's (else any arm's) ``size`` (:data:`SIZES`) at that rung."""
    key = "params_non_embedding" if size == "non_embedding" else size
    order = [baseline, *[a for a in rung.arms if a != baseline]]
    return next((float(getattr(rung.arms[a], key)) for a in order if a in rung.arms
                 and getattr(rung.arms[a], key) is not None), None)


ONE_SEED = SEED_VERDICTS["one seed"]


@SECTIONS.register("ladder", LadderSectionConfig)
class LadderSection(Section):
    """Across the rungs of a ladder: value vs compute, power-law fits, gains per rung and their trend,
    crossings, decisions."""

    order = 5  # first of the sections: it reads the whole ladder, the others the largest rung

    @classmethod
    def applies(cls, ctx: SectionContext) -> bool:
        return bool(ctx.ladder)

    def write(self, ctx: SectionContext) -> tuple[dict | None, list[str]]:
        cfg = self.cfg or LadderSectionConfig()
        if not ctx.ladder:  # named in report.sections of an experiment without one
            return None, ["## Scale ladder", "", "This experiment has no `ladder:`: there are no rungs to compare.", ""]
        per_rung = sorted((r for r in ctx.ladder if r.finished), key=lambda r: r.flops)  # the FLOPs order them
        waiting = [r.name for r in ctx.ladder if not r.finished]
        if not per_rung:
            return {"rungs": [], "without_finished_runs": waiting}, [
                "## Scale ladder", "", "No rung has a finished run yet.", ""]
        baseline = ctx.baseline
        rungs = [r.name for r in per_rung]
        arms = list(per_rung[-1].arms)
        higher = {k: v for r in per_rung for k, v in r.report.higher.items()}
        metrics = list(dict.fromkeys(m for r in per_rung for m in r.report.headline))
        seeds = sorted({s for r in per_rung for a in r.arms.values() for s in a.finals}, key=str)
        sizes = [rung_size(r, baseline, cfg.size) for r in per_rung]
        results: dict[str, Any] = {"rungs": [], "metrics": {}, "baseline": baseline, "level": cfg.level,
                                   "seeds": len(seeds),
                                   "extrapolate": cfg.extrapolate, "rule": cfg.rule, "size": cfg.size,
                                   "without_finished_runs": waiting}
        for r, x in zip(per_rung, sizes):
            results["rungs"].append({"rung": r.name, "size": x, "arms": {a: d.to_json() for a, d in r.arms.items()}})
        x = [math.log10(v) if v else math.nan for v in sizes]
        for m in metrics:
            chance = (ctx.report.chance if ctx.report is not None else per_rung[-1].report.chance).get(m)
            results["metrics"][m] = self._metric(ctx, cfg, m, per_rung, arms, seeds, higher.get(m), x, chance)
        results["decisions"] = self._decisions(cfg, results["metrics"], per_rung, arms, seeds, higher, baseline)
        results["tables_above"] = ctx.config.get("rung")
        results["rung_results"] = [rung_json(r) for r in ctx.ladder]  # what a re-render reads the rungs from
        return results, self._lines(results, rungs, arms, baseline)

    @staticmethod
    def _matrix(per_rung: list[Rung], arm: str, seeds: list, m: str) -> np.ndarray:
        """Each seed's final value of ``m`` at each rung (seeds x rungs; NaN without a finished run)."""
        mat = np.full((len(seeds), len(per_rung)), np.nan)
        for j, r in enumerate(per_rung):
            for i, s in enumerate(seeds):
                v = r.arms[arm].finals.get(s, {}).get(m) if arm in r.arms else None
                if v is not None:
                    mat[i, j] = v
        return mat

    def _metric(self, ctx, cfg, m, per_rung, arms, seeds, higher, x, chance) -> dict[str, Any]:
        baseline = ctx.baseline
        rungs = [r.name for r in per_rung]
        out: dict[str, Any] = {"direction": direction_word(higher), "chance": chance, "arms": {}, "gains": {},
                               "crossings": {}}
        matrices = {}
        for a in arms:
            compute = [np.nan if a not in r.arms or r.arms[a].flops is None else r.arms[a].flops for r in per_rung]
            mat = self._matrix(per_rung, a, seeds, m)
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
                    fit["band"] = self._band(cfg, compute, fits, weights)
            out["arms"][a] = {"points": points, "fit": fit}
        sign = 1.0 if higher else -1.0  # positive = the arm is better
        for a in arms if higher is not None else []:  # a metric without a declared direction: shown, not judged
            if a == baseline:
                continue
            effect = sign * (matrices[a][1] - matrices[baseline][1])  # per seed pair and rung
            row = {}
            for j, r in enumerate(per_rung):
                cols = {arm: matrices[arm][1][:, j] for arm in (baseline, a)}
                row[r.name] = self._rung_verdict(cfg, effect[:, j], r, a, m, chance, higher, cols)
            means = [g["mean"] for g in row.values()]
            pairs = effect[np.isfinite(effect)]
            out["gains"][a] = {"rungs": row, "same_sign": same_sign(means),
                               "pairs": {"n": int(pairs.size), "positive": int((pairs > 0).sum()),
                                         "negative": int((pairs < 0).sum())},
                               "trend": seed_trend(x, effect, cfg.level)}
            out["gains"][a]["trend"]["words"] = trend_words(out["gains"][a]["trend"], means, "decade")
            out["crossings"][a] = self._crossing(cfg, matrices[a], matrices[baseline], out["arms"][a]["fit"],
                                                 out["arms"][baseline]["fit"], len(seeds))
        out["plot"] = self._plot(ctx, cfg, m, out)
        return out

    @staticmethod
    def _rung_verdict(cfg, effect: np.ndarray, rung: Rung, arm: str, m: str, chance: float | None, higher: bool,
                      cols: dict[str, np.ndarray]) -> dict[str, Any]:
        """One rung's verdict on the arm's gain: the seed-level t interval over the per-seed final gains
        (``rule: seeds``; one seed pair: "one seed: no seed-level verdict"), and beside it the verify-ppt
        within-run rule of that rung's stable-gain row (the verdict with ``rule: verify-ppt``); "not testable at
        this scale" when no arm's final values (``cols``: arm -> the seeds' values at the rung) clear the metric's
        ``chance`` level beyond noise (with one seed: as the rung's own difference row found)."""
        v = seed_interval(effect, cfg.level)
        g = next((g for g in rung.report.stable_gain if g.arm == arm and g.metric == m), None)
        checkpoints = None if g is None else {"mean": g.mean, "sd": g.sd, "n": g.n, "seeds": g.seeds,
                                              "verdict": g.verdict}
        testable = None
        if chance is not None:
            vals = {a: c[np.isfinite(c)].tolist() for a, c in cols.items()}
            testable = testability({a: beyond_chance(x, chance, higher, cfg.level) for a, x in vals.items()}, chance) \
                if all(len(x) >= 2 for x in vals.values()) else (g.testability if g is not None else None)
        out = {**v, "checkpoints": checkpoints, "testability": testable}
        if testable is not None and testable["verdict"] == "not testable":
            return {**out, "verdict": NOT_TESTABLE, "rule": cfg.rule}
        if cfg.rule == "seeds":
            return {**out, "verdict": SEED_VERDICTS.get(v["verdict"], "–"), "rule": "seeds"}
        return {**out, "verdict": "–" if g is None else g.verdict, "rule": "verify-ppt"}

    @staticmethod
    def _band(cfg, compute, fits, weights) -> dict[str, list]:
        """The ``level`` band of the fitted curve over the seed resamples, from the smallest rung to
        ``extrapolate`` x the largest (what the plot shades)."""
        c = [v for v in compute if math.isfinite(v)]
        grid = np.geomspace(min(c), max(c) * cfg.extrapolate, 60)
        curves = np.array([power_law(f, grid) for f in fits])
        iv = [weighted_interval(curves[:, k], weights, cfg.level) for k in range(grid.size)]
        return {"flops": grid.tolist(), "lo": [v[0] for v in iv], "hi": [v[1] for v in iv]}

    def _crossing(self, cfg, arm, base, fit_a, fit_b, n_seeds) -> dict[str, Any]:
        """Where the arm's and the baseline's fitted curves cross, with its interval over paired resamples."""
        if "refused" in fit_a or "refused" in fit_b:
            return {"refused": fit_a.get("refused") or fit_b.get("refused"), "status": "none"}
        both = [c for c in [*arm[0], *base[0]] if math.isfinite(c)]  # the rungs where either has runs
        lo, top = min(both), max(both)
        hi = top * cfg.extrapolate
        at = crossing(fit_a, fit_b, lo, hi)
        res: dict[str, Any] = {"flops": at, "largest_rung_flops": top, "searched": [lo, hi],
                               "beyond_largest": None if at is None else at / top, "interval": None}
        if n_seeds > 1:
            pairs, weights = [], []
            for idx, w in seed_resamples(n_seeds, cfg.draws, cfg.seed):
                fa = fit_power_law(arm[0], seed_means(arm[1][list(idx)]))
                fb = fit_power_law(base[0], seed_means(base[1][list(idx)]))
                if "refused" not in fa and "refused" not in fb:
                    pairs.append((fa, fb))
                    weights.append(w)
            if pairs:
                res.update(crossing_interval(pairs, weights, lo, hi, cfg.level))
        res["status"] = crossing_status(at, res["interval"], lo, top, hi)
        if res["interval"] is not None:  # strict JSON: no crossing in range is null, not infinity
            res["interval"] = [None if math.isinf(v) else v for v in res["interval"]]
        return res

    def _decisions(self, cfg, per_metric, per_rung, arms, seeds, higher, baseline) -> dict[str, Any]:
        """The decision table: every metric at every rung against the primary metric's ranking at the largest
        rung, each pair's target first checked for stability (a noisy target is flagged, not scored)."""
        top = per_rung[-1]
        per_metric = {m: d for m, d in per_metric.items() if higher.get(m) is not None}  # the metrics that can rank
        if not per_metric:
            return {"primary": None, "target": top.name, "pairs": [], "metrics": {}}
        # default: the first headline metric on the language axis (val/pt before a synthetic task's val/dyck)
        primary = cfg.primary or next((m for m in per_metric if top.report.axes.get(m, "pt") == "pt"),
                                      next(iter(per_metric)))
        if primary not in per_metric:
            raise ConfigError("report.sections.ladder.primary",
                              f"{primary!r} is not a headline metric with a declared direction of this ladder; "
                              f"have {list(per_metric)}")
        sign = 1.0 if higher[primary] else -1.0
        targets, target = [], {}
        for a, b in itertools.combinations(arms, 2):
            diff = sign * (self._matrix([top], a, seeds, primary) - self._matrix([top], b, seeds, primary))[:, 0]
            v = seed_interval(diff, cfg.level)
            mean = v["mean"]
            winner = None if mean is None or mean == 0 else (a if mean > 0 else b)
            if cfg.rule == "seeds" and v["interval"] is not None:
                stable, rule = v["verdict"] != "no difference shown", "seeds"
            elif baseline in (a, b):  # one seed, or rule verify-ppt: its row, of pairs with the baseline only
                other = b if a == baseline else a
                g = next((g for g in top.report.stable_gain if g.arm == other and g.metric == primary), None)
                stable, rule = g is not None and (g.stable or g.stable_harm), "verify-ppt"
            else:
                stable, rule = False, "one seed"
            stable = stable and winner is not None  # a stable row with no final values at the top: nothing to predict
            target[(a, b)] = winner if stable else None
            targets.append({"pair": [a, b], "better": winner, "stable": stable, "rule": rule, **v})
        values = {m: {p["rung"]: {a: d["arms"][a]["points"][j]["mean"] for a in arms}
                      for j, p in enumerate(d["arms"][arms[0]]["points"])} for m, d in per_metric.items()}
        return {"primary": primary, "target": top.name, "pairs": targets,
                "metrics": decision_table(values, [r.name for r in per_rung], higher, target)}

    def _plot(self, ctx, cfg, m, out) -> str | None:
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
            # clipped at 0: the mean of equal seeds can round a hair past them, which matplotlib refuses
            err = np.maximum(np.array([[p["mean"] - p["min"], p["max"] - p["mean"]] for p in pts]).T, 0.0)
            line = ax.errorbar(xs, ys, yerr=err, marker="o", ms=4, capsize=3, linestyle="none",
                               label=f"{a} (seed mean, range)")
            color = line[0].get_color()
            for p in pts:
                ax.scatter([p["flops"]] * len(p["seeds"]), list(p["seeds"].values()), s=8, color=color, alpha=0.4)
            fit = d["fit"]
            if "refused" not in fit:
                inside = np.geomspace(low, top, 100)
                beyond = np.geomspace(top, top * cfg.extrapolate, 100)
                ax.plot(inside, power_law(fit, inside), color=color, linewidth=1,
                        label=f"{a}: E + A C^-α, α = {fit['alpha']:.3g}")
                ax.plot(beyond, power_law(fit, beyond), color=color, linewidth=1, linestyle=":")
                if "band" in fit:
                    ax.fill_between(fit["band"]["flops"], fit["band"]["lo"], fit["band"]["hi"], color=color,
                                    alpha=0.15, linewidth=0, label=f"{a}: {cfg.level:.0%} band over seed resamples")
        ax.axvline(top, color="grey", linewidth=0.6, linestyle="--")
        ax.set_xscale("log")
        ax.set_xlabel("training compute (FLOPs; right of the dashed line: extrapolated)")
        ax.set_ylabel(m)
        if out["chance"] is not None:
            ax.axhline(out["chance"], color="grey", linewidth=0.8, linestyle="--", label=f"chance ({out['chance']:g})")
        ax.set_title(f"{m} across the ladder ({_direction_text(out['direction'])})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        path = save_figure(fig, ctx.plots / _metric_file(m))
        ctx.figure(f"{m} vs training compute (ladder)", path)
        return path.relative_to(ctx.out).as_posix()

    # ------------------------------------------------------------------------- markdown

    def _lines(self, res: dict, rungs: list[str], arms: list[str], baseline: str) -> list[str]:
        n = len(rungs)
        pct = f"{res['level']:.0%}"
        size = SIZES[res["size"]]
        rule = ("seed level: the per-seed final gain (arm − baseline of the same seed, sign flipped for losses) "
                f"and its {pct} Student-t interval over the seed pairs (n stated), *gain* / *harm* when it "
                "excludes 0; one seed pair gives no seed-level verdict, and its cell shows the verify-ppt "
                "within-run rule (mean > SD of the per-checkpoint difference over the last window) instead"
                if res["rule"] == "seeds" else
                "the verify-ppt within-run rule (the rung's stable-gain row: mean > SD of the per-checkpoint "
                "difference over the last window, its n the checkpoints pooled over the seeds; not a seed-level "
                "verdict)")
        lines = ["## Scale ladder",
                 f"The same arms at {n} rung(s), from the smallest to the largest training compute: "
                 f"{', '.join(rungs)}. Each value is a finished run's final value (as in Results); compute is "
                 "the run's training FLOPs (every stage, whole steps; `train/flops.py`). Fits: "
                 "L(C) = E + A·C^-α per arm on the seed means; its intervals and band: the "
                 f"{resample_label(res['seeds'], res['level'])}, the same seeds at every rung and for every arm. "
                 "Per-rung verdicts: " + rule + ". A trend is "
                 f"the mean of each seed's slope of its gain against log10({size}), with the {pct} Student-t "
                 "interval over those slopes (the per-rung rule's); its words follow from that interval. "
                 "docs/ladder.md says how to read this and what it cannot "
                 "tell. The tables above (Results, differences, efficiency, other sections) are rung "
                 f"{res['tables_above']}'s."
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
            lines += [f"### {m} ({_direction_text(d['direction'])}"
                      + (f"; chance {d['chance']:.4g}" if d.get("chance") is not None else "") + ")", "",
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
                lines.append("- (no interval and no band: one seed)")
            if d["gains"]:
                lines += ["", f"Gain over {baseline} (positive = better) per rung, with that rung's verdict and the "
                          "rule it used; the seed pairs of each sign over every rung; the trend:", "",
                          "| arm | " + " | ".join(rungs) + f" | seed pairs | trend per decade of {size} |",
                          "|---|" + "---|" * (len(rungs) + 2)]
                for a, g in d["gains"].items():
                    cells = [self._gain_cell(g["rungs"].get(rung)) for rung in rungs]
                    p = g["pairs"]
                    signs = signs_text(p["positive"], p["negative"], p["n"])
                    lines.append(f"| {a} | " + " | ".join(cells) + f" | {signs} | {g['trend']['words']} |")
                lines.append("")
                for a, c in d["crossings"].items():
                    lines.append(f"- {a} vs {baseline}: " + self._crossing_text(
                        c, res["extrapolate"], n, resample_label(res["seeds"], res["level"])))
            lines.append("")
        lines += self._decision_lines(res["decisions"], rungs, pct)
        return lines

    @staticmethod
    def _gain_cell(x: dict | None) -> str:
        if x is None or x["mean"] is None:
            return "–"
        c = x["checkpoints"]
        within = "–" if c is None or c["mean"] is None else (
            f"{c['mean']:+.4g}" + (f" ± {c['sd']:.2g}" if c["sd"] is not None else "")
            + f" over {c['n']} checkpoint differences ({c.get('seeds', '?')} seeds): {c['verdict']} "
            "(verify-ppt within-run rule)")
        if x["rule"] == "seeds" and x["interval"] is not None:
            return (f"{interval_text(x)}, {signs_text(x['positive'], x['negative'], x['n'])}: {x['verdict']}")
        if x["rule"] == "seeds":
            return f"{x['mean']:+.4g}: {x['verdict']}; {within}"
        return within

    @staticmethod
    def _crossing_text(c: dict, extrapolate: float, n: int, label: str) -> str:
        if "refused" in c:
            return f"no crossing computed ({c['refused']})"
        share = "" if c.get("share_crossing") is None else f"; {c['share_crossing']:.0%} of the seed resamples cross"
        iv = ""
        if c["interval"] is not None:
            lo, hi = c["interval"]
            iv = (f", {label} [{_fmt(lo, 3) if lo is not None else 'no crossing'}, "
                  f"{_fmt(hi, 3) if hi is not None else f'no crossing within {extrapolate:g}x'}] FLOPs")
        if c["status"] == "none":
            return f"the fitted curves do not cross within {extrapolate:g}x of the largest rung{share}"
        if c["status"] == "undetermined":
            point = ("the point fits do not cross" if c["flops"] is None else
                     f"the point fits cross at {c['flops']:.3g} FLOPs ({c['beyond_largest']:.3g}x the largest rung)")
            why = "one seed: no interval, and a crossing past the largest rung needs one" if c["interval"] is None \
                else f"the interval reaches past the searched range ({extrapolate:g}x the largest rung)"
            return f"crossing undetermined: {point}{iv}{share}; {why}"
        where = f"{c['flops']:.3g} FLOPs{iv}" + ("" if c["interval"] is not None else " (one seed: no interval)")
        if c["beyond_largest"] > 1:
            return (f"the fitted curves cross at {where}, {c['beyond_largest']:.3g}x the largest rung's compute: "
                    + _GUESS.format(n=n, x=f"{c['beyond_largest']:.3g}x past its largest rung"))
        return f"the fitted curves cross at {where}, within the rungs measured"

    @staticmethod
    def _decision_lines(dec: dict, rungs: list[str], pct: str) -> list[str]:
        if len(rungs) < 2 or not dec["pairs"]:
            return []
        lines = [f"### Decisions: which rung and metric predicts the ranking by {dec['primary']} at {dec['target']}?",
                 "", f"The target of each pair of arms is the order {dec['primary']} gives it at the largest rung "
                 f"({dec['target']}); a target that is not itself stable (its {pct} seed-level interval holds 0, or "
                 "with one seed the verify-ppt within-run rule finds no stable difference) is a **noisy target**: "
                 "flagged, and scored by no metric.", ""]
        for p in dec["pairs"]:
            a, b = p["pair"]
            how = (f"{a} − {b} per seed, positive = {a} better: "
                   + (interval_text(p) if p["interval"] is not None else f"{p['mean']:+.4g}, rule: {p['rule']}")
                   ) if p["mean"] is not None else "no values"
            lines.append(f"- {a} vs {b}: " + (f"{p['better']} better ({how})" if p["stable"] else
                                               f"noisy target, not scored ({p['better'] or 'no order'} ahead; {how})"))
        scored = sum(p["stable"] for p in dec["pairs"])
        if len(dec["pairs"]) == 1:
            lines += ["", "Two arms: one pair. Each cell is that pair ranked right (1/1) or wrong (0/1), not an "
                      "accuracy."]
        if not scored:
            return lines + ["", "No stable target: no metric is scored.", ""]
        lines += ["", "Pairs each metric ranks as the target (agreeing / scored):", "",
                  "| metric | " + " | ".join(rungs) + " |", "|---|" + "---|" * len(rungs)]
        for m, by_rung in dec["metrics"].items():
            cells = ["target" if m == dec["primary"] and r == dec["target"] else
                     f"{by_rung[r]['agree']}/{by_rung[r]['scored']}" for r in rungs]
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        return lines + [""]


__all__ = ["LadderSection", "LadderSectionConfig", "rung_json", "rung_size", "trend_words"]
