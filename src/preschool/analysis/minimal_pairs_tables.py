"""Report sections on the minimal-pairs evaluator's breakdowns: accuracy by phenomenon (table + bar plot)
and by the L2T paper's three fields (table), and the same two tables of the log-prob margin, accuracy's
continuous proxy (good − bad, nats; issue #30).

Each switches on when some run has its breakdown (``<label>/acc/term/<phenomenon>``,
``<label>/acc/field3/<field>``, ``<label>/margin/...``: ``minimal_pairs`` writes them for BLiMP-style
stimuli) and puts its table under a top-level ``results.json`` key: ``phenomena``, ``fields3``,
``phenomena_margin``, ``fields3_margin``.
"""

from __future__ import annotations

import math
from collections import defaultdict

from .records import Report
from .sections import Section, SectionContext, SECTIONS


def final_breakdown(report: Report | None, group: str, metric: str = "acc") -> dict[str, dict[str, float]]:
    """Per arm, each ``<evaluator>/<metric>/<group>/<name>`` minimal-pair value (``acc``: accuracy; ``margin``:
    log-prob margin) at the end of its curve, mean over seeds (``group`` ``term``: BLiMP's phenomena;
    ``field3``: the L2T paper's three fields); arms without any left out, {} without a report."""
    out: dict[str, dict[str, float]] = {}
    for name in report.names if report is not None else []:
        acc = defaultdict(list)
        for s in report.seed_results(name).values():
            for m, pts in s.curves.items():
                if f"/{metric}/{group}/" in m and pts:
                    acc[m.rsplit("/", 1)[-1]].append(pts[-1][1])
        if acc:
            out[name] = {k: math.fsum(v) / len(v) for k, v in sorted(acc.items())}
    return out


def breakdown_lines(title: str, what: str, table: dict[str, dict[str, float]]) -> list[str]:
    """A report.md section: one row per group name of ``table`` ({arm: {name: value}}), one column per arm."""
    rows = sorted({k for v in table.values() for k in v})
    lines = [f"## {title}", "", f"| {what} | " + " | ".join(table) + " |", "|---|" + "---|" * len(table)]
    return lines + [f"| {r} | " + " | ".join(f"{table[a].get(r, float('nan')):.3f}" for a in table) + " |" for r in rows]


class _Breakdown(Section):
    """A breakdown table of a final minimal-pair metric (``metric``: its family; ``group``: the level it reads)."""

    evaluator = "minimal_pairs"
    metric = "acc"
    group = ""
    title = ""
    what = ""

    @classmethod
    def applies(cls, ctx: SectionContext) -> bool:
        return bool(final_breakdown(ctx.report, cls.group, cls.metric))

    def table(self, ctx: SectionContext) -> dict[str, dict[str, float]]:
        return final_breakdown(ctx.report, self.group, self.metric)

    def write(self, ctx: SectionContext) -> tuple[dict, list[str]]:
        table = self.table(ctx)
        return table, breakdown_lines(self.title, self.what, table)


@SECTIONS.register("phenomena")
class Phenomena(_Breakdown):
    """Minimal-pair accuracy by phenomenon at the final checkpoint: table and bar plot."""

    order = 10
    results_key = "phenomena"
    group, title, what = "term", "Minimal pairs by phenomenon (final checkpoint)", "phenomenon"

    def write(self, ctx: SectionContext) -> tuple[dict, list[str]]:
        from .plots import plot_phenomenon_bars

        table, lines = super().write(ctx)
        path = plot_phenomenon_bars(table, ctx.plots / "minimal_pairs_by_phenomenon.png")
        ctx.figure("minimal-pair accuracy by phenomenon (final checkpoint)", path)
        return table, lines


@SECTIONS.register("fields3")
class Fields3(_Breakdown):
    """Minimal-pair accuracy by the L2T paper's three fields (semantics, morphology, syntax) at the final checkpoint."""

    order = 20
    results_key = "fields3"
    group, title, what = "field3", "Minimal pairs by field, the L2T paper's three (final checkpoint)", "field"


@SECTIONS.register("phenomena_margin")
class PhenomenaMargin(_Breakdown):
    """Minimal-pair log-prob margin (good − bad, nats) by phenomenon at the final checkpoint (table only)."""

    order, results_key, metric, group, what = 11, "phenomena_margin", "margin", "term", "phenomenon"
    title = "Minimal pairs by phenomenon: log-prob margin, good − bad, nats (final checkpoint; higher is better)"


@SECTIONS.register("fields3_margin")
class Fields3Margin(Fields3):
    """The same three fields' log-prob margin (good − bad, nats) at the final checkpoint."""

    order, results_key, metric = 21, "fields3_margin", "margin"
    title = "Minimal pairs by field, the L2T paper's three: log-prob margin, good − bad, nats (final checkpoint)"


def structural_ties(report: Report | None) -> dict[str, int]:
    """Per evaluator label, the minimal pairs whose two sentences are the same string (``<label>/ties_structural``,
    the most any run scored: every run scores the same pairs); {} when there are none or the runs predate the
    count."""
    out: dict[str, int] = {}
    for name in report.names if report is not None else []:
        for s in report.seed_results(name).values():
            for m, pts in s.curves.items():
                if m.endswith("/ties_structural") and pts and pts[-1][1] > 0:
                    label = m.rsplit("/", 1)[0]
                    out[label] = max(out.get(label, 0), int(pts[-1][1]))
    return out


@SECTIONS.register("structural_ties")
class StructuralTies(Section):
    """Minimal pairs whose two sentences are identical: a tie for every model, said apart from the others."""

    evaluator = "minimal_pairs"
    order = 9
    results_key = "structural_ties"

    @classmethod
    def applies(cls, ctx: SectionContext) -> bool:
        return bool(structural_ties(ctx.report))

    def write(self, ctx: SectionContext) -> tuple[dict, list[str]]:
        ties = structural_ties(ctx.report)
        lines = ["## Minimal pairs: structural ties", ""]
        for label, n in ties.items():
            setup = ctx.report.setups.get(label, "") if ctx.report is not None else ""
            lines.append(f"- `{label}`: {n} pair{'s' if n != 1 else ''} with the same sentence as good and bad "
                         f"(`{label}/ties_structural`; each flagged `identical` in the items): a tie for every model, "
                         "decided as the preset decides a tie (`lm_eval`: correct, as lm-eval's argmax; `preschool`: "
                         f"half) and left out of `{label}/ties`" + (f" ({setup})" if setup else "") + ".")
        return ties, lines
