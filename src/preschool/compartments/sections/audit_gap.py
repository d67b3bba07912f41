"""The ``audit_gap`` section: per presentation, the val loss of every arm minus the reference arm's at the
steps both logged (spec B.6); plot ``audit_gap.png``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...analysis.collect import val_rows
from ...analysis.from_results import stored_seed
from ...analysis.plots import new_figure
from ...analysis.sections import SECTIONS, GatheredSection, SectionContext
from ...layout import PLOTS
from ._common import _pm, _save_log_x, _summary

@dataclass
class AuditGapConfig:
    """Gap = val loss of each arm minus ``reference``'s, per presentation; ``arm``: the one summarised."""

    reference: str = "shared"
    arm: str = "compartmented"


@SECTIONS.register("audit_gap", config=AuditGapConfig)
class AuditGapSection(GatheredSection):
    """How compartmentalized learning on several presentations is: compartmented - shared val loss (spec B.6)."""

    def _check(self, ctx: SectionContext) -> None:
        from ...errors import ConfigError

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
