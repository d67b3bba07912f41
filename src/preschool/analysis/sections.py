"""Report sections: analyses an experiment asks for by name, rendered by the one report.

``report.sections: {slowdown: {targets: [4.0]}, similarity: {}}`` adds those
sections to ``report.md`` (after the standard tables) and their numbers to
``results.json`` under ``sections.<name>``. A section is a :class:`Section`
subclass registered in :data:`SECTIONS` with its config dataclass, like an
evaluator, in its own file in ``analysis/`` (the registry imports every module
of ``analysis/`` on first use) or in a plug-in's ``sections`` module
(``compartments/sections.py``: slowdown, plateau, similarity, audit_gap). A section reads result files only (each run's
``metrics.jsonl``, ``config.yaml``, checkpoints, the prepared data), through
:class:`SectionContext`, so ``preschool report`` rebuilds it at any time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..layout import arm_runs, data_dir, metrics_path
from ..registry import Registry

SECTIONS = Registry("report section", packages=("preschool.analysis",), plugin_module="sections")


@dataclass
class SectionContext:
    """The experiment as a section sees it (plain data and paths; no runner objects)."""

    out: Path  # experiment folder
    config: dict[str, Any]  # the experiment config as plain data (what experiment.yaml holds)
    arms: list[str]
    seeds: list[int]
    baseline: str
    compare: list[list[str]] = field(default_factory=list)  # [arm, reference] pairs compared seed by seed

    @property
    def plots(self) -> Path:
        return self.out / "plots"

    @property
    def data_dir(self) -> Path:
        return data_dir(self.out)

    def runs(self, arm: str) -> dict[int, Path]:
        """``{seed: run folder}`` of the arm's runs that have logged anything, seeds in order."""
        return {s: d for a, s, d in arm_runs(self.out, [_Named(arm)], self.seeds) if metrics_path(d).is_file()}

    def arm_config(self, arm: str) -> dict[str, Any]:
        return next(a for a in self.config["arms"] if a["name"] == arm)


@dataclass
class _Named:
    name: str


class Section:
    """One analysis: ``write(ctx)`` returns ``(results, markdown lines)`` and saves its plots under ``ctx.plots``."""

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def write(self, ctx: SectionContext) -> tuple[dict, list[str]]:
        raise NotImplementedError


def build_section(name: str, params: dict | None, field_prefix: str = "report.sections") -> Section:
    """The configured section ``name`` (unknown names and bad params name the field)."""
    return SECTIONS.build(name, params or {}, f"{field_prefix}.{name}")
