"""The ``slowdown`` section: steps of each arm / steps of the baseline at the same loss (compartments/slowdown.py;
spec B.3), and of a ladder its growth with c at every rung and that growth's change with size."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...analysis.from_results import stored_seed
from ...analysis.plots import new_figure
from ...analysis.sections import SECTIONS, GatheredSection, SectionContext
from ...analysis.stats import ols_slope, seed_trend, trend_text
from ...config import check
from ...layout import PLOTS
from ..slowdown import slowdown_at_targets, slowdown_curve
from ._common import (_check_compare, _compare_lines, _curve, _curve_json, _interval, _pm, _save_log_x, _summary,
                      arm_compartments, init_from, val_curve)

@dataclass
class SlowdownConfig:
    """Slowdown against the report's baseline arm; ``targets``: losses at which it is tabulated; ``level``: the
    interval of the slopes across a ladder (its growth with c, and that growth's change with size)."""

    targets: list[float] = field(default_factory=list)
    level: float = 0.95

    def validate(self) -> None:
        check(all(isinstance(t, (int, float)) and t > 0 for t in self.targets), "targets",
              f"must be positive losses, got {self.targets}")
        check(0 < self.level < 1, "level", f"must be in (0, 1), got {self.level}")


@SECTIONS.register("slowdown", config=SlowdownConfig)
class SlowdownSection(GatheredSection):
    """Steps each arm needs / steps the baseline needs to reach the same loss (Howe & Wingate; spec B.3)."""

    def gather(self, ctx: SectionContext) -> dict:
        """Each arm's compartments (None: it trains on none) and each run's val curve (mean over compartments):
        of the rung the report reads and, of a ladder, of every rung."""
        compartments = {arm: arm_compartments(ctx, arm) for arm in ctx.arms}
        # the arms a slowdown is computed for, and the baseline they are measured against
        measured = [a for a in ctx.arms if compartments[a] is not None]
        read = measured + ([ctx.baseline] if measured and ctx.baseline not in measured else [])

        def curves(runs_of) -> dict:
            return {arm: {s: _curve_json(val_curve(Path(run))) for s, run in runs_of(arm).items()} for arm in read}

        out = {"compartments": compartments, "curves": curves(ctx.runs)}
        if len(ctx.ladder) >= 2:
            out["rungs"] = {rung.name: curves(lambda arm, r=rung: r.arms[arm].runs if arm in r.arms else {})
                            for rung in ctx.ladder}
        return out

    def render(self, ctx: SectionContext, inputs: dict) -> tuple[dict, list[str]]:
        targets = [float(t) for t in self.cfg.targets]
        runs = {arm: {stored_seed(ctx.seeds, k): _curve(c) for k, c in got.items()}
                for arm, got in inputs["curves"].items()}
        base = runs.get(ctx.baseline) or {}
        res: dict[str, Any] = {"baseline": ctx.baseline, "targets": targets, "arms": {}}
        for arm in ctx.arms:
            if inputs["compartments"].get(arm) is None:
                continue
            src = init_from(ctx, arm)
            if src is not None:  # a fine-tune's steps do not start from scratch: no slowdown against a fresh run
                res["arms"][arm] = {"fine_tune_of": src}
                continue
            seeds = {}
            for s, run in runs.get(arm, {}).items():
                if s not in base:
                    continue
                curve = slowdown_curve(base[s], run)
                seeds[s] = {"curve": curve, "at": slowdown_at_targets(base[s], run, targets),
                            "median": float(np.median([r["slowdown"] for r in curve])) if curve else None}
            at = {}
            for t in targets:
                got = [v["at"][str(t)]["slowdown"] for v in seeds.values() if v["at"][str(t)]]
                at[str(t)] = {**(_summary(got, 1.0) or {"verdict": "not reached"}), "reached": len(got),
                              "of": len(seeds)}
            res["arms"][arm] = {"fine_tune_of": None, "seeds": seeds, "at": at,
                                "median": _summary([v["median"] for v in seeds.values()])}

        def value(t: float):
            def f(a, s):
                v = ((res["arms"].get(a) or {}).get("seeds") or {}).get(s)
                return v["at"][str(t)]["slowdown"] if v and v["at"][str(t)] else None
            return f

        res["compare"] = {str(t): _check_compare(ctx, value(t)) for t in targets}
        ladder = slowdown_across_ladder(ctx, inputs, targets, self.cfg.level)
        if ladder is not None:
            res["ladder"] = ladder
        plot = self._plot(ctx, res)
        lines = [f"## Slowdown vs `{ctx.baseline}`", "",
                 "Slowdown = steps of the arm / steps of the baseline at the same val loss (mean over compartments; "
                 "linear interpolation between validations, overlap of loss ranges only; spec B.3), per training "
                 "seed against the baseline's run of that seed; at each target loss the seed mean with its 95 % "
                 "Student-t interval over the seeds and the seed-level verdict against 1x: *above* (slower than "
                 "the baseline) or *below* (faster) when the interval excludes 1x; the median over the overlap as "
                 "mean ± SD over seeds.", ""]
        if targets:
            lines += ["| arm | " + " | ".join(f"loss {t:g}" for t in targets) + " | median over the overlap |",
                      "|---|" + "---|" * (len(targets) + 1)]
        else:
            lines += ["| arm | median over the overlap |", "|---|---|"]
        for arm, e in res["arms"].items():
            if e["fine_tune_of"]:
                lines.append(f"| {arm} | " + "– | " * len(targets) + f"fine-tune of {e['fine_tune_of']}: "
                             "not comparable |")
                continue
            cells = []
            for t in targets:
                v = e["at"][str(t)]
                cells.append("not reached" if not v["reached"] else
                             _interval(v) + (f", {v['verdict']}" if v["n"] > 1 else "")
                             + (f" ({v['reached']}/{v['of']} seeds)" if v["reached"] < v["of"] else ""))
            lines.append(f"| {arm} | " + " | ".join(cells + [_pm(e["median"], 2, "x")]) + " |")
        for t, pairs in res["compare"].items():
            lines += _compare_lines(pairs, f"slowdown at loss {float(t):g}", 2)
        lines += ["", f"Plot: [{plot}]({PLOTS}/{plot})", ""]
        if ladder is not None:
            lines += _ladder_lines(ladder, ctx.baseline, self.cfg.level)
        return res, lines

    @staticmethod
    def _plot(ctx: SectionContext, res: dict) -> str:
        fig = new_figure()
        ax = fig.add_subplot(111)
        first = ctx.seeds[0]
        for arm, e in res["arms"].items():
            curve = (e.get("seeds") or {}).get(first, {}).get("curve")
            if arm == ctx.baseline or not curve:
                continue
            ax.plot([r["base_step"] for r in curve], [r["slowdown"] for r in curve], marker=".", label=arm)
        return _save_log_x(fig, ax, 1.0, f"baseline ({ctx.baseline}) step at the same loss (seed {first})",
                           "slowdown (steps / baseline steps)", ctx.plots / "slowdown.png")


def _key_label(key: str) -> str:
    return "median over the overlap" if key == "median" else f"loss {float(key):g}"


def slowdown_across_ladder(ctx: SectionContext, inputs: dict, targets: list[float], level: float) -> dict | None:
    """Does slowdown grow with c at every rung, and does that growth change with size? None unless the
    experiment is a ladder of two or more rungs whose arms (fresh runs, the baseline among them) train
    at least two compartment counts. ``inputs``: what :meth:`SlowdownSection.gather` read (each arm's
    compartments, each rung's val curves).

    Per rung, each seed's slowdown of every arm against the baseline's run of that seed (the baseline:
    1 by definition) at each target loss and as the median over the overlap; per seed, its slope against
    log2(c) (per doubling of c; a seed with an arm that never reaches the loss is left out, as its slope
    would lack that arm); over the seeds, the mean of those slopes with its t interval
    (analysis/stats.py ``seed_trend``). Across the rungs: the slope of each seed's growth against
    log10(the rung's non-embedding parameters, from its record in ``ctx.ladder``), with its interval. Rungs
    in ladder order; a rung without a finished run has no size and stays out of the change with size."""
    from ...analysis.ladder import rung_size

    counts = {arm: info["n"] for arm, info in inputs["compartments"].items()
              if info is not None and init_from(ctx, arm) is None}
    if len(ctx.ladder) < 2 or "rungs" not in inputs or ctx.baseline not in counts or len(set(counts.values())) < 2:
        return None
    arms = sorted(counts, key=lambda a: (counts[a], a))
    keys = [str(t) for t in targets] + ["median"]
    x = [math.log2(counts[a]) for a in arms]
    seeds = list(ctx.seeds)
    rungs, growth = [], {k: np.full((len(seeds), len(ctx.ladder)), np.nan) for k in keys}
    for j, rung in enumerate(ctx.ladder):
        stored = inputs["rungs"].get(rung.name) or {}
        curves = {arm: {stored_seed(ctx.seeds, k): _curve(c) for k, c in got.items()} for arm, got in stored.items()}
        base = curves.get(ctx.baseline) or {}
        per = {k: np.full((len(seeds), len(arms)), np.nan) for k in keys}
        for i, s in enumerate(seeds):
            if s not in base:
                continue
            for a_i, arm in enumerate(arms):
                if arm == ctx.baseline:
                    for k in keys:
                        per[k][i, a_i] = 1.0
                    continue
                curve = (curves.get(arm) or {}).get(s)
                if curve is None:
                    continue
                at = slowdown_at_targets(base[s], curve, targets)
                for t in targets:
                    per[str(t)][i, a_i] = at[str(t)]["slowdown"] if at[str(t)] else np.nan
                ratios = [r["slowdown"] for r in slowdown_curve(base[s], curve)]
                per["median"][i, a_i] = float(np.median(ratios)) if ratios else np.nan
        out = {"rung": rung.name, "size": rung_size(rung, ctx.baseline, "non_embedding"), "slowdown": {},
               "growth": {}}
        for k in keys:
            out["slowdown"][k] = {arm: {"seeds": {str(s): float(per[k][i, a_i]) for i, s in enumerate(seeds)
                                                  if math.isfinite(per[k][i, a_i])},
                                        "summary": _summary(list(per[k][:, a_i]), level=level)}
                                  for a_i, arm in enumerate(arms)}
            # a seed whose run of some arm never reaches the loss is left out of the growth: without its
            # slowest arm (the largest c, typically) its slope would be biased low
            complete = per[k].copy()
            complete[~np.isfinite(per[k]).all(axis=1)] = np.nan
            out["growth"][k] = seed_trend(x, complete, level)
            for i in range(len(seeds)):
                g = ols_slope(x, complete[i])
                growth[k][i, j] = np.nan if g is None else g
        rungs.append(out)
    sizes = [math.log10(r["size"]) if r["size"] else math.nan for r in rungs]
    return {"compartments": {a: counts[a] for a in arms}, "keys": keys, "level": level, "rungs": rungs,
            "with_size": {k: seed_trend(sizes, growth[k], level) for k in keys}}


def _ladder_lines(lad: dict, baseline: str, level: float) -> list[str]:
    keys, arms = lad["keys"], list(lad["compartments"])
    pct = f"{level:.0%}"
    counts = ", ".join(f"{a}: c = {c}" for a, c in lad["compartments"].items())
    lines = ["### Slowdown across the ladder", "",
             f"Each rung's runs, each seed against `{baseline}`'s run of that seed (c = "
             f"{lad['compartments'][baseline]}: 1x by definition); slowdown: seed mean with its {pct} t interval. "
             "Growth with c: the slope of each seed's slowdown "
             f"against log2(c) (per doubling of c; {counts}), the mean of the seeds' slopes with its {pct} "
             "Student-t interval over them (a seed whose run of some arm never reaches the loss is left out); change "
             "with size: the slope of each seed's growth against log10(the rung's non-embedding parameters), the "
             "mean with its t interval over the seeds. The words follow from the intervals.", "",
             "| rung | arm | " + " | ".join(_key_label(k) for k in keys) + " |", "|---|---|" + "---|" * len(keys)]
    for r in lad["rungs"]:
        for arm in arms:
            if arm == baseline:
                continue
            lines.append(f"| {r['rung']} | {arm} | "
                         + " | ".join(_interval(r["slowdown"][k][arm]["summary"]) for k in keys) + " |")
    lines += ["", "| rung | " + " | ".join(f"growth with c, {_key_label(k)}" for k in keys) + " |",
              "|---|" + "---|" * len(keys)]
    for r in lad["rungs"]:
        lines.append(f"| {r['rung']} | " + " | ".join(
            "– (no seed with every arm reaching it)" if not r["growth"][k]["seeds"] else
            trend_text(r["growth"][k], "doubling of c", "grows with c", "shrinks with c", "no growth with c shown",
                       "compartment counts")
            for k in keys) + " |")
    lines.append("| change with size (per decade of non-embedding parameters) | " + " | ".join(
        trend_text(lad["with_size"][k], "decade", "the growth with c increases with size",
                   "the growth with c decreases with size", "no change with size shown", "rungs") for k in keys) + " |")
    return lines + [""]
