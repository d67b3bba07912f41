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
from typing import Any, Mapping, Sequence

from ..io import remove_orphan_temp_files
from ..layout import REPORT, RESULTS
from .collect import add_downstream_average, collect
from .compute import compute, ladder_rung
from .from_results import stored_rungs
from .records import Report, Rung
from .render import render
from .sections import SectionContext, run_sections


def build_report(runs: Sequence, report, data: Mapping[str, Any]) -> Report:
    """Collect and compute: the :class:`Report` of the run records ``runs`` from their run folders (nothing
    written); ``report`` and ``data``: the experiment's ``report:`` settings and datasets."""
    return compute(runs, add_downstream_average(collect(runs), report.efficiency.downstream), report, data)


def write_report(exp, stored: dict | None = None) -> Path:
    """Write ``report.md``, ``results.json`` and ``plots/*.png`` under the experiment folder; returns the
    report's path. ``exp``: the resolved experiment (:class:`~preschool.experiment.resolved.Experiment`: its
    config and run records); of a ladder the tables are its largest rung's (or the rung it is a view of) and
    every rung's records feed the ladder section. Collect → compute (:func:`build_report`) → sections (the
    standard tables, those their evaluator's results switch on, then those ``report.sections`` names) → render.

    ``stored``: a ``results.json`` to re-render from instead of the run folders (analysis/from_results.py:
    its runs' curves are computed again with today's rules; its provenance is kept)."""
    from ..lock import config_key, output_lock

    exp = exp.report_view()
    cfg = exp.cfg
    if stored is None:
        rep = build_report(exp.runs, cfg.report, cfg.data)
    else:
        from .from_results import stored_report

        rep = stored_report(exp.runs, stored, cfg.report, cfg.data)
    ctx = section_context(exp, rep, stored)
    # one report writer at a time (the same config waits), so the temp files of plots, report.md and
    # results.json that a killed report left are provably dead: removed here, not left forever
    with output_lock(ctx.plots, f"preschool report ({cfg.name})", key=config_key(cfg), beside=True):
        ctx.plots.mkdir(parents=True, exist_ok=True)
        remove_orphan_temp_files(ctx.plots)
        remove_orphan_temp_files(cfg.out_dir, [REPORT, RESULTS])
        return render(cfg, exp.runs, rep, ctx, run_sections(ctx, cfg.report.sections))


def section_context(exp, rep: Report, stored: dict | None = None) -> SectionContext:
    """What the sections see of ``exp`` (the experiment at the rung the report's tables read): the config,
    the computed report and the evaluators that have results (label -> evaluator name: the experiment's
    ``evals`` name it, a label it does not list is its own name)."""
    from ..config import to_dict

    cfg = exp.cfg
    name_of = {spec.key: spec.name for spec in cfg.evals}
    labels = {m.split("/", 1)[0] for m in rep.metric_names if not m.startswith(("val/", "downstream/"))}
    return SectionContext(cfg.out_dir, to_dict(cfg), rep.names, list(cfg.seeds), rep.baseline,
                          [list(p) for p in cfg.report.compare], report=rep,
                          evaluators={label: name_of.get(label, label) for label in sorted(labels)},
                          ladder=(ladder_rungs(exp, rep) if stored is None
                                  else stored_rungs(stored, rep, list(cfg.seeds))),  # a re-render: as stored
                          stored=stored)


def ladder_rungs(exp, rep: Report) -> list[Rung]:
    """Every rung of a ladder, collected and computed on its own from its run records (the rung ``exp`` is a
    view of reuses ``rep``), in ladder order; [] without a ladder."""
    cfg = exp.cfg
    return [ladder_rung(r, rep if r == cfg.rung else build_report(exp.runs_at(r), cfg.report, cfg.data))
            for r in exp.ladder_rungs]
