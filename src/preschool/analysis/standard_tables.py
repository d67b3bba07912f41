"""The standard tables of ``report.md``, as built-in report sections (analysis/sections.py).

Every report has them, in this order (their negative ``order`` puts them before any other section):
``overview`` (title, arms, baseline, seeds), ``nonfinite`` (values that are not numbers), ``arms`` (each
arm's stages), ``doses`` (tokens trained per stage and source), ``axes`` (each metric's axis and evaluation
setup), ``results`` (final values), ``final_stage`` (the stage each value ends), ``after_stages`` (values
after later stages), ``difference`` (from the baseline: the seed-level verdict, testability, equivalence and the
verify-ppt within-run rule) and ``efficiency``
(token efficiency). Each reads ``ctx.report`` only, writes markdown only (its numbers are the report's
own in ``results.json``: ``arms``, ``table``, ``after_stages``, ...), and a table with no rows writes
nothing. They switch on whenever the report has been computed.
"""

from __future__ import annotations

import math

import yaml

from ..layout import experiment_config_path
from .compute import NOT_JUDGED, NOT_TESTABLE
from .records import Efficiency, Gain, NonfiniteValue, Report, TableRow, axis_label, direction_word
from .sections import SECTIONS, Section, SectionContext


class _Standard(Section):
    """A standard table: on whenever the report is computed, no results of its own."""

    @classmethod
    def applies(cls, ctx: SectionContext) -> bool:
        return ctx.report is not None

    def write(self, ctx: SectionContext) -> tuple[None, list[str]]:
        assert ctx.report is not None  # applies() says so
        return None, self.lines(ctx, ctx.report)

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        raise NotImplementedError


@SECTIONS.register("overview")
class Overview(_Standard):
    """The report's title, its arms, baseline and seeds, and how to read its values."""

    order = -100

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        return [f"# {ctx.config['name']}: report", "",
                f"Arms: {', '.join(rep.names)}; baseline for comparisons: **{rep.baseline}**; "
                f"training seeds: {list(ctx.seeds)}.",
                "Values are at the end of the last stage that trains on each metric's axis (its final stage: the "
                "`final stage` table), mean ± SD over seeds when there are several; a later stage's effect on a "
                "metric is its own row under \"After later stages\". Each evaluator states each metric's direction "
                "(lower is better for losses and perplexities, higher for accuracies).",
                *override_lines(ctx)]


def override_lines(ctx: SectionContext) -> list[str]:
    """One line per built-in part a plug-in replaced (``register(name, override=True)``), as the run recorded
    it in experiment.yaml's ``plugins_used``: the numbers come from that plug-in's code, not preschool's."""
    path = experiment_config_path(ctx.out)
    try:
        used = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("plugins_used") or []
    except (OSError, yaml.YAMLError, AttributeError):
        return []
    return [f"Plug-in override: {o['registry']} `{o['name']}` is replaced by plug-in {p['plugin']} "
            f"(sha256 {str(p.get('sha256'))[:12]})." for p in used if isinstance(p, dict)
            for o in p.get("overrides") or [] if isinstance(o, dict)]


@SECTIONS.register("nonfinite")
class Nonfinite(_Standard):
    """The logged values that are not numbers (nothing when there are none)."""

    order = -90

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        return nonfinite_lines(rep.nonfinite)


def nonfinite_lines(rows: list[NonfiniteValue]) -> list[str]:
    """Markdown: the list of the non-finite values the runs logged ([] when there are none)."""
    if not rows:
        return []
    return ["## Non-finite values",
            "These logged values are not numbers: a run's metric with one is left out of the results, the "
            "differences from the baseline and the token efficiency (each row it is left out of says so; the "
            "other seeds still count), and its curve is not plotted. A NaN or infinite loss means the run "
            "diverged there: look at its `metrics.jsonl` before reading anything below.", "",
            "| arm | seed | metric | step | value |", "|---|---|---|---|---|",
            *(f"| {r.arm} | {r.seed} | {r.metric} | {r.step} | {r.value} |" for r in rows)]


@SECTIONS.register("arms")
class Arms(_Standard):
    """Each arm's stages: tokens, data, schedule, what carries over, embeddings."""

    order = -80

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        lines = ["## Arms", ""]
        for name in rep.names:
            steps, groups_seen = [], set()
            for st in rep.stages[name]:
                data = st.data if isinstance(st.data, str) else " + ".join(f"{k}×{w:g}" for k, w in st.data.items())
                if st.group is not None and st.group in groups_seen:
                    carry = f"resumes group '{st.group}' (its optimizer, schedule and data position)"
                else:
                    carry = "fresh optimizer + schedule" if st.reset_optimizer else "optimizer carried over"
                    if st.group is not None:
                        carry += f", schedule shared by group '{st.group}'"
                if st.group is not None:
                    groups_seen.add(st.group)
                bits = [f"{st.tokens:,} tokens of {data}", st.schedule.name, carry,
                        f"embeddings: {st.embeddings_at_start}"]
                if not st.counts_as_pt:
                    bits.append("not counted as PT")
                steps.append(f"**{st.name}** ({', '.join(bits)})")
            start = f"({rep.starts[name]}) " if name in rep.starts else ""
            lines.append(f"- `{name}`: {start}" + " → ".join(steps))
        return lines


@SECTIONS.register("doses")
class Doses(_Standard):
    """Per arm, stage and source, the tokens planned (stage tokens x weight share) and trained."""

    order = -70

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        rows = []
        for name in rep.names:
            seeds = rep.seed_results(name)
            for st in rep.stages[name]:
                weights = {st.data: 1.0} if isinstance(st.data, str) else dict(st.data)
                total = math.fsum(weights.values())
                for src, w in weights.items():
                    got = sorted({s.doses[st.name].get(src, 0) for s in seeds.values() if st.name in s.doses})
                    realised = " / ".join(f"{t:,}" for t in got) if got else "–"
                    rows.append(f"| {name} | {st.name} | {src} | {st.tokens * w / total:,.0f} | {realised} |")
        if not rows:
            return []
        return ["## Doses",
                "Tokens each stage trained from each source, as the runs logged them (`results.json`: each seed's "
                "`doses`), beside the plan (the stage's tokens × the source's weight share). A stage trains whole "
                "steps and a mixture carries each source's fractional rows from batch to batch, so the two agree "
                "to within a step's tokens in total and one row per source.", "",
                "| arm | stage | source | planned | trained |", "|---|---|---|---|---|", *rows]


@SECTIONS.register("axes")
class Axes(_Standard):
    """Each headline metric's token axis and the evaluation setup behind its numbers."""

    order = -60

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        return ["## Axes and evaluation setups",
                "Each metric is compared on its own token axis: language metrics against language (PT) tokens "
                "(a mixture counts only its language share), a synthetic task's metrics against that task's own "
                "tokens. Direction and chance level are each evaluator's declarations (a metric without a "
                "direction is shown, not judged; one with a chance level is not testable where no arm ends beyond "
                "noise of it). The setup names the preset / stimuli that produced an evaluator's numbers.", "",
                "| metric | x axis | better | chance | setup |", "|---|---|---|---|---|",
                *(f"| {m} | {axis_label(rep.axes.get(m, 'pt'))} "
                  f"| {direction_word(rep.higher.get(m)) or 'not declared'} "
                  f"| {'–' if m not in rep.chance else f'{rep.chance[m]:.4g}'} "
                  f"| {rep.setups.get(m.split('/', 1)[0], '') or '–'} |" for m in rep.headline)]


@SECTIONS.register("results")
class Results(_Standard):
    """Each arm's final value of every headline metric (mean ± SD over seeds)."""

    order = -50

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        hdr = ["arm", "tokens trained"] + rep.headline
        lines = ["## Results", "", "| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
        for row in rep.table:
            cells = [row.arm + ("" if row.done else " (unfinished)"), f"{row.total_tokens:,}"]
            cells += [result_cell(row, m) for m in rep.headline]
            lines.append("| " + " | ".join(cells) + " |")
        return lines


def result_cell(row: TableRow, m: str) -> str:
    """A results-table cell: mean ± SD over the seeds, and the seeds left out for a non-finite value."""
    from .stats import format_mean_sd

    bad = row.nonfinite.get(m)
    if not bad:
        return format_mean_sd(*row.values[m])
    if row.values[m][2] == 0:
        return "non-finite"
    return f"{format_mean_sd(*row.values[m])} (seed {', '.join(map(str, bad))} left out: non-finite)"


@SECTIONS.register("final_stage")
class FinalStage(_Standard):
    """The stage whose end gives each value of the results table."""

    order = -40

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        return ["Final stage of each value (the last stage training on the metric's axis):", "",
                "| arm | " + " | ".join(rep.headline) + " |", "|---|" + "---|" * len(rep.headline),
                *(f"| {row.arm} | " + " | ".join(row.final_stage.get(m) or "–" for m in rep.headline) + " |"
                  for row in rep.table)]


@SECTIONS.register("after_stages")
class AfterStages(_Standard):
    """A metric's value after a stage past its final stage (DEPO after pretraining), beside the headline one."""

    order = -30

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        from .stats import format_mean_sd

        if not rep.after_stages:
            return []
        return ["## After later stages",
                "A stage after a metric's final stage (say DEPO after pretraining) leaves its axis where it was "
                "and moves the metric: its value at that stage's end, beside the headline one. Curves, "
                "differences and token efficiency use only checkpoints up to the end of the final stage.", "",
                "| arm | metric | final (end of) | after | value | change |", "|---|---|---|---|---|---|",
                *(f"| {r.arm} | {r.metric} | {format_mean_sd(*r.final)} ({r.final_stage}) | after {r.stage} | "
                  f"{format_mean_sd(*r.value)} | {r.change:+.4f} |" for r in rep.after_stages)]


@SECTIONS.register("difference")
class Difference(_Standard):
    """Each arm's difference from the baseline over the end of each metric's axis: the seed-level verdict,
    testability, equivalence, and the verify-ppt within-run rule beside them."""

    order = -20

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        if not rep.stable_gain:
            return []
        lines = [f"## Difference from {rep.baseline}",
                 f"Each seed pair (the arm's run and {rep.baseline}'s run of the same training seed) gives one effect: "
                 f"the mean of its per-checkpoint difference (arm − baseline, sign flipped for losses so positive = "
                 f"better) over the last {rep.window:.0%} of the metric's axis, at the baseline's checkpoints (the "
                 "arm's curve linearly interpolated there). **Verdict** (seed level): the 95 % Student-t interval "
                 "of the mean effect over the n seed pairs is a *gain* or a *harm* when it excludes 0, else *no "
                 "difference shown*; one seed pair gives no interval and no seed-level verdict (two give one, "
                 "t = 12.7 wide). A metric with a chance level is *not testable at this scale* when no arm ends "
                 "beyond noise of it (each arm's 95 % t interval over its seeds' final values, or with one seed its "
                 "checkpoint SD over the window, does not clear chance); its numbers are given, not judged. "
                 "**Equivalence**: two one-sided tests, *equivalent* when the 90 % t interval lies inside "
                 "±margin (`report.equivalence`; default 2 % of the baseline's final value), *inconclusive* when "
                 "it spans the margin and the 95 % interval holds 0. **verify-ppt within-run rule**: the "
                 "per-checkpoint differences pooled over the seeds (n = checkpoints × seeds, correlated within a "
                 "run: a smoothness rule, not a seed-level verdict), *stable* when |mean| > SD.", "",
                 "| arm | metric | axis | effect: mean [95 % t interval] (n seed pairs) | seed pairs | verdict | "
                 "equivalence | verify-ppt within-run rule |", "|---|---|---|---|---|---|---|---|"]
        notes = []
        for g in rep.stable_gain:
            lines.append(f"| {g.arm} | {g.metric} | {axis_label(g.axis)} | " + " | ".join(difference_cells(g)) + " |")
            if g.seed_verdict == NOT_TESTABLE:
                notes.append(f"- {g.arm} vs {rep.baseline}, {g.metric}: " + chance_text(g.testability))
        if notes:
            lines += ["", "Not testable at this scale (final value over seeds: mean [95 % t interval], or one seed's "
                      "value and its checkpoint SD over the window, against the metric's chance level):", "", *notes]
        return lines


def difference_cells(g: Gain) -> list[str]:
    """The cells of a difference row after its axis: effect, seed pairs, verdict, equivalence, within-run rule."""
    from .stats import interval_text, signs_text

    bad = ", ".join(g.nonfinite)
    if g.seed_verdict == NOT_JUDGED:
        return ["–", "–", "shown, not judged: its evaluator declares no direction", "–", "–"]
    if g.mean is None:
        return ["–", "–", f"not compared (non-finite values in {bad})" if bad else "not compared", "–", "–"]
    v = g.seed_level or {}
    verdict = g.seed_verdict + (f"; left out: non-finite values in {bad}" if bad else "")
    pooled = f"n = {g.n} checkpoint differences from {g.seeds} seed{'s' if g.seeds != 1 else ''}"
    within = (f"{g.mean:+.4f} ± {g.sd:.4f}, {pooled}: {g.verdict}" if g.sd is not None else
              f"{g.mean:+.4f}, {pooled}: {g.verdict}")
    return [interval_text(v), signs_text(v.get("positive", 0), v.get("negative", 0), v.get("n", 0)), verdict,
            equivalence_text(g), within]


def equivalence_text(g: Gain) -> str:
    """A difference row's equivalence cell (``–`` where there is none to read)."""
    e = g.equivalence
    if e is None or g.seed_verdict == NOT_TESTABLE:
        return "–"
    if e["verdict"] == "no margin":
        return f"no margin: {e['how']}"
    m = f"±{e['margin']:.3g}"
    if e["interval"] is None:
        return f"{m}: one seed, no test"
    lo, hi = e["interval"]
    iv = f"90 % [{lo:+.3g}, {hi:+.3g}]"
    words = {"equivalent": f"equivalent within {m}", "different": "different",
             "different, within the margin": f"different, but within {m}", "inconclusive": "inconclusive"}
    return f"{words[e['verdict']]} ({iv} vs {m})"


def chance_text(t: dict | None) -> str:
    """The numbers behind "not testable at this scale": each arm's final value against the chance level."""
    if not t:
        return ""
    parts = []
    for arm, a in t["arms"].items():
        if a["mean"] is None:
            parts.append(f"{arm} –")
        elif a["interval"] is not None:
            parts.append(f"{arm} {a['mean']:.4g} [{a['interval'][0]:.4g}, {a['interval'][1]:.4g}] (n={a['n']})")
        else:
            band = "" if a["band"] is None else f" ± {a['band']:.2g} over the window's checkpoints"
            parts.append(f"{arm} {a['mean']:.4g}{band} (one seed)")
    return f"chance {t['chance']:.4g}; " + ", ".join(parts) + ": no arm clears chance beyond noise"


@SECTIONS.register("efficiency")
class TokenEfficiency(_Standard):
    """Tokens each arm needs to reach the target on each metric's axis, and the tokens saved."""

    order = -10

    def lines(self, ctx: SectionContext, rep: Report) -> list[str]:
        untestable = {(g.arm, g.metric) for g in rep.stable_gain if g.seed_verdict == NOT_TESTABLE}
        return efficiency_lines(rep.token_efficiency, rep.baseline, untestable)


def _saved(e: Efficiency, key: str, pct: bool = False) -> str:
    """A saving with its t interval over the seeds that reach the target; not a number without an interval."""
    t = e.saved.get(key)
    if t is None or t["mean"] is None:
        return "–"
    if t["interval"] is None:
        return "one seed: no interval"
    f = (lambda v: f"{v:+.1%}") if pct else (lambda v: f"{v:+,.0f}")  # noqa: E731
    return f"{f(t['mean'])} [{f(t['interval'][0])}, {f(t['interval'][1])}] (n={t['n']})"


def efficiency_lines(efficiency: list[Efficiency], baseline: str, untestable: set | None = None) -> list[str]:
    """Markdown: the token-efficiency table, one row per arm and metric with the crossing rule it used; each
    saving with its 95 % t interval over the seeds that reach the target (one such seed: no number), and none
    on a comparison ``untestable`` names (``(arm, metric)`` pairs not testable at this scale)."""
    if not efficiency:
        return []
    untestable = untestable or set()
    lines = ["## Token efficiency",
             f"Tokens (on the metric's axis) each arm needs to reach the target: {baseline}'s final value "
             "unless `report.efficiency.targets` gives a value or `baseline@<step>` (each seed against "
             f"{baseline}'s run of the same seed; targets listed per seed; linear interpolation between "
             "checkpoints; mean over the seeds that reach it). The rule column says when a curve reaches the "
             "target: **stays** = at the checkpoint from which it stays at or past the target to its end (a "
             "curve that touches the target and falls back never reaches it), **first** = at its first "
             "checkpoint there, whatever follows (`report.efficiency.crossing`). \"saved\" = baseline − arm "
             "tokens and 1 − arm/baseline, each seed's own, then their mean with its 95 % Student-t interval over "
             "the n seeds that reach the target (one such seed: no interval, so no number; the seeds that do not "
             "reach it are not in it); \"incl. PPT\" also charges the arm its pre-pretraining tokens (language "
             "axis only). A seed is **not comparable** (n.c.) when either curve is already at the target at its "
             "first checkpoint on the axis (the crossing happened before, under another stage or none): "
             "it counts as not reached. A comparison not testable at this scale (difference table) has no saving.",
             "",
             "| arm | metric | axis | target | rule | reached (seeds) | baseline tokens | arm tokens | "
             "saved tokens | saved | saved incl. PPT |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in efficiency:
        f = lambda v: "–" if v is None else f"{v:,.0f}"  # noqa: E731
        tg = " / ".join(f"{t:.4g}" for t in e.targets) + f" ({e.target_spec})"
        nc = f" ({e.not_comparable} n.c.)" if e.not_comparable else ""
        nc += f" (left out: non-finite values in {', '.join(e.nonfinite)})" if e.nonfinite else ""
        if (e.arm, e.metric) in untestable:
            saved = ["not testable"] * 3
        else:
            incl = "–" if e.saved_tokens_incl_ppt is None else _saved(e, "tokens_incl_ppt") \
                if e.saved["tokens_incl_ppt"]["interval"] is None else \
                f"{_saved(e, 'tokens_incl_ppt')} ({_saved(e, 'fraction_incl_ppt', True)})"
            saved = [_saved(e, "tokens"), _saved(e, "fraction", True), incl]
        lines.append(f"| {e.arm} | {e.metric} | {axis_label(e.axis)} | {tg} | {e.crossing} "
                     f"| {e.reached}/{e.seeds}{nc} | {f(e.base_tokens)} | {f(e.arm_tokens)} | " + " | ".join(saved)
                     + " |")
    return lines
