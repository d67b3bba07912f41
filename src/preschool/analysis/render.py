"""Render, the report's last step: ``report.md``, ``results.json`` and the headline plots.

``report.md`` is every section's markdown in report order (the standard tables first: they are sections
too, analysis/standard_tables.py), then the plots (one per headline metric with a curve, then the
sections' figures) and the provenance. ``results.json`` is the computed report
(:meth:`~preschool.analysis.records.Report.to_json`), the results of the sections with a ``results_key``,
``sections`` (the others' results by name) and the provenance (config, code version, data manifest):
strict JSON, ``null`` where there is no value.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from ..io import provenance, read_json, write_json, write_text
from ..layout import (CKPT_CHECKSUMS, PLOTS, checkpoint_dir, data_manifest_path, evals_dir, plots_dir, report_path,
                      results_path, step_of)
from .records import Report, axis_label
from .sections import Section, SectionContext


def render(cfg, runs: Sequence, rep: Report, ctx: SectionContext,
           sections: list[tuple[str, Section, Any, list[str]]]) -> Path:
    """Write the headline plots, ``report.md`` and ``results.json`` of the sections ``run_sections`` wrote;
    returns the report's path (``runs``: the run records the report read)."""
    out = cfg.out_dir
    figures = headline_plots(out, rep) + ctx.figures
    lines: list[str] = []
    results_of: dict[str, Any] = {}
    top: dict[str, Any] = {}
    for name, section, results, md in sections:
        if section.results_key is not None:
            top[section.results_key] = results
        elif results is not None:
            results_of[name] = results
        if md:
            lines += md + [""]
    if figures:
        lines += ["## Plots", ""]
        for title, path in figures:
            lines += [f"**{title}**", "", f"![{title}]({path})", ""]
    if ctx.stored is None:
        prov = provenance(cfg, data_manifests=_data_manifest(out))
        unverified = unverified_checkpoints(runs, out)
    else:  # a re-render: the runs' own config, code version and data manifests, as stored
        from .from_results import stored_provenance

        prov = stored_provenance(ctx.stored)
        unverified = list(ctx.stored.get("unverified_checkpoints") or [])
    code = prov.get("code_version") or {}
    lines += ["## Provenance", "",
              f"- code: preschool {code.get('preschool')} "
              f"commit {(code.get('git_commit') or 'unknown')[:12]}"
              f"{' (dirty)' if code.get('git_dirty') else ''}",
              "- config: `experiment.yaml`; data manifest: `data/manifest.json`; every number: `results.json`"]
    if unverified:
        shown = ", ".join(f"`{c}`" for c in unverified[:10]) + (f" and {len(unverified) - 10} more"
                                                                if len(unverified) > 10 else "")
        lines += [f"- evaluated from checkpoints without {CKPT_CHECKSUMS} (written by an older preschool, or the file "
                  f"was removed), whose files nothing checked against what the trainer wrote: {shown}"]
        top["unverified_checkpoints"] = unverified
    if ctx.stored is not None:
        lines += ["- re-rendered from `results.json` alone (`preschool report --from-results`): the runs' stored "
                  "curves, read with the report rules of the preschool that re-rendered it; the code above ran them"]
    lines += [""]
    write_json(results_path(out), strict({**rep.to_json(), **top, "sections": results_of, **prov}))
    path = report_path(out)
    write_text(path, "\n".join(lines))
    return path


def unverified_checkpoints(runs: Sequence, out: Path) -> list[str]:
    """The checkpoints of the run records ``runs`` (relative to ``out``) whose evaluations the report holds and
    that have no ``checksums.json``: a damaged weights file there scores without a word, so the report says
    which."""
    found = []
    for rec in runs:
        root = evals_dir(rec.run_dir)
        for sdir in sorted(root.iterdir()) if root.is_dir() else ():
            step = step_of(sdir)
            ckpt = checkpoint_dir(rec.run_dir, step) if step is not None else None
            if ckpt is not None and ckpt.is_dir() and not (ckpt / CKPT_CHECKSUMS).is_file():
                found.append(ckpt.relative_to(out).as_posix())
    return found


def strict(obj: Any) -> Any:
    """``obj`` with every float that is not finite (a mean over no values) as None: JSON has no NaN, and
    readers other than Python's refuse the ``NaN`` it would write."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def headline_plots(out: Path, rep: Report) -> list[tuple[str, str]]:
    """One plot per headline metric with a curve (each arm's seeds on the metric's axis); ``(title, path)``."""
    from . import plots

    pdir = plots_dir(out)
    figures = []
    for m in rep.headline:
        curves = {name: [s.curves.get(m, []) for s in rep.seed_results(name).values()] for name in rep.names}
        if not any(any(c) for c in curves.values()):
            continue
        fname = m.replace("/", "_") + ".png"
        ylim = _focus_ylim(curves) if rep.higher.get(m) is False else None
        setup = rep.setups.get(m.split("/", 1)[0])
        plots.plot_metric_vs_tokens(curves, pdir / fname, title=m + (f" [{setup}]" if setup else ""), ylabel=m,
                                    xlabel=axis_label(rep.axes.get(m, "pt")), ylim=ylim, chance=rep.chance.get(m))
        figures.append((m, f"{PLOTS}/{fname}"))
    return figures


def _focus_ylim(curves: dict) -> tuple[float, float] | None:
    """Value range of the curves after the first 10% of PT tokens (losses start far above where arms differ)."""
    pts = [p for seeds in curves.values() for c in seeds for p in c]
    if len(pts) < 3:
        return None
    xmax = max(x for x, _ in pts)
    late = [v for x, v in pts if x >= 0.1 * xmax]
    if not late:
        return None
    lo, hi = min(v for _, v in pts), max(late)
    pad = 0.05 * (hi - lo or abs(hi) or 1.0)
    return lo - pad, hi + pad


def _data_manifest(out: Path) -> Any:
    p = data_manifest_path(out)
    return read_json(p) if p.is_file() else None
