"""What the compartments sections share: an arm's compartments and fine-tune source, its val curves as gathered
inputs, and the seed summaries, paired comparisons and plot finishing each section's table and figure use."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ...analysis.collect import val_rows
from ...analysis.plots import save_figure
from ...analysis.sections import SectionContext
from ...analysis.stats import format_mean_sd, seed_interval, seed_summary
from ...io import read_json
from ...layout import MANIFEST
from ..slowdown import Curve, read_val_curve

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
