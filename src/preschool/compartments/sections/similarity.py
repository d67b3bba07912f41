"""The ``similarity`` section: cosine between the trunk states of the same text in different compartments
(the final checkpoint; compartments/similarity.py; offset presentation, c >= 2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...analysis.from_results import stored_seed
from ...analysis.sections import SECTIONS, GatheredSection, SectionContext
from ...config import check
from ...layout import final_checkpoint
from ._common import _check_compare, _compare_lines, _pm, _summary, arm_compartments

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
        from ...data.shards import ShardSet
        from ...train.checkpoint import quiet_hf_progress
        from ..model import load_compartment_model
        from ..similarity import cross_compartment_similarity

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
