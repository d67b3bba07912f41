"""The plug-in's report sections (analysis/sections.py): plateau, slowdown, similarity, audit_gap.

Each is a :class:`~preschool.analysis.sections.GatheredSection`: ``gather`` reads the runs' files into
plain data, which ``results.json`` keeps as the section's ``inputs``, and ``render`` computes the rest
from it, so ``preschool report --from-results`` re-renders a compartments study without its run folders.
What is read: an arm's compartments come from the
``compartmented`` dataset its first stage trains on (its ``train/manifest.json``),
its curves from ``metrics.jsonl`` (``val/c<i>``, averaged over compartments:
the slowdown metric's loss), a fine-tune's source from the arm's
``callbacks.compartment_model.init_from``. With several training seeds every
number is computed per seed, then summarised as mean ± SD over seeds with the
seed-level verdict (the Student-t interval over the seeds, analysis/stats.py
``seed_interval``); ``report.compare`` pairs ``[arm, reference]``
are compared seed by seed (paired differences: both runs of a seed share its
initialisation and batch order, so part of the seed noise cancels).

- ``plateau``: final val loss per arm (mean over compartments, per compartment,
  translation rows' target half); plots ``loss_vs_step.png``, ``plateau_vs_c.png``.
- ``slowdown`` (``targets``, ``level``): steps of the arm / steps of the baseline at the same
  loss (compartments/slowdown.py; spec B.3); plot ``slowdown.png``. Of a ladder whose arms train
  several compartment counts, also per rung the growth of slowdown with c and whether that growth
  changes with size, with t intervals over the seeds (:func:`slowdown_across_ladder`; each rung's curves
  gathered from its runs, its size from the rung's record, ``ctx.ladder``).
- ``similarity`` (``rows``, ``layer``): cross-compartment cosine of the final
  checkpoint's trunk states (compartments/similarity.py; offset presentation, c >= 2).
- ``audit_gap`` (``reference``, ``arm``): per presentation, val loss of every arm
  minus the reference arm's at the steps both logged (spec B.6); plot ``audit_gap.png``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.collect import val_rows
from ..analysis.from_results import stored_seed
from ..analysis.plots import new_figure, save_figure
from ..analysis.sections import SECTIONS, GatheredSection, SectionContext
from ..analysis.stats import format_mean_sd, ols_slope, seed_interval, seed_summary, seed_trend, trend_text
from ..config import check
from ..io import read_json
from ..layout import MANIFEST, PLOTS, final_checkpoint, is_done
from .slowdown import Curve, plateau, read_val_curve, slowdown_at_targets, slowdown_curve

_COMPARTMENT_KEY = re.compile(r"^val/c\d+$")


# ----------------------------------------------------------------------------- what an arm is


def arm_compartments(ctx: SectionContext, arm: str) -> dict | None:
    """The compartments of the dataset the arm's first stage trains on: ``{n, V, mode, translation,
    dataset, source}``, or None when it trains on no compartmented dataset (or it is not built)."""
    a = ctx.arm_config(arm)
    data = a["stages"][0]["data"]
    for name in [data] if isinstance(data, str) else list(data):
        target = (a.get("datasets") or {}).get(name, name)
        spec = (ctx.config.get("data") or {}).get(target) or {}
        man = ctx.data_dir / target / "train" / MANIFEST
        if spec.get("kind") != "compartmented" or not man.is_file():
            continue
        info = read_json(man)["compartments"]
        pres = info["presentation"]
        return {"n": int(pres["n_compartments"]), "V": int(pres["base_vocab"]), "mode": pres["mode"],
                "translation": float(info["config"]["translation"]["fraction"]), "dataset": target,
                "source": spec["source"]}
    return None


def init_from(ctx: SectionContext, arm: str) -> str | None:
    """The arm whose final checkpoint this arm starts from (a fine-tune), if any."""
    cb = (ctx.arm_config(arm).get("callbacks") or {}).get("compartment_model") or {}
    return cb.get("init_from")


def val_curve(run: Path) -> Curve:
    """Val loss averaged over the run's compartments (``val/c<i>``) at every val event that has them all."""
    first = next((r for r in val_rows(run)), None) or {}
    keys = sorted((k for k in first if _COMPARTMENT_KEY.match(k)), key=lambda k: int(k[5:]))
    return read_val_curve(run, keys=keys or None)


def _curve_json(curve: Curve) -> dict:
    """A curve as JSON data (a gathered input)."""
    return {"steps": curve.steps.tolist(), "losses": curve.losses.tolist()}


def _curve(data: dict) -> Curve:
    return Curve(np.asarray(data["steps"], dtype=float), np.asarray(data["losses"], dtype=float))


def _last_val(run: Path, key: str) -> float | None:
    return next((row[key] for row in reversed(val_rows(run)) if key in row), None)


def _save_log_x(fig, ax, hline: float, xlabel: str, ylabel: str, path: Path) -> str:
    """Finish a curve plot on a log step axis with a grey reference line at ``hline``; returns the file name."""
    ax.axhline(hline, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    else:  # e.g. no arm came down to a loss the baseline reached: say so instead of an empty frame
        ax.text(0.5, 0.5, "no curve to plot (see the table)", ha="center", va="center", transform=ax.transAxes)
    return save_figure(fig, path).name


_WORDS = {"above": "above", "below": "below", "no difference shown": "no difference shown", "one seed": "one seed"}


def _summary(values: list[float], null: float | None = None, level: float = 0.95) -> dict | None:
    """Mean, SD, ``level`` t interval over seeds (None without values); with ``null`` the seed-level verdict
    against it (:func:`~preschool.analysis.stats.seed_interval`: *above* / *below* when the interval excludes
    ``null``)."""
    vals = [float(v) for v in values if v is not None and np.isfinite(v)]
    if not vals:
        return None
    s = seed_summary(vals, ci=level, method="t")
    if null is not None:
        s["verdict"] = _WORDS[seed_interval(vals, level, null)["verdict"]]
    return s


def _interval(s: dict | None) -> str:
    """A slowdown's seed mean with its t interval (``2.49x [2.10, 2.88] (n=3)``); the mean alone for one seed."""
    if s is None:
        return "–"
    if s["ci_lo"] is None:
        return f"{s['mean']:.2f}x (n={s['n']})"
    return f"{s['mean']:.2f}x [{s['ci_lo']:.2f}, {s['ci_hi']:.2f}] (n={s['n']})"


def _pm(s: dict | None, digits: int = 3, suffix: str = "") -> str:
    return format_mean_sd(s["mean"], s["sd"], s["n"], digits, suffix) if s else "–"


def _check_compare(ctx: SectionContext, value_of) -> list[dict]:
    """Paired differences ``value_of(arm, seed) - value_of(reference, seed)`` over the seeds both have."""
    out = []
    for a, b in ctx.compare:
        diffs = {s: x - y for s in ctx.seeds
                 if (x := value_of(a, s)) is not None and (y := value_of(b, s)) is not None}
        out.append({"arm": a, "reference": b, "seeds": sorted(diffs),
                    "diff": _summary(list(diffs.values()), 0.0)})
    return out


def _compare_lines(pairs: list[dict], what: str, digits: int = 3) -> list[str]:
    if not pairs:
        return []
    lines = ["", f"Paired by seed (arm − reference, {what}; mean ± SD over the seeds; verdict: the 95 % t interval "
             "over the seeds excludes 0, *above* / *below*):", "",
             "| arm − reference | seeds | Δ | 95 % t interval | verdict |", "|---|---|---|---|---|"]
    for p in pairs:
        d = p["diff"]
        iv = "–" if not d or d["ci_lo"] is None else f"[{d['ci_lo']:+.{digits}f}, {d['ci_hi']:+.{digits}f}]"
        lines.append(f"| {p['arm']} − {p['reference']} | {len(p['seeds'])} | {_pm(d, digits)} | {iv} | "
                     f"{d['verdict'] if d else 'no seed has both'} |")
    return lines


# ----------------------------------------------------------------------------- plateau


@dataclass
class PlateauConfig:
    """Final val loss per arm, averaged over compartments (no options)."""


@SECTIONS.register("plateau", config=PlateauConfig)
class PlateauSection(GatheredSection):
    """Final val loss per arm (mean over compartments), per compartment and on translation rows; plateau vs c."""

    def gather(self, ctx: SectionContext) -> dict:
        """Per arm that trains on compartments: its compartments and, per seed, the val curve (mean over
        compartments), each compartment's and the translation rows' last val loss, and whether it finished."""
        arms = {}
        for arm in ctx.arms:
            info, runs = arm_compartments(ctx, arm), ctx.runs(arm)
            if info is None or not runs:
                continue
            arms[arm] = {"compartments": info, "seeds": {
                s: {"curve": _curve_json(val_curve(run)),
                    "per_compartment": {f"c{i}": _last_val(run, f"val/c{i}") for i in range(info["n"])},
                    "translation": _last_val(run, "val/translation"), "done": is_done(run)}
                for s, run in runs.items()}}
        return {"arms": arms}

    def render(self, ctx: SectionContext, inputs: dict) -> tuple[dict, list[str]]:
        res: dict[str, Any] = {"arms": {}}
        curves: dict[str, Curve] = {}
        for arm, got in inputs["arms"].items():
            info, per_seed = got["compartments"], {}
            for key, run in got["seeds"].items():
                curve = _curve(run["curve"])
                if key == str(ctx.seeds[0]):
                    curves[arm] = curve
                per_seed[stored_seed(ctx.seeds, key)] = {"final": plateau({0: curve})[0], **run}
            res["arms"][arm] = {"n_compartments": info["n"], "translation_fraction": info["translation"],
                                "init_from": init_from(ctx, arm), "seeds": per_seed,
                                "final": _summary([v["final"] for v in per_seed.values()]),
                                "translation": _summary([v["translation"] for v in per_seed.values()])}
        res["compare"] = _check_compare(ctx, lambda a, s: ((res["arms"].get(a) or {}).get("seeds", {}).get(s) or {})
                                        .get("final"))
        plots = self._plots(ctx, res, curves)
        lines = ["## Final loss (plateau)", "",
                 "Val loss at the last validation, averaged over compartments (each compartment scores the same "
                 "source val rows in its own ids); translation: the target half of translation rows. "
                 f"Mean ± SD over seeds {ctx.seeds} where there are several.", "",
                 "| arm | c | tr | init | final loss | per compartment (first seed) | translation | done |",
                 "|---|---|---|---|---|---|---|---|"]
        for arm, e in res["arms"].items():
            first = next(iter(e["seeds"].values()))
            per = ", ".join(f"{v:.3f}" for v in first["per_compartment"].values() if v is not None)
            done = all(v["done"] for v in e["seeds"].values())
            lines.append(f"| {arm} | {e['n_compartments']} | {e['translation_fraction']:g} | {e['init_from'] or '–'} "
                         f"| {_pm(e['final'], 4)} | {per} | {_pm(e['translation'])} | {'yes' if done else 'NO'} |")
        lines += _compare_lines(res["compare"], "final loss")
        lines += ["", "Plots: " + ", ".join(f"[{p}]({PLOTS}/{p})" for p in plots), ""]
        return res, lines

    @staticmethod
    def _plots(ctx: SectionContext, res: dict, curves: dict[str, Curve]) -> list[str]:
        fig = new_figure()
        ax = fig.add_subplot(111)
        for arm, c in curves.items():
            ax.plot(np.maximum(c.steps, 0.5), c.losses, marker=".",
                    label=f"{arm} (c={res['arms'][arm]['n_compartments']})")
        ax.set_xscale("log")
        ax.set_xlabel("step (step 0 drawn at 0.5)")
        ax.set_ylabel(f"val loss, mean over compartments (seed {ctx.seeds[0]})")
        ax.legend(fontsize=8)
        files = [save_figure(fig, ctx.plots / "loss_vs_step.png").name]
        fig = new_figure()
        ax = fig.add_subplot(111)
        groups: dict[str, list] = {}
        for arm, e in res["arms"].items():
            if e["final"] is None:
                continue
            key = f"tr={e['translation_fraction']:g}" + (f" init={e['init_from']}" if e["init_from"] else "")
            groups.setdefault(key, []).append((e["n_compartments"], e["final"]["mean"], e["final"]["sd"] or 0.0))
        for key, pts in groups.items():
            pts.sort()
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                        label=key)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("compartments c")
        ax.set_ylabel("final val loss" + (f", mean ± SD over {len(ctx.seeds)} seeds" if len(ctx.seeds) > 1 else ""))
        ax.legend(fontsize=8)
        files.append(save_figure(fig, ctx.plots / "plateau_vs_c.png").name)
        return files


# ----------------------------------------------------------------------------- slowdown


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
    from ..analysis.ladder import rung_size

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


# ----------------------------------------------------------------------------- similarity


@dataclass
class SimilarityConfig:
    """Cross-compartment cosine of the final checkpoint: ``rows`` source val rows at block ``layer`` (0: middle)."""

    rows: int = 16
    layer: int = 0

    def validate(self) -> None:
        check(self.rows >= 1, "rows", f"must be >= 1, got {self.rows}")
        check(self.layer >= 0, "layer", f"must be >= 0 (0 = middle), got {self.layer}")


@SECTIONS.register("similarity", config=SimilarityConfig)
class SimilaritySection(GatheredSection):
    """Cosine between the trunk states of the same text in different compartments (final checkpoint)."""

    def gather(self, ctx: SectionContext) -> dict:
        """Per arm of c >= 2 offset compartments: each run's similarity of its final checkpoint (the only
        number here that needs the model)."""
        from ..data.shards import ShardSet
        from ..train.checkpoint import quiet_hf_progress
        from .model import load_compartment_model
        from .similarity import cross_compartment_similarity

        arms = {}
        for arm in ctx.arms:
            info = arm_compartments(ctx, arm)
            if info is None or info["n"] < 2 or info["mode"] != "offset":
                continue
            val = ShardSet(ctx.data_dir / info["source"] / "val", verify="size")
            rows = val.rows(range(min(self.cfg.rows, len(val))))[:, :-1]
            seeds = {}
            for s, run in ctx.runs(arm).items():
                try:
                    ckpt = final_checkpoint(run)
                except Exception:  # noqa: BLE001  (no checkpoint yet: nothing to measure)
                    continue
                with quiet_hf_progress():  # no "Loading weights" bar per arm in the report step
                    model = load_compartment_model(ckpt)
                seeds[s] = cross_compartment_similarity(model, rows, info["n"], info["V"], self.cfg.layer)
            if seeds:
                arms[arm] = {"n_compartments": info["n"], "seeds": seeds}
        return {"arms": arms}

    def render(self, ctx: SectionContext, inputs: dict) -> tuple[dict, list[str]]:
        res: dict[str, Any] = {"rows": self.cfg.rows, "arms": {}}
        for arm, got in inputs["arms"].items():
            seeds = {stored_seed(ctx.seeds, k): v for k, v in got["seeds"].items()}
            res["arms"][arm] = {"n_compartments": got["n_compartments"], "seeds": seeds,
                                "mean": _summary([v["mean"] for v in seeds.values()])}
        res["compare"] = _check_compare(ctx, lambda a, s: (((res["arms"].get(a) or {}).get("seeds") or {})
                                                           .get(s) or {}).get("mean"))
        lines = ["## Cross-compartment similarity", "",
                 f"Cosine between the states after block `layer` of the same {self.cfg.rows} source val rows shown "
                 "in different compartments (final checkpoint; off-diagonal mean over compartment pairs; spec B.4).",
                 "", "| arm | c | cosine | layer |", "|---|---|---|---|"]
        for arm, e in res["arms"].items():
            layer = next(iter(e["seeds"].values()))["layer"]
            lines.append(f"| {arm} | {e['n_compartments']} | {_pm(e['mean'])} | {layer} |")
        lines += _compare_lines(res["compare"], "cosine") + [""]
        return res, lines


# ----------------------------------------------------------------------------- audit gap


@dataclass
class AuditGapConfig:
    """Gap = val loss of each arm minus ``reference``'s, per presentation; ``arm``: the one summarised."""

    reference: str = "shared"
    arm: str = "compartmented"


@SECTIONS.register("audit_gap", config=AuditGapConfig)
class AuditGapSection(GatheredSection):
    """How compartmentalized learning on several presentations is: compartmented - shared val loss (spec B.6)."""

    def _check(self, ctx: SectionContext) -> None:
        from ..errors import ConfigError

        for f, a in (("reference", self.cfg.reference), ("arm", self.cfg.arm)):
            if a not in ctx.arms:
                raise ConfigError(f"report.sections.audit_gap.{f}", f"no arm named {a!r}; have {ctx.arms}")

    def gather(self, ctx: SectionContext) -> dict:
        """The reference's presentations (its ``val/<p>`` keys) and, per other arm and seed, its gap to the
        reference's run of that seed on each presentation at the steps both logged."""
        self._check(ctx)
        ref_runs = ctx.runs(self.cfg.reference)
        pres = sorted({k[4:] for r in ref_runs.values() for row in val_rows(r)
                       for k in row if k.startswith("val/")})
        return {"presentations": pres,
                "arms": {arm: {s: _gaps(ref_runs[s], run, pres) for s, run in ctx.runs(arm).items() if s in ref_runs}
                         for arm in ctx.arms if arm != self.cfg.reference}}

    def render(self, ctx: SectionContext, inputs: dict) -> tuple[dict, list[str]]:
        self._check(ctx)
        ref, main, pres = self.cfg.reference, self.cfg.arm, inputs["presentations"]
        res: dict[str, Any] = {"reference": ref, "arm": main, "presentations": pres, "arms": {}}
        for arm, got in inputs["arms"].items():
            seeds = {stored_seed(ctx.seeds, k): g for k, g in got.items()}
            summary = {}
            for p in pres:
                have = [g[p] for g in seeds.values() if p in g]
                if not have:  # a single-presentation arm logs only its own
                    continue
                summary[p] = {"final_gap": _summary([g["gap"][-1] for g in have], 0.0),
                              "mean_gap_second_half": _summary([float(np.mean(g["gap"][len(g["gap"]) // 2:]))
                                                                for g in have], 0.0)}
            res["arms"][arm] = {"seeds": seeds, "summary": summary}
        plot = self._plot(ctx, res)
        lines = ["## Audit: gap to the shared-vocabulary arm", "",
                 f"Gap = val loss of an arm − val loss of `{ref}` on each presentation at the same step "
                 f"(per seed, then mean ± SD over seeds). For `{main}`: near 0, the data is learned as if "
                 "compartmentalized (shared ids buy nothing); positive, sharing helps.", "",
                 "| arm | presentation | final gap | mean gap, 2nd half |", "|---|---|---|---|"]
        for arm, e in res["arms"].items():
            for p, v in e["summary"].items():
                lines.append(f"| {arm} | {p} | {_pm(v['final_gap'], 4)} | {_pm(v['mean_gap_second_half'], 4)} |")
        lines += ["", f"Plot: [{plot}]({PLOTS}/{plot})", ""]
        return res, lines

    def _plot(self, ctx: SectionContext, res: dict) -> str:
        fig = new_figure()
        ax = fig.add_subplot(111)
        first = ctx.seeds[0]
        for arm, e in res["arms"].items():
            for p, g in (e["seeds"].get(first) or {}).items():
                if arm == self.cfg.arm or arm.endswith(p):
                    ax.plot(np.maximum(g["steps"], 0.5), g["gap"], marker="." if arm == self.cfg.arm else None,
                            ls="-" if arm == self.cfg.arm else "--", label=f"{p}: {arm} − {self.cfg.reference}")
        return _save_log_x(fig, ax, 0.0, f"step (seed {first})", "val loss gap (nats)", ctx.plots / "audit_gap.png")


def _gaps(ref_run: Path, run: Path, presentations: list[str]) -> dict[str, dict]:
    """{presentation: {"steps", "gap"}}: the run's val loss minus the reference's at the steps both logged."""
    ref = {r["step"]: r for r in val_rows(ref_run)}
    rows = [r for r in val_rows(run) if r["step"] in ref]
    out = {}
    for p in presentations:
        k = f"val/{p}"
        pts = [(r["step"], r[k] - ref[r["step"]][k]) for r in rows if k in r and k in ref[r["step"]]]
        if pts:
            out[p] = {"steps": [s for s, _ in pts], "gap": [g for _, g in pts]}
    return out
