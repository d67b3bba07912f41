"""The ``plateau`` section: final val loss per arm, averaged over compartments, per compartment and on
translation rows; plots ``loss_vs_step.png`` and ``plateau_vs_c.png``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...analysis.from_results import stored_seed
from ...analysis.plots import new_figure, save_figure
from ...analysis.sections import SECTIONS, GatheredSection, SectionContext
from ...layout import PLOTS, is_done
from ..slowdown import Curve, plateau
from ._common import (_check_compare, _compare_lines, _curve, _curve_json, _last_val, _pm, _summary, arm_compartments,
                      init_from, val_curve)

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
