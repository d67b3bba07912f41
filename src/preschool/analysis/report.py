"""The experiment report: ``report.md`` + ``results.json`` + PNG plots.

Reads what the other steps left on disk (each arm's ``metrics.jsonl`` and cached evaluation summaries),
so it can be rebuilt at any time with ``preschool report``. Every number in the report is in
``results.json`` together with the config, code version and data manifests that produced it.

The pipeline, one module per step, each passing on frozen records (analysis/records.py):

1. collect (analysis/collect.py): every run's logged and evaluated points, token accounts and doses,
   with the ``downstream/*`` averages (:class:`~preschool.analysis.records.Collected`);
2. compute (analysis/compute.py): each metric's curve on its own token axis, final values, values after
   later stages, the difference from the baseline and the token efficiency
   (:class:`~preschool.analysis.records.Report`; the table, the plots and ``results.json`` ``axes`` say
   which axis each metric uses, and the evaluation setup behind every evaluator's numbers);
3. sections (analysis/sections.py): every part of ``report.md``, the standard tables included
   (analysis/standard_tables.py), each reading the Report through its :class:`SectionContext`;
4. render (analysis/render.py): ``report.md``, ``results.json`` and the headline plots.

A value that is not finite (a NaN or infinite val loss, an evaluator's NaN) is never a number of the
report: the run's metric that logged one is left out of every table, difference and plot (its other
seeds still count), each such value is listed under "Non-finite values" (``results.json``:
``nonfinite``), and every row it was left out of says so. ``results.json`` is strict JSON (``null``
where there is no value).
"""

from __future__ import annotations

from pathlib import Path

from ..io import remove_orphan_temp_files
from ..layout import REPORT, RESULTS
from .collect import add_downstream_average, collect
from .compute import compute, ladder_rung
from .from_results import stored_rungs
from .records import Report, Rung
from .render import render
from .sections import SectionContext, run_sections


def build_report(cfg) -> Report:
    """Collect and compute: the experiment's :class:`Report` from its run folders (nothing written)."""
    return compute(cfg, add_downstream_average(collect(cfg), cfg.report.efficiency.downstream))


def write_report(cfg, stored: dict | None = None) -> Path:
    """Write ``report.md``, ``results.json`` and ``plots/*.png`` under the experiment folder; returns the
    report's path. Collect → compute (:func:`build_report`) → sections (the standard tables, those their
    evaluator's results switch on, then those ``report.sections`` names) → render.

    ``stored``: a ``results.json`` to re-render from instead of the run folders (analysis/from_results.py:
    its runs' curves are computed again with today's rules; its provenance is kept)."""
    from ..lock import config_key, output_lock

    if stored is None:
        rep = build_report(cfg)
    else:
        from .from_results import stored_report

        rep = stored_report(cfg, stored)
    ctx = section_context(cfg, rep, stored)
    # one report writer at a time (the same config waits), so the temp files of plots, report.md and
    # results.json that a killed report left are provably dead: removed here, not left forever
    with output_lock(ctx.plots, f"preschool report ({cfg.name})", key=config_key(cfg), beside=True):
        ctx.plots.mkdir(parents=True, exist_ok=True)
        remove_orphan_temp_files(ctx.plots)
        remove_orphan_temp_files(cfg.out_dir, [REPORT, RESULTS])
        return render(cfg, rep, ctx, run_sections(ctx, cfg.report.sections))


def section_context(cfg, rep: Report, stored: dict | None = None) -> SectionContext:
    """What the sections see: the experiment, the computed report and the evaluators that have results
    (label -> evaluator name: the experiment's ``evals`` name it, a label it does not list is its own name)."""
    from ..config import to_dict

    name_of = {spec.key: spec.name for spec in cfg.evals}
    labels = {m.split("/", 1)[0] for m in rep.metric_names if not m.startswith(("val/", "downstream/"))}
    return SectionContext(cfg.out_dir, to_dict(cfg), rep.names, list(cfg.seeds), rep.baseline,
                          [list(p) for p in cfg.report.compare], report=rep,
                          evaluators={label: name_of.get(label, label) for label in sorted(labels)},
                          ladder=(ladder_rungs(cfg, rep) if stored is None
                                  else stored_rungs(stored, rep, list(cfg.seeds))),  # a re-render: as stored
                          stored=stored)


def ladder_rungs(cfg, rep: Report) -> list[Rung]:
    """Every rung of a ladder, collected and computed on its own (the rung ``cfg`` is a view of reuses ``rep``),
    in ladder order; [] without a ladder."""
    return [ladder_rung(v.rung, rep if v.rung == cfg.rung else build_report(v)) for v in cfg.ladder_views()]
