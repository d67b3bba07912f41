"""Report section on the verbatim evaluator: surprisal by list position (a plot, no table).

Switches on when some run has ``verbatim`` results. Per arm (first training seed), it
draws the repeat condition's per-position surprisal of the longest lists, from the
summary of the checkpoint that gives the verbatim metrics' final value (the report's
``final_step``: a later stage off their axis, DEPO after pretraining, does not replace it).
"""

from __future__ import annotations

from pathlib import Path

from ..io import read_json
from ..layout import EVAL_SUMMARY, evals_dir
from .sections import Section, SectionContext, SECTIONS


def verbatim_positions(ctx: SectionContext) -> dict[str, dict]:
    """``{arm: {"list1": [...], "list2": [...]}}``: each arm's first-seed positions (arms without any left out).

    The summary read is the one at the latest ``final_step`` of a verbatim label's metrics (several
    labels: the latest step, then the last label by name)."""
    labels = ctx.labels_of("verbatim")
    out: dict[str, dict] = {}
    for arm in ctx.arms:
        seed = ctx.seed_results(arm).get(ctx.seeds[0])
        if not seed:
            continue
        final = seed.final_step
        found = [(st, label) for label in labels
                 if (st := max((s for m, s in final.items() if m.startswith(label + "/") and s is not None),
                               default=None)) is not None]
        if not found:
            continue
        step, label = max(found)
        summary = evals_dir(Path(seed.run_dir), step) / label / EVAL_SUMMARY
        pos = (read_json(summary).get("extra") or {}).get("positions") or {} if summary.is_file() else {}
        cond = pos.get("repeat") or next(iter(pos.values()), None)
        if cond:
            longest = max(cond, key=lambda k: int(k.lstrip("n")) if k.lstrip("n").isdigit() else 0)
            out[arm] = cond[longest]
    return out


@SECTIONS.register("verbatim_positions")
class VerbatimPositions(Section):
    """Verbatim retrieval: surprisal by list position at the final checkpoint (plot ``verbatim_positions.png``;
    the positions plotted in ``results.json`` ``sections.verbatim_positions``, which a re-render draws from)."""

    evaluator = "verbatim"
    order = 30

    def write(self, ctx: SectionContext) -> tuple[dict | None, list[str]]:
        from .plots import plot_verbatim_positions

        path = ctx.plots / "verbatim_positions.png"
        if ctx.stored is None:
            positions = verbatim_positions(ctx)
        else:  # a re-render: the positions results.json stored (sections.verbatim_positions), if any
            positions = (ctx.stored.get("sections") or {}).get("verbatim_positions") or {}
            if not positions and path.is_file():
                # a results.json from before the positions were stored: the plot the runs drew stays
                ctx.figure(_TITLE, path)
                return None, []
        if positions:
            path = plot_verbatim_positions(positions, path, title="verbatim retrieval: surprisal by list position "
                                                           "(final checkpoint)")
            ctx.figure(_TITLE, path)
        return positions or None, []


_TITLE = "verbatim retrieval by list position (final checkpoint)"
