"""How many seeds would settle each comparison of a report (``preschool plan --seeds RESULTS.json``).

From a pilot's per-seed effects (each seed pair's effect, as the report's verdicts read them: the difference
table's window means, a ladder rung's final values) this gives, per comparison: the seeds it has, its mean
effect, the seed SD, the half-width of its 95 % t interval now and with 3, 5 and 10 seeds, the seeds for that
interval to exclude 0 with probability ``power`` if the effect is as the pilot found it
(:func:`~preschool.analysis.stats.seeds_needed`), and the seeds for two one-sided tests to show equivalence
within the comparison's margin with that probability if the true effect is 0
(:func:`~preschool.analysis.stats.seeds_for_equivalence`). A pilot of one seed has no SD to plan from, and a
comparison not testable at this scale is not made testable by more seeds of the same runs: both say so.

The SD a pilot gives is itself uncertain: predicted from two seeds, the half-width with a third falls anywhere
within about 0.7x to 4.5x of the prediction, four times out of five
(:func:`~preschool.analysis.stats.width_ratio_range`; tests/analysis/test_seed_plan.py checks that range on the
committed studies). Read the seed counts as an order of magnitude.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .records import Report, Rung
from .stats import half_width, seed_interval, seeds_for_equivalence, seeds_needed, t_interval

SEEDS_AT = (3, 5, 10)  # the half-widths printed for these seed counts


def plan_effects(values: list[float], margin: float | None, level: float = 0.95, power: float = 0.8) -> dict:
    """One comparison's plan from its per-seed effects: ``{n, effect, sd, half, half_at, needed,
    equivalence_needed, margin}`` (the SD-based fields None below two seeds)."""
    t = t_interval(values, level)
    out: dict[str, Any] = {"n": t["n"], "effect": t["mean"], "sd": t["sd"], "half": t["half"], "margin": margin,
                           "half_at": {}, "needed": None, "equivalence_needed": None}
    if t["sd"] is None:
        return out
    out["half_at"] = {k: half_width(t["sd"], k, level) for k in SEEDS_AT}
    out["needed"] = seeds_needed(t["sd"], t["mean"], level, power)
    if margin:
        out["equivalence_needed"] = seeds_for_equivalence(t["sd"], margin, level, power)
    return out


def comparisons(rep: Report, rungs: list[Rung] | None = None) -> list[dict]:
    """Every comparison a report judges on per-seed effects, with those effects: the difference table's rows
    (``group: difference``: arm vs baseline per metric, each seed pair's mean over the window) and, of a ladder,
    each rung's (``group: ladder``: each seed pair's final values, sign flipped for losses, as the ladder section
    reads them). Each: ``{group, arm, metric, rung, values, verdict, testable, margin_of}`` (``margin_of``: the
    baseline's final seed mean a relative margin is a share of; None when the row carries its margin)."""
    from .compute import NOT_JUDGED, NOT_TESTABLE, SEED_VERDICTS

    out = []
    for g in rep.stable_gain:
        if g.seed_verdict in (NOT_JUDGED, "not compared") or not g.per_seed:
            continue
        out.append({"group": "difference", "arm": g.arm, "metric": g.metric, "rung": None,
                    "values": list(g.per_seed.values()), "verdict": g.seed_verdict,
                    "testable": g.seed_verdict != NOT_TESTABLE, "margin": (g.equivalence or {}).get("margin"),
                    "margin_of": None})
    for r in rungs or []:
        base = r.arms.get(rep.baseline)
        if base is None:
            continue
        for arm, d in r.arms.items():
            if arm == rep.baseline:
                continue
            for m in r.report.headline:
                higher = r.report.higher.get(m)
                if higher is None:
                    continue
                sign = 1.0 if higher else -1.0
                pairs = [sign * (d.finals[s][m] - base.finals[s][m]) for s in d.finals
                         if s in base.finals and m in d.finals[s] and m in base.finals[s]]
                if pairs:
                    out.append({"group": "ladder", "arm": arm, "metric": m, "rung": r.name, "values": pairs,
                                "verdict": SEED_VERDICTS[seed_interval(pairs).get("verdict")], "testable": True,
                                "margin": None,
                                "margin_of": float(np.mean([v[m] for v in base.finals.values() if m in v]))})
    return out


def seed_plan(rep: Report, rungs: list[Rung] | None = None, equivalence=None, level: float = 0.95,
              power: float = 0.8, rung: str | None = None) -> dict[str, list[dict]]:
    """Every comparison's plan (:func:`plan_effects` of :func:`comparisons`), in two groups: ``difference`` (the
    difference table's rows, of rung ``rung`` for a ladder) and ``ladder`` (per rung; ``equivalence``: the
    report's :class:`~preschool.analysis.margins.EquivalenceSpec`, for the rungs' margins)."""
    plan: dict[str, list[dict]] = {"difference": [], "ladder": []}
    for c in comparisons(rep, rungs):
        margin = c["margin"]
        if c["margin_of"] is not None and equivalence is not None:
            margin = equivalence.margin(c["metric"], c["margin_of"])[0]
        plan[c["group"]].append({"arm": c["arm"], "metric": c["metric"], "rung": c["rung"] or rung,
                                 "verdict": c["verdict"], "testable": c["testable"],
                                 **plan_effects(c["values"], margin, level, power)})
    return plan


def _count(n: int | None, row: dict) -> str:
    if row["sd"] is None:
        return "–"
    if n is None:
        return "never (effect 0)" if row["effect"] == 0 else "> 100,000"
    return f"{n:,}"


def _num(x: float | None, sign: str = "+") -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:{sign}.4g}"


def seed_plan_lines(name: str, plan: dict[str, list[dict]], level: float = 0.95, power: float = 0.8) -> list[str]:
    """The plan as the command prints it: one table per group, one row per comparison."""
    pct, pw = f"{level:.0%}", f"{power:.0%}"
    lines = [f"How many seeds: {name}",
             f"Per comparison: the seed pairs it has, its mean effect (positive = the arm better) and the seeds' SD; "
             f"the half-width of its {pct} Student-t interval now and with {', '.join(map(str, SEEDS_AT))} seeds; "
             f"the seeds for that interval to exclude 0 with {pw} probability if the effect is as found; the seeds "
             f"to show equivalence within ±margin with {pw} probability if the true effect is 0 (two one-sided "
             "tests). The SD of a few seeds is itself noisy: read these as orders of magnitude (docs/statistics.md)."]
    head = ("| rung | arm | metric | verdict now | seeds | effect | seed SD | half-width now | "
            + " | ".join(f"with {k}" for k in SEEDS_AT)
            + " | seeds to exclude 0 | margin | seeds for equivalence |")
    rule = "|" + "---|" * (11 + len(SEEDS_AT))
    titles = {"difference": "Difference table (each seed pair's mean difference over the report's window)",
              "ladder": "Scale ladder (each seed pair's final values, per rung)"}
    for key, rows in plan.items():
        if not rows:
            continue
        lines += ["", titles[key], "", head, rule]
        for r in rows:
            margin = "–" if r["margin"] is None else f"±{r['margin']:.3g}"
            if r["sd"] is None:
                tail = ["–"] * (1 + len(SEEDS_AT)) + ["one seed: no SD to plan from", margin, "–"]
            else:
                needed = _count(r["needed"], r)
                if not r["testable"]:  # the verdict first needs an arm beyond chance; the counts are for after that
                    needed += " (once testable)"
                tail = ([_num(r["half"], "")] + [_num(r["half_at"][k], "") for k in SEEDS_AT]
                        + [needed, margin, "–" if r["margin"] is None else _count(r["equivalence_needed"], r)])
            sd = "–" if r["sd"] is None else f"{r['sd']:.4g}"
            lines.append(f"| {r['rung'] or '–'} | {r['arm']} | {r['metric']} | {r['verdict']} | {r['n']} | "
                         f"{_num(r['effect'])} | {sd} | " + " | ".join(tail) + " |")
    if not any(plan.values()):
        lines += ["", "No comparison with a declared direction and a seed pair to plan from."]
    return lines
