"""Compute, the report's second step: the standard numbers from the collected runs.

:func:`compute` turns :func:`~preschool.analysis.collect.collect`'s runs into a
:class:`~preschool.analysis.records.Report`: each metric's curve on its own token axis (:func:`metric_axes`),
the final values (mean ± SD over seeds), the values after later stages, the difference from the baseline with
its seed-level verdict (a Student-t interval over the seed pairs' effects), testability against the metric's
chance level, equivalence against its margin and, beside them, the verify-ppt within-run rule, and the token
efficiency with each saving's interval over the seeds.

Each metric is compared on its own token axis: language metrics (held-out loss on natural text, minimal
pairs, downstream tasks) against *language tokens* (``pt_tokens``: tokens of stages with ``counts_as_pt``,
only the language share of a mixture), so a pre-pretraining stage sits at zero and arms are compared at
equal natural-text budgets; a synthetic task's metrics (its held-out loss, the evaluator of the same name,
e.g. DEPO accuracy) against *that task's own tokens* (``tokens_by_source``), which draws its acquisition
curve and compares arms at equal task exposure. ``report.axes`` overrides the choice per metric prefix.

A run's metric that logged a non-finite value has no curve: it is left out of every table, difference and
plot (its other seeds still count), and every row it was left out of says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Mapping, Sequence

from ..errors import ConfigError
from .collect import nonfinite_values
from .starts import arm_starts
from .records import (AfterStage, Collected, Efficiency, Gain, Point, Report, Rung, RungArm, SeedResult, SeedRun,
                      TableRow)


def synthetic_datasets(data: Mapping[str, Any]) -> set[str]:
    """The datasets of ``data`` (the experiment's ``data:``) made by a generator."""
    from ..synthetic.builder import GeneratorSpec

    return {name for name, spec in data.items() if isinstance(spec, GeneratorSpec)}


def arm_stages(runs: Sequence) -> dict[str, list]:
    """arm -> the stages its runs train (resolved: a ladder rung's budgets), read from the run records
    ``runs`` (the stages are the same for every seed)."""
    return {rec.arm: rec.train.stages for rec in runs}


def task_datasets(runs: Sequence, data: Mapping[str, Any]) -> set[str]:
    """Synthetic datasets of ``data`` trained as a *task stage* by the run records ``runs``: after the last
    language (PT) stage of every arm that trains them (DEPO after pretraining). A pre-pretraining set (before
    or inside PT) is not one: its held-out loss is read for retention along the language axis."""
    from .collect import last_pt

    synthetic = synthetic_datasets(data)
    after, before = set(), set()
    for stages in arm_stages(runs).values():
        end = last_pt(stages)
        for j, st in enumerate(stages):
            (after if j > end else before).update(set(st.datasets) & synthetic)
    return after - before


def metric_axes(data: Mapping[str, Any], given_axes: Mapping[str, str], metrics: list[str],
                tasks: set[str]) -> dict[str, str]:
    """The x axis of each metric: ``"pt"`` (language tokens) or the dataset whose own tokens count.

    ``given_axes`` (``report.axes``) wins (longest matching prefix); otherwise ``val/<dataset>`` of a
    synthetic dataset (task or pre-pretraining) uses that dataset's tokens (its loss
    falls as that dataset is trained, not as language is), an evaluator named like
    the generator of exactly one synthetic task dataset (``tasks``: :func:`task_datasets`;
    ``depo`` scoring the ``depo`` data) uses that dataset's tokens, so does an evaluator
    metric of one source named like a synthetic dataset (``heldout/loss/depo``), and
    everything else language tokens.
    """
    synthetic = synthetic_datasets(data)
    by_generator: dict[str, list[str]] = defaultdict(list)
    for name in sorted(tasks):
        by_generator[data[name].generator].append(name)
    out = {}
    for m in metrics:
        given = [p for p in given_axes if m == p or m.startswith(p + "/")]
        if given:
            out[m] = given_axes[max(given, key=len)]
        elif m.startswith("val/"):
            out[m] = m[4:] if m[4:] in synthetic else "pt"
        elif (source := _metric_source(m)) in synthetic:
            out[m] = source
        else:
            cands = by_generator.get(m.split("/", 1)[0], [])
            out[m] = cands[0] if len(cands) == 1 else "pt"
    return out


def _metric_source(metric: str) -> str | None:
    """The source an evaluator metric scores (:meth:`~preschool.evals.base.Evaluator.metric_source`:
    ``heldout/loss/depo`` scores ``depo``); None for other metrics and evaluators not registered here."""
    from ..evals import EVALUATORS

    name, _, rest = metric.partition("/")
    if not rest or name not in EVALUATORS:
        return None
    return EVALUATORS.get(name).cls.metric_source(rest)


def headline_metrics(collected: Collected, metric_names: list[str]) -> tuple[list[str], dict[str, bool | None]]:
    """The metrics a report headlines (table column, plot, stable gain, token efficiency) and each
    metric's direction (``True``: higher is better; None: its evaluator declares none, so the report shows
    it and judges nothing on it), from each run's ``higher_is_better`` and ``reported``.

    Validation losses (the trainer's held-out NLL: lower is better) and every evaluator metric its
    evaluator reports (:meth:`~preschool.evals.base.Evaluator.reported`: ``minimal_pairs/acc``,
    ``lm_eval/<task>/acc``, ...), in the direction the evaluator recorded; breakdowns (per phenomenon,
    per paradigm) and bookkeeping counts stay out.
    """
    higher: dict[str, bool | None] = {m: False for m in metric_names if m.startswith("val/")}
    reported: set[str] = set()
    for seeds in collected.arms.values():
        for s in seeds.values():
            higher.update(s.higher_is_better)
            reported.update(s.reported)
    headline = [m for m in metric_names if m.startswith("val/")] + sorted(
        m for m in reported if m in metric_names and not m.startswith("val/"))
    return headline, higher


def axis_stage_end(stages, axis: str) -> int | None:
    """Index of the last stage that trains on ``axis`` (``"pt"``: counts as PT; a dataset: reads it);
    None when no stage does."""
    return max((j for j, st in enumerate(stages)
                if (st.counts_as_pt if axis == "pt" else axis in st.datasets)), default=None)


def used_axes(collected: Collected, axes: dict[str, str]) -> dict[str, str]:
    """``axes`` as the curves can draw them: a task axis needs every point's per-source counts, so a metric
    with a point of a run written before they existed falls back to language tokens."""
    used = dict(axes)
    for m, axis in axes.items():
        if axis != "pt" and any(p.sources is None for seeds in collected.arms.values() for s in seeds.values()
                                for p in s.points.get(m, ())):
            used[m] = "pt"
    return used


def seed_result(s: SeedRun, axes: dict[str, str], stages: list | None = None) -> SeedResult:
    """One run's curves (``[[x, value], ...]`` on each metric's axis ``axes``) and their ends.

    With ``stages`` (the arm's StageConfigs), a curve stops at the end of the last stage that trains on
    the metric's axis (:func:`axis_stage_end`): a later stage (DEPO after pretraining) changes the value at
    an unchanged x, and is reported as its own "after <stage>" value, never as the curve's end. The result
    also holds each metric's ``stage_ends`` (every stage that logged it, in stage order), ``final_stage``
    (the stage whose end gives the curve's last value; None when the run predates stage names, or no stage
    trains on the axis and the whole curve is kept) and ``final_step`` (the step of that value).
    """
    names = [st.name for st in stages or []]
    curves, stage_ends, final_stage, final_step = {}, {}, {}, {}
    for m, pts in s.points.items():
        axis = axes.get(m, "pt")
        ends = {p.stage: p.value for p in pts if p.stage in names}  # the last of each stage
        stage_ends[m] = {st: ends[st] for st in names if st in ends}
        cut = axis_stage_end(stages, axis) if names else None
        if cut is not None:
            pts = tuple(p for p in pts if p.stage not in names or names.index(p.stage) <= cut)
            final_stage[m] = names[cut] if names[cut] in ends else None
        else:
            final_stage[m] = None
        curves[m] = [[p.pt if axis == "pt" else int(p.sources.get(axis, 0)), p.value] for p in pts]
        final_step[m] = pts[-1].step if pts else None
    return SeedResult(run_dir=s.run_dir, done=s.done, total_tokens=s.total_tokens, ppt_tokens=s.ppt_tokens,
                      doses=s.doses, setups=s.setups, nonfinite=s.nonfinite, curves=curves, stage_ends=stage_ends,
                      final_stage=final_stage, final_step=final_step, points=s.points, cost=s.cost)


def compute(runs: Sequence, collected: Collected, report, data: Mapping[str, Any]) -> Report:
    """The standard numbers of the report from the collected runs (see the module docstring): ``runs`` are the
    run records the report reads (:func:`~preschool.analysis.collect.collect`'s), ``report`` the experiment's
    ``report:`` settings and ``data`` its datasets."""
    names = list(dict.fromkeys(rec.arm for rec in runs))
    baseline = report.baseline or names[0]
    # a metric only non-finite values logged is still headlined, to say so
    metric_names = sorted({k for seeds in collected.arms.values() for s in seeds.values()
                           for k in [*s.points, *s.nonfinite]})
    stages = arm_stages(runs)
    axes = used_axes(collected, metric_axes(data, report.axes, metric_names, task_datasets(runs, data)))
    arms = {name: {seed: seed_result(s, axes, stages[name]) for seed, s in seeds.items()}
            for name, seeds in collected.arms.items()}
    setups: dict[str, set] = defaultdict(set)
    for seeds in collected.arms.values():
        for s in seeds.values():
            for label, setup in s.setups.items():
                setups[label].add(setup)
    headline, higher = headline_metrics(collected, metric_names)
    table = final_table(arms, names, headline, stages)
    chance = metric_chances(runs, report, headline)
    return Report(names=names, baseline=baseline, stages=stages, metric_names=metric_names, headline=headline,
                  higher=higher, arms=arms, table=table, axes=axes, nonfinite=nonfinite_values(collected),
                  setups={label: " / ".join(sorted(v)) for label, v in setups.items()},
                  after_stages=after_stage_rows(table, headline, stages),
                  stable_gain=stable_gains(arms, names, baseline, headline, axes, higher, report.window, chance,
                                           report.equivalence),
                  token_efficiency=efficiency_rows(report.efficiency, names, arms, baseline, headline, axes, higher),
                  window=report.window, chance=chance, starts=arm_starts(runs))


def ladder_rung(name: str, rep: Report) -> Rung:
    """One rung of a ladder from its computed report: per arm, the cost of its finished runs and each finished
    run's final headline values (:class:`~preschool.analysis.records.RungArm`). A run that has not finished is
    left out of the values (its final value is not the rung's) and listed; so is a finished run whose ``DONE``
    predates the FLOPs record."""
    arms = {}
    for arm in rep.names:
        finals, unfinished, no_flops, cost, runs = {}, [], [], None, {}
        for seed, s in rep.seed_results(arm).items():
            if s.curves or s.done:
                runs[seed] = s.run_dir
            if not s.done:
                if s.curves:
                    unfinished.append(seed)
                continue
            if s.cost is None or s.cost.flops is None:
                no_flops.append(seed)
                continue
            cost = s.cost
            finals[seed] = {m: c[-1][1] for m, c in s.curves.items() if c and m in rep.headline}
        arms[arm] = RungArm(flops=cost and cost.flops, params=cost and cost.params,
                            params_non_embedding=cost and cost.params_non_embedding, finals=finals,
                            unfinished=unfinished, no_flops=no_flops, runs=runs)
    return Rung(name=name, arms=arms, report=rep)


def _final(curve: list) -> float:
    return curve[-1][1] if curve else float("nan")


def _common(values: list):
    """The value every seed agrees on, else None."""
    return values[0] if values and all(v == values[0] for v in values) else None


def final_table(arms: dict[str, dict[Any, SeedResult]], names: list[str], headline: list[str],
                stages: dict[str, list]) -> list[TableRow]:
    """One row per arm: each headline metric's final value as ``(mean, sd, n)`` over seeds, the stage it
    comes from (``final_stage``, when the seeds agree) and every stage's end (``stage_ends``)."""
    from .stats import mean_sd

    table = []
    for name in names:
        seeds = arms[name]
        table.append(TableRow(
            arm=name, seeds=len(seeds), done=all(s.done for s in seeds.values()),
            total_tokens=max(s.total_tokens for s in seeds.values()),
            values={m: mean_sd([_final(s.curves.get(m, [])) for s in seeds.values()]) for m in headline},
            nonfinite={m: left for m in headline if (left := _nonfinite_seeds(seeds, m))},
            final_stage={m: _common([s.final_stage.get(m) for s in seeds.values() if m not in s.nonfinite])
                         for m in headline},
            stage_ends={m: {st: mean_sd([s.stage_ends[m][st] for s in seeds.values()
                                         if st in s.stage_ends.get(m, {})])
                            for st in [x.name for x in stages[name]]
                            if any(st in s.stage_ends.get(m, {}) for s in seeds.values())}
                        for m in headline}))
    return table


def _nonfinite_seeds(seeds: dict[Any, SeedResult], m: str) -> list:
    """The seeds (of one arm) whose metric ``m`` logged a non-finite value (it has no curve)."""
    return [seed for seed, s in seeds.items() if m in s.nonfinite]


def _left_out(arms: dict[str, dict[Any, SeedResult]], pairs: list[tuple[str, Any]], m: str) -> list[str]:
    """``"<arm> seed <k>"`` for each (arm, seed) of ``pairs`` whose metric ``m`` logged a non-finite value."""
    return [f"{name} seed {seed}" for name, seed in pairs if seed in arms[name] and m in arms[name][seed].nonfinite]


def after_stage_rows(table: list[TableRow], headline: list[str], stages: dict[str, list]) -> list[AfterStage]:
    """A stage after a metric's final stage (the last one on its axis): its own value, beside the headline one."""
    after = []
    for row in table:
        names_ = [x.name for x in stages[row.arm]]
        for m in headline:
            fin = row.final_stage.get(m)
            if fin is None:
                continue
            for st, v in row.stage_ends[m].items():
                if names_.index(st) > names_.index(fin):
                    after.append(AfterStage(row.arm, m, fin, st, list(row.values[m]), list(v),
                                            v[0] - row.values[m][0]))
    return after


def on_base_grid(arm: list, base: list) -> tuple[list, list, list]:
    """The arm's curve read at the baseline's checkpoints (linear interpolation inside the arm's range).

    Arms checkpoint at different PT-token counts when a PPT stage shifts their
    step counter, so curves are compared on the baseline's grid, never extrapolated.
    """
    import numpy as np

    if not arm or not base:
        return [], [], []
    # Stages that do not count as PT (a final DEPO stage, say) add checkpoints at the same
    # PT-token count; the comparison keeps the latest checkpoint at each count.
    arm, base = last_per_x(arm), last_per_x(base)
    ax = np.array([p[0] for p in arm], float)
    av = np.array([p[1] for p in arm], float)
    xs, a_out, b_out = [], [], []
    for x, v in base:
        if ax[0] <= x <= ax[-1]:
            xs.append(float(x))
            a_out.append(float(np.interp(x, ax, av)))
            b_out.append(float(v))
    return xs, a_out, b_out


def last_per_x(points: list) -> list:
    """Points sorted by x, one per x: the last one given (curves arrive in step order)."""
    return sorted({float(x): float(v) for x, v in points}.items())


_VERDICTS = {"above": "stable gain", "below": "stable harm"}  # one_sd_verdict's, as the report words them
SEED_VERDICTS = {"above": "gain", "below": "harm", "no difference shown": "no difference shown",
                 "one seed": "one seed: no seed-level verdict"}
NOT_TESTABLE = "not testable at this scale"
NOT_JUDGED = "not judged: no declared direction"


def metric_chances(runs: Sequence, report, metrics: list[str]) -> dict[str, float]:
    """Each metric's chance level, for those that have one: its evaluator's declaration
    (:meth:`~preschool.evals.base.Evaluator.chance_level`, given the params of the runs' ``evals`` entry; a
    metric's label is its ``evals`` entry's; ``report``: the experiment's ``report:`` settings), and for a ``downstream/*`` average the same average of its components' chance
    levels when every one has one (an average of chance scores is the average's chance score)."""
    from ..evals import EVALUATORS

    specs = {spec.key: spec for rec in runs[:1] for spec in rec.evals}  # every run has the experiment's evals
    out: dict[str, float] = {}
    for m in metrics:
        label, _, rest = m.partition("/")
        spec = specs.get(label)
        name = spec.name if spec is not None else label
        if rest and name in EVALUATORS:
            level = EVALUATORS.get(name).cls.chance_level(rest, dict(spec.params) if spec is not None else {})
            if level is not None:
                out[m] = level
    downstream = report.efficiency.downstream
    groups, flat = ({}, list(downstream)) if isinstance(downstream, (list, tuple)) else \
        (downstream.groups, downstream.metrics())

    def mean_of(ms: list[str]) -> float | None:
        return math.fsum(out[x] for x in ms) / len(ms) if ms and all(x in out for x in ms) else None

    for g, ms in groups.items():
        if (v := mean_of(ms)) is not None:
            out[f"downstream/{g}"] = v
    avg = mean_of([f"downstream/{g}" for g in groups]) if groups and downstream.average == "groups" else mean_of(flat)
    if avg is not None:
        from .collect import DOWNSTREAM

        out[DOWNSTREAM] = avg
    return out


def _finals(seeds: dict[Any, SeedResult], m: str) -> dict[Any, float]:
    """Each seed's final value of ``m`` (the last point of its curve)."""
    return {seed: s.curves[m][-1][1] for seed, s in seeds.items() if s.curves.get(m)}


def _window_sd(curve: list, window: float) -> float | None:
    """SD of a run's own values over the last ``window`` of its axis (the within-run noise of one seed)."""
    from .stats import mean_sd_over_checkpoints

    pts = last_per_x(curve)
    if len(pts) < 2:
        return None
    top = pts[-1][0]
    return mean_sd_over_checkpoints([x for x, _ in pts], [v for _, v in pts], window=(top * (1 - window), top))["sd"]


def arm_testability(arms: dict[str, dict[Any, SeedResult]], pair: list[str], m: str, chance: float,
                    higher: bool, window: float, level: float = 0.95) -> dict:
    """Whether any arm of ``pair`` ends beyond noise of ``m``'s ``chance`` level
    (:func:`~preschool.analysis.stats.testability`): each arm's final values over its seeds, their t interval;
    one seed's noise band is its own checkpoint SD over the last ``window`` (the within-run spread)."""
    from .stats import beyond_chance, testability

    said = {}
    for name in pair:
        finals = _finals(arms[name], m)
        band = None
        if len(finals) == 1:
            (seed,) = finals
            band = _window_sd(arms[name][seed].curves[m], window)
        said[name] = beyond_chance(list(finals.values()), chance, higher, level, band)
    return testability(said, chance)


def stable_gains(arms: dict[str, dict[Any, SeedResult]], names: list[str], baseline: str, headline: list[str],
                 axes: dict[str, str], higher: dict[str, bool | None], window: float,
                 chance: dict[str, float] | None = None, equivalence=None, level: float = 0.95) -> list[Gain]:
    """Per arm and metric, the difference from the baseline over the last ``window`` of the metric's axis, per
    seed at the baseline's checkpoints (see :class:`~preschool.analysis.records.Gain`):

    - the seed-level verdict: each seed pair's effect is the mean of its per-checkpoint differences over the
      window, and the verdict is the Student-t ``level`` interval over those effects
      (:func:`~preschool.analysis.stats.seed_interval`), unless every arm of the pair ends within noise of the
      metric's ``chance`` level (:func:`arm_testability`: "not testable at this scale");
    - equivalence against the margin ``equivalence`` gives the metric (an
      :class:`~preschool.analysis.margins.EquivalenceSpec`; None: none);
    - the verify-ppt within-run rule: the per-checkpoint differences pooled over the seeds, one-SD verdict.

    A metric whose evaluator declares no direction gets a row that says so and no verdict. A seed where either
    run logged a non-finite value of the metric is left out and named (``nonfinite``); with none left the row's
    verdict is ``not compared``. A metric whose axis the baseline never advances (a synthetic task's own tokens,
    which the baseline does not train on) gets no row: every baseline checkpoint sits at 0 of it."""
    from .stats import equivalence as tost
    from .stats import mean_sd, one_sd_verdict, seed_interval, stable_gain

    chance = chance or {}
    gains = []
    base_finals = {m: mean_sd(list(_finals(arms[baseline], m).values()))[0] for m in headline}
    for name in names:
        if name == baseline:
            continue
        for m in headline:
            axis = axes.get(m, "pt")
            if higher.get(m) is None:
                gains.append(Gain(name, m, axis, None, None, 0, False, False, "not judged", 0, [],
                                  seed_verdict=NOT_JUDGED))
                continue
            deltas_all, per_seed, left_out = [], {}, []
            for seed, s in arms[name].items():
                b = arms[baseline].get(seed)
                if bad := _left_out(arms, [(name, seed), (baseline, seed)], m):
                    left_out += bad
                    continue
                if b is None or m not in s.curves or m not in b.curves:
                    continue
                xs, av, bv = on_base_grid(s.curves[m], b.curves[m])
                if not xs or xs[-1] <= 0:  # the baseline never trained on this axis: no window to compare over
                    continue
                lo = xs[-1] * (1 - window)  # the last `window` of this metric's own axis
                g = stable_gain(xs, av, bv, window=(lo, xs[-1]), higher_is_better=higher[m])
                if g["mean"] is None:
                    continue
                per_seed[str(seed)] = g["mean"]
                deltas_all += list(g["deltas"])
            if not per_seed:
                if left_out:
                    gains.append(Gain(name, m, axis, None, None, 0, False, False, "not compared", 0, left_out,
                                      seed_verdict="not compared"))
                continue
            mean, sd, n = mean_sd(deltas_all)
            verdict = one_sd_verdict(mean, sd, n)
            seed_level = seed_interval(list(per_seed.values()), level)
            words = SEED_VERDICTS[seed_level["verdict"]]
            testable = None
            if m in chance:
                testable = arm_testability(arms, [baseline, name], m, chance[m], higher[m], window, level)
                if testable["verdict"] == "not testable":
                    words = NOT_TESTABLE
            equiv = None
            if equivalence is not None:
                margin, how = equivalence.margin(m, base_finals[m])
                equiv = {"margin": None, "how": how, "verdict": "no margin"} if margin is None else \
                    {**tost(list(per_seed.values()), margin, level), "how": how}
            gains.append(Gain(name, m, axis, mean, sd, n, verdict == "above", verdict == "below",
                              _VERDICTS.get(verdict, "no stable difference"), len(per_seed), left_out,
                              per_seed=per_seed, seed_level=seed_level, seed_verdict=words, testability=testable,
                              equivalence=equiv))
    return gains


def _target(spec, base_points: tuple[Point, ...], metric: str) -> float | None:
    """A token-efficiency target: None (the baseline's final value), a number, or 'baseline@<step>'."""
    if spec is None or not isinstance(spec, str):
        return spec
    step = int(spec.split("@", 1)[1])
    at = [p.value for p in base_points if p.step == step]
    if not at:
        raise ConfigError(f"report.efficiency.targets.{metric}",
                          f"the baseline has no checkpoint at step {step} for {metric} "
                          f"(steps: {[p.step for p in base_points][:12]})")
    return at[-1]


def _mean_of(rows: list[dict], key: str) -> float | None:
    """Mean of ``key`` over the rows that have it (a zero-token baseline has no saved fraction)."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    return math.fsum(vals) / len(vals) if vals else None


def efficiency_rows(settings, names: list[str], arms: dict[str, dict[Any, SeedResult]], baseline: str,
                    headline: list[str], axes: dict[str, str], higher: dict[str, bool | None],
                    level: float = 0.95) -> list[Efficiency]:
    """Per arm of ``names`` and metric with a declared direction, the tokens (on the metric's axis) it needs
    to reach the target (``settings``: ``report.efficiency``, its ``targets``, default the baseline's final
    value, and ``crossing``), each seed against the baseline's run of the same seed, and the tokens saved
    (charging PPT tokens on the language axis), each saving with its Student-t ``level`` interval over the
    seeds that reach the target."""
    from .efficiency import token_efficiency
    from .stats import t_interval

    efficiency = []
    targets, crossing = settings.targets, settings.crossing
    for name in names:
        if name == baseline:
            continue
        for m in headline:
            if higher.get(m) is None:  # no declared direction: nothing to reach
                continue
            axis = axes.get(m, "pt")
            per_seed, charged, left_out = [], [], []
            for seed, sdata in arms[name].items():
                b = arms[baseline].get(seed)
                if bad := _left_out(arms, [(name, seed), (baseline, seed)], m):
                    left_out += bad
                    continue
                if b is None or not sdata.curves.get(m) or not b.curves.get(m):
                    continue
                extra = sdata.ppt_tokens if axis == "pt" else 0  # PPT tokens are charged against language tokens only
                if extra is None:  # this seed has not finished its last PT stage yet: nothing to charge it with
                    continue
                charged.append(extra)
                target = _target(targets.get(m), b.points.get(m, ()), m)
                e = token_efficiency(last_per_x(b.curves[m]), last_per_x(sdata.curves[m]), target=target,
                                     extra_tokens=extra, higher_is_better=higher[m], crossing=crossing)
                per_seed.append(e)
            if per_seed:
                reached = [e for e in per_seed if e["reached"]]
                spec = targets.get(m)
                on_pt = axis == "pt"
                efficiency.append(Efficiency(
                    arm=name, metric=m, axis=axis, crossing=crossing, ppt_tokens=max(charged),
                    seeds=len(per_seed), reached=len(reached), nonfinite=left_out,
                    not_comparable=sum(not e["comparable"] for e in per_seed),
                    target_spec="baseline final" if spec is None else str(spec),
                    target=per_seed[0]["target"], targets=[e["target"] for e in per_seed],
                    base_tokens=_mean_of(reached, "base_tokens"), arm_tokens=_mean_of(reached, "arm_tokens"),
                    saved_tokens=_mean_of(reached, "saved_tokens"),
                    saved_tokens_incl_ppt=_mean_of(reached, "saved_tokens_incl_ppt") if on_pt else None,
                    saved_fraction=_mean_of(reached, "saved_fraction"),
                    saved_fraction_incl_ppt=_mean_of(reached, "saved_fraction_incl_ppt") if on_pt else None,
                    saved={key: t_interval([e[f"saved_{key}"] for e in reached], level)
                           for key in ("tokens", "fraction", *(("tokens_incl_ppt", "fraction_incl_ppt") if on_pt
                                                               else ()))}))
    return efficiency
