"""Report sections: every part of ``report.md``, one registered :class:`Section` each.

The report is collect → compute → sections → render (analysis/report.py): it collects every run's
logged and evaluated numbers (analysis/collect.py), computes the standard numbers (analysis/compute.py:
curves, final values, later stages, stable gain, token efficiency) into a frozen
:class:`~preschool.analysis.records.Report`, runs the sections, then renders ``report.md``,
``results.json`` and the plots (analysis/render.py). A section is a :class:`Section` subclass
registered in :data:`SECTIONS` with its config dataclass, like an evaluator, in its own file in
``analysis/`` (the registry imports every module of ``analysis/`` on first use) or in an extension package's
``sections`` module or package (``compartments/sections/``: slowdown, plateau, similarity, audit_gap).

The standard tables are sections too (analysis/standard_tables.py: overview, non-finite values, arms,
doses, axes, results, final stage, after later stages, difference, token efficiency); their negative
``order`` puts them first, and they add no results of their own (their numbers are the report's,
``results.json`` ``arms``, ``table``, ...). Then a section runs when

- its evaluator ran: ``evaluator = "verbatim"`` switches it on whenever some run
  has results of that evaluator (any label; :meth:`Section.applies` may use another
  test, say a metric pattern); it runs with its config's defaults unless
  ``report.sections`` gives params. These sections come first, by ``order`` then name;
- or the experiment asks for it: ``report.sections: {slowdown: {targets: [4.0]}}``,
  after them in the order given.

Its markdown follows the sections before it; its numbers go to ``results.json`` under
``sections.<name>`` (``results_key`` names a top-level key instead; ``None``
results add nothing); figures it lists with :meth:`SectionContext.figure` join the
report's "Plots". A section reads result files only, through
:class:`SectionContext` (the computed :class:`~preschool.analysis.records.Report`, each run's
files, the prepared data; of a ladder, every rung's computed :class:`~preschool.analysis.records.Rung`), so
``preschool report`` rebuilds it at any time. A section builds no report itself: what it reads the pipeline
computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..layout import arm_runs, data_dir, metrics_path, plots_dir
from ..registry import Registry
from .records import Report, Rung, SeedResult

SECTIONS = Registry("report section", packages=("preschool.analysis",), plugin_module="sections")


@dataclass
class SectionContext:
    """The experiment as a section sees it: plain data, paths and the computed :class:`Report` (frozen
    records; no runner objects). A section reads it and never changes it."""

    out: Path  # experiment folder
    config: dict[str, Any]  # the experiment config as plain data (what experiment.yaml holds)
    arms: list[str]
    seeds: list[int]
    baseline: str
    compare: list[list[str]] = field(default_factory=list)  # [arm, reference] pairs compared seed by seed
    # what the report computed (None before compute: the standard sections then add nothing)
    report: Report | None = None
    # label -> evaluator name of every evaluator with results in some run (a label is its result folder
    # and metric prefix: ``<label>/<metric>``)
    evaluators: dict[str, str] = field(default_factory=dict)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (title, path under out) listed under "Plots"
    # a ladder's rungs as the report pipeline computed them (each rung's own Report, its arms' costs and final
    # values: records.Rung), ladder order; [] without a ladder
    ladder: list[Rung] = field(default_factory=list)
    # a re-render's source (``preschool report --from-results``): the stored results.json, whose runs are
    # not on disk; None when the report reads the run folders
    stored: dict[str, Any] | None = None

    @property
    def plots(self) -> Path:
        return plots_dir(self.out)

    @property
    def data_dir(self) -> Path:
        return data_dir(self.out)

    def runs(self, arm: str) -> dict[int, Path]:
        """``{seed: run folder}`` of the arm's runs that have logged anything, seeds in order (of a ladder,
        at the rung the report reads: the config's ``rung``)."""
        return {s: d for a, s, d in arm_runs(self.out, [_Named(arm)], self.seeds, self.config.get("rung"))
                if metrics_path(d).is_file()}

    def arm_config(self, arm: str) -> dict[str, Any]:
        return next(a for a in self.config["arms"] if a["name"] == arm)

    def labels_of(self, evaluator: str) -> list[str]:
        """The labels (result folders, metric prefixes) under which ``evaluator`` has results, sorted."""
        return sorted(label for label, name in self.evaluators.items() if name == evaluator)

    def seed_results(self, arm: str) -> dict[Any, SeedResult]:
        """``{seed: SeedResult}``: the report's numbers of each run of ``arm`` ({} without a report or runs)."""
        return {} if self.report is None else self.report.seed_results(arm)

    def figure(self, title: str, path: Path) -> None:
        """List a figure the section saved (under :attr:`plots`) in the report's "Plots"."""
        self.figures.append((title, Path(path).relative_to(self.out).as_posix()))


@dataclass
class _Named:
    name: str


class Section:
    """One analysis: ``write(ctx)`` returns ``(results, markdown lines)`` and saves its plots under ``ctx.plots``.

    ``evaluator``: the evaluator whose results switch the section on (None: only when ``report.sections``
    names it); ``order``: where a switched-on section goes among the others (then by name);
    ``results_key``: a top-level ``results.json`` key for its results instead of ``sections.<name>``;
    ``reads_runs``: the section reads run files (``metrics.jsonl``, checkpoints, prepared data) that
    ``results.json`` does not hold, so a report re-rendered from ``results.json`` alone cannot have it (a
    section that keeps what it reads is a :class:`GatheredSection` instead).
    """

    evaluator: str | None = None
    reads_runs: bool = False
    order: int = 100
    results_key: str | None = None
    name: str = ""  # the registered name (set by build_section)

    def __init__(self, cfg: Any = None):
        self.cfg = cfg  # None for a section registered without a config dataclass

    @classmethod
    def applies(cls, ctx: SectionContext) -> bool:
        """Whether the report adds this section unasked: its evaluator has results in some run."""
        return cls.evaluator is not None and bool(ctx.labels_of(cls.evaluator))

    def stored_results(self, stored: dict) -> dict:
        """This section's results in ``stored`` (a ``results.json``); {} when it has none."""
        got = stored.get(self.results_key) if self.results_key else (stored.get("sections") or {}).get(self.name)
        return got if isinstance(got, dict) else {}

    def stored_gap(self, stored: dict) -> str | None:
        """Why a report re-rendered from ``stored`` (a ``results.json``) cannot have this section; None when it can."""
        if self.reads_runs:
            return ("reads the run folders (metrics.jsonl, prepared data), which results.json does not hold: "
                    "re-render it with the runs (preschool report EXP.yaml)")
        return None

    def write(self, ctx: SectionContext) -> tuple[Any, list[str]]:
        raise NotImplementedError


class GatheredSection(Section):
    """A section that reads run files (``metrics.jsonl``, the prepared data's manifests, checkpoints) and still
    re-renders from ``results.json`` alone: :meth:`gather` reads the runs into plain data, which its results
    keep under ``inputs``; :meth:`render` computes everything else (numbers, verdicts, plots, lines) from that.
    A report from the runs gathers; a re-render (``ctx.stored``) reads the stored ``inputs`` instead, so both
    write the same report. The inputs pass through JSON either way (object keys are strings: a seed is
    ``"0"``), so the two cannot differ by a key's type."""

    def gather(self, ctx: SectionContext) -> dict:
        """What the section reads of the runs, as JSON data."""
        raise NotImplementedError

    def render(self, ctx: SectionContext, inputs: dict) -> tuple[dict, list[str]]:
        """``(results, markdown lines)`` from ``inputs`` (what :meth:`gather` returned) and ``ctx``'s config,
        report and rung records; reads no run file."""
        raise NotImplementedError

    def stored_gap(self, stored: dict) -> str | None:
        if "inputs" in self.stored_results(stored):
            return None
        key = self.results_key or f"sections.{self.name}"
        return (f"was written before results.json kept what the section reads of the runs ({key}.inputs): "
                "re-render it with the runs (preschool report EXP.yaml)")

    def write(self, ctx: SectionContext) -> tuple[dict, list[str]]:
        import json

        if ctx.stored is None:
            inputs = json.loads(json.dumps(self.gather(ctx)))
            results, lines = self.render(ctx, inputs)
        else:
            inputs = self.stored_results(ctx.stored)["inputs"]
            try:
                results, lines = self.render(ctx, inputs)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
                # a results.json edited by hand or cut short: say which part, not a traceback
                from ..errors import DataError

                key = self.results_key or f"sections.{self.name}"
                raise DataError(f"{key}.inputs does not hold what the {self.name} section reads "
                                f"({type(e).__name__}: {e}); re-render it with the runs (preschool report EXP.yaml)") \
                    from None
        return {**results, "inputs": inputs}, lines


def build_section(name: str, params: dict | None, field_prefix: str = "report.sections") -> Section:
    """The configured section ``name`` (unknown names and bad params name the field)."""
    section = SECTIONS.build(name, params or {}, f"{field_prefix}.{name}")
    section.name = name
    return section


def run_sections(ctx: SectionContext, configured: dict[str, dict | None]) -> list[tuple[str, Section, Any, list[str]]]:
    """Write the sections that switch on by themselves (:meth:`Section.applies`; by ``order``, then name),
    then those ``configured`` names (``report.sections``, in its order; its params also reach a section
    that switched on by itself, which runs once, in the first group). Returns ``(name, section, results,
    markdown lines)`` in report order."""
    auto = sorted((e for e in SECTIONS if e.cls.applies(ctx)), key=lambda e: (e.cls.order, e.name))
    names = [e.name for e in auto] + [n for n in configured if n not in {e.name for e in auto}]
    out = []
    sections = [(name, build_section(name, configured.get(name))) for name in names]
    if ctx.stored is not None:
        from ..errors import DataError

        gaps = [f"{name} {gap}" for name, section in sections if (gap := section.stored_gap(ctx.stored))]
        if gaps:
            raise DataError("report section " + "; ".join(gaps))  # the re-render names the stored file
    for name, section in sections:
        results, lines = section.write(ctx)
        out.append((name, section, results, lines))
    return out
