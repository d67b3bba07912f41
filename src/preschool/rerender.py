"""Re-render committed studies from their ``results.json`` (``preschool report --from-results``, ``make rerender``).

The computing half lives in :mod:`preschool.analysis.from_results` (the stored curves back into a
:class:`~preschool.analysis.records.Report`); this module is the half that needs the experiment schema: it reads
the stored config with today's :class:`~preschool.experiment.ExperimentConfig` into an
:class:`~preschool.experiment.Experiment` (its run records resolved as a run's are), refuses what cannot be
re-rendered in one line naming the file, and writes the report through the normal report pipeline. It sits
above ``analysis`` in the import order because the schema does.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from .analysis.report import write_report
from .analysis.sections import SECTIONS, build_section
from .config import from_dict
from .errors import ConfigError, DataError, PreschoolError
from .experiment import _OLD_COMPARTMENTS_KEYS, Experiment, ExperimentConfig
from .io import read_json
from .layout import REPORT, plots_dir, results_path


def load_stored(path: str | Path, out: str | Path | None = None):
    """``(exp, stored)``: the experiment whose config ``results.json`` at ``path`` stores (its ``out`` set to
    ``out``, default the file's folder) and the file's content. Refuses, in one line naming the file, what is
    not a report-pipeline ``results.json`` or whose config today's schema cannot read."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file (a study re-renders from its results.json)")
    stored = read_json(path)
    raw = stored.get("config") if isinstance(stored, dict) else None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: no `config` to re-render from")
    old = [k for k in _OLD_COMPARTMENTS_KEYS if k in raw]
    arms = stored.get("arms")
    if old or not isinstance(arms, dict) or not all(isinstance(a, dict) and "seeds" in a for a in arms.values()):
        why = f"its config uses the retired `preschool compartments` schema (keys {old})" if old else \
            "it has no per-run curves (`arms.<arm>.seeds`)"
        raise DataError(f"{path}: written by the retired compartments runner, not the report pipeline: {why}; "
                        "re-run the study to re-render it")
    raw = {k: v for k, v in raw.items() if k != "plugins_used"}
    try:
        with warnings.catch_warnings():  # the stored config is spelled as it was when it ran: nothing to fix
            warnings.simplefilter("ignore", FutureWarning)
            exp = Experiment.resolve(from_dict(ExperimentConfig, {**raw, "out": str(out or path.parent)}))
    except ConfigError as e:
        raise DataError(f"{path}: its stored config does not load today: {e}") from None
    cfg = exp.cfg
    for name, params in cfg.report.sections.items():  # before anything is written: a section that cannot be had
        gap = build_section(name, params).stored_gap(stored) if name in SECTIONS else None
        if gap:
            raise DataError(f"{path}: its report section {name} {gap}")
    at_step = [m for m, t in cfg.report.efficiency.targets.items() if isinstance(t, str)]
    if at_step:  # baseline@<step>: the value at a step, and results.json keeps curves by tokens, not steps
        raise DataError(f"{path}: report.efficiency.targets {at_step} name a baseline step (baseline@<step>), "
                        "whose value results.json does not keep: re-render it with the runs "
                        "(preschool report EXP.yaml)")
    if cfg.ladder is not None and "rung_results" not in ((stored.get("sections") or {}).get("ladder") or {}):
        raise DataError(f"{path}: a ladder report written before results.json kept each rung's numbers "
                        "(sections.ladder.rung_results): re-render it with the runs (preschool report EXP.yaml)")
    return exp, stored


def rerender(results: str | Path, out: str | Path | None = None) -> Path:
    """Re-render ``report.md``, ``results.json`` and the plots of the study whose ``results.json`` is
    ``results`` into ``out`` (default: that file's folder); returns the report's path."""
    source = Path(results).parent
    elsewhere = out is not None and Path(out).resolve() != source.resolve()
    exp, stored = load_stored(results, out if elsewhere else None)
    if elsewhere and plots_dir(source).is_dir():  # a plot only the runs could draw (verbatim positions before
        # they were stored) is kept as they drew it; every other plot is drawn again
        shutil.copytree(plots_dir(source), plots_dir(out), dirs_exist_ok=True)
    try:
        return write_report(exp, stored=stored)
    except DataError as e:  # what the stored file does not hold, said of that file (the report may go elsewhere)
        raise DataError(f"{results}: {e}") from None


def stored_seed_plan(results: str | Path) -> list[str]:
    """``preschool plan --seeds``: how many seeds each comparison of the study whose ``results.json`` is ``results``
    would need (:mod:`preschool.analysis.seed_plan`), from its stored runs read with today's rules."""
    from .analysis.from_results import stored_report, stored_rungs
    from .analysis.seed_plan import seed_plan, seed_plan_lines

    exp, stored = load_stored(results)
    view = exp.report_view()  # a ladder: its largest rung's comparisons, as the report's tables
    cfg = view.cfg
    try:
        rep = stored_report(view.runs, stored, cfg.report, cfg.data)
        rungs = stored_rungs(stored, rep, list(cfg.seeds))
    except DataError as e:
        raise DataError(f"{results}: {e}") from None
    return seed_plan_lines(cfg.name, seed_plan(rep, rungs, cfg.report.equivalence, rung=cfg.rung))


def rerender_tree(root: str | Path) -> list[tuple[Path, str | None]]:
    """Re-render every study under ``root`` (each folder with a ``report.md``) in place from its
    ``results.json``; returns ``(folder, None)`` for each re-rendered one and ``(folder, reason)`` for each
    that cannot be (no ``results.json``, or the one-line refusal of :func:`load_stored` / the sections)."""
    done: list[tuple[Path, str | None]] = []
    for report in sorted(Path(root).rglob(REPORT)):
        folder = report.parent
        results = results_path(folder)
        if not results.is_file():
            done.append((folder, f"{folder}: no results.json beside report.md (the runs' curves were not stored)"))
            continue
        try:
            rerender(results)
        except PreschoolError as e:
            done.append((folder, str(e)))
        else:
            done.append((folder, None))
    return done
