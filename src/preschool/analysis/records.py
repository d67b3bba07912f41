"""What the report pipeline passes on: the frozen records :func:`~preschool.analysis.collect.collect` and
:func:`~preschool.analysis.compute.compute` return and every report section reads (``ctx.report``).

Collect reads each run into a :class:`SeedRun` (its logged and evaluated :class:`Point` s per metric);
compute turns those into a :class:`Report`: each run's curves on its metric's axis (:class:`SeedResult`),
the final-value table (:class:`TableRow`), the values after later stages (:class:`AfterStage`), the
difference from the baseline (:class:`Gain`), the token efficiency (:class:`Efficiency`) and the
non-finite values (:class:`NonfiniteValue`). No step edits a record: a step that adds to one returns a
new one (``dataclasses.replace``). The mappings inside a record belong to it: read them, never change them.

``Report.to_json()`` is the computed part of ``results.json`` (its keys and their order are that file's
contract: ``arms``, ``table``, ``axes``, ``nonfinite``, ``setups``, ``directions``, ``chance``, ``after_stages``,
``stable_gain``, ``token_efficiency``); the sections' results and the provenance follow it there.

A ladder's report also builds one :class:`Rung` per rung (each rung's own collect → compute, with the cost of
every finished run from its ``DONE``: :class:`RunCost`); the sections read them as ``ctx.ladder``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

MeanSd = tuple  # (mean, sd, n) over seeds, as stats.mean_sd returns it


def direction_word(higher: bool | None) -> str | None:
    """``"higher"`` / ``"lower"`` (is better), or None for a metric without a declared direction."""
    return None if higher is None else "higher" if higher else "lower"


def axis_label(axis: str) -> str:
    """How the report names an axis: ``"pt"`` is language tokens, a dataset its own tokens."""
    return "language (PT) tokens" if axis == "pt" else f"{axis} tokens"


class _Row:
    """A table row of ``results.json``: its fields in order, as they are (tuples become JSON lists)."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Point:
    """One logged value of a metric: a val row's or an evaluated checkpoint's, with the token accounting
    of that step (``pt``: language tokens; ``sources``: tokens per source, None in runs older than per-source
    counts; ``stage``: the stage the step belongs to, None in runs older than stage names)."""

    step: int
    pt: int
    stage: str | None
    sources: dict[str, int] | None
    value: float


@dataclass(frozen=True)
class RunCost:
    """What a finished run cost, as the trainer recorded it in its ``DONE``: training FLOPs (every stage,
    whole steps; ``train/flops.py``; None in a ``DONE`` written before the trainer kept them) and the model's
    parameters (None when the ``DONE`` has no model description)."""

    flops: float | None
    params: int | None
    params_non_embedding: int | None


@dataclass(frozen=True)
class SeedRun:
    """One run (arm x seed) as collect read it.

    ``points``: metric -> its points in step order (finite values only); ``nonfinite``: metric ->
    ``[[step, "nan" | "inf" | "-inf"], ...]`` for each metric that logged a value that is not a number
    (the metric has no points then); ``higher_is_better`` and ``reported``: each evaluator metric's
    direction and whether its evaluator headlines it; ``doses``: stage -> source -> tokens trained;
    ``ppt_tokens``: non-language tokens trained before the end of the last PT stage (None while that
    stage is open); ``setups``: evaluator label -> the preset / stimuli behind its numbers."""

    run_dir: str
    done: bool
    total_tokens: int
    ppt_tokens: int | None
    doses: dict[str, dict[str, int]]
    setups: dict[str, str]
    higher_is_better: dict[str, bool]
    reported: tuple[str, ...]
    points: dict[str, tuple[Point, ...]]
    nonfinite: dict[str, list]
    cost: RunCost | None = None  # None while the run is not done


@dataclass(frozen=True)
class Collected:
    """Every run of the experiment: arm -> seed -> :class:`SeedRun`, arms and seeds in config order."""

    arms: dict[str, dict[Any, SeedRun]]


@dataclass(frozen=True)
class SeedResult:
    """One run as the report computed it: the run's own facts (as in :class:`SeedRun`) and, per metric,
    its curve on the metric's axis.

    ``curves``: metric -> ``[[x, value], ...]`` up to the end of ``final_stage`` (the last stage that
    trains on the metric's axis; None when the run predates stage names or no stage trains the axis);
    ``final_step``: the step of the curve's last value; ``stage_ends``: metric -> stage -> the value at
    that stage's end (every stage that logged the metric, in stage order); ``points``: the collected
    points behind the curves (in ``results.json`` only through the curves)."""

    run_dir: str
    done: bool = True
    total_tokens: int = 0
    ppt_tokens: int | None = 0
    doses: dict[str, dict[str, int]] = field(default_factory=dict)
    setups: dict[str, str] = field(default_factory=dict)
    nonfinite: dict[str, list] = field(default_factory=dict)
    curves: dict[str, list] = field(default_factory=dict)
    stage_ends: dict[str, dict[str, float]] = field(default_factory=dict)
    final_stage: dict[str, str | None] = field(default_factory=dict)
    final_step: dict[str, int | None] = field(default_factory=dict)
    points: dict[str, tuple[Point, ...]] = field(default_factory=dict, repr=False)
    cost: RunCost | None = None  # the finished run's FLOPs and parameters (a ladder's section reads them)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("points", "cost")}


@dataclass(frozen=True)
class TableRow:
    """One arm's row of the results table: each headline metric's final value (``values``: metric ->
    (mean, sd, n) over the seeds with a value), the seeds left out for a non-finite value (``nonfinite``:
    metric -> seeds), the stage each value ends (``final_stage``, when the seeds agree) and every stage's
    end (``stage_ends``: metric -> stage -> (mean, sd, n))."""

    arm: str
    seeds: int
    done: bool
    total_tokens: int
    values: dict[str, MeanSd]
    nonfinite: dict[str, list]
    final_stage: dict[str, str | None]
    stage_ends: dict[str, dict[str, MeanSd]]

    def to_json(self) -> dict[str, Any]:
        return {"arm": self.arm, "seeds": self.seeds, "done": self.done, "total_tokens": self.total_tokens,
                **{m: list(v) for m, v in self.values.items()}, "nonfinite": self.nonfinite,
                "final_stage": self.final_stage, "stage_ends": self.stage_ends}


@dataclass(frozen=True)
class AfterStage(_Row):
    """A stage after a metric's final stage (DEPO after pretraining) and the metric's value at its end."""

    arm: str
    metric: str
    final_stage: str
    stage: str
    final: list  # (mean, sd, n) at the end of the final stage
    value: list  # (mean, sd, n) at the end of ``stage``
    change: float  # value's mean - final's mean


@dataclass(frozen=True)
class Gain(_Row):
    """The difference of an arm from the baseline on one metric over the last ``report.window`` of the
    metric's axis (sign flipped for lower-is-better metrics), with two verdicts.

    The **seed-level** one (the report's verdict): ``per_seed`` is each seed pair's effect (seed -> the mean of
    its per-checkpoint differences over the window), ``seed_level`` the Student-t interval over them
    (:func:`~preschool.analysis.stats.seed_interval`), ``seed_verdict`` its words (``gain``, ``harm``, ``no
    difference shown``, ``one seed: no seed-level verdict``, ``not testable at this scale``, ``not judged: no
    declared direction``, ``not compared``); ``testability`` (None for a metric without a chance level) says
    whether any arm is beyond noise of chance, ``equivalence`` the two one-sided tests against the margin
    (:func:`~preschool.analysis.stats.equivalence`; None without a margin).

    The **verify-ppt within-run rule**: ``mean``, ``sd`` and ``n`` of the per-checkpoint differences pooled
    over the ``seeds`` seed pairs, ``stable`` / ``stable_harm`` and ``verdict`` by the one-SD rule. ``nonfinite``
    names the ``"<arm> seed <k>"`` left out (``mean`` None and verdict ``not compared`` when none is left)."""

    arm: str
    metric: str
    axis: str
    mean: float | None
    sd: float | None
    n: int
    stable: bool
    stable_harm: bool
    verdict: str
    seeds: int
    nonfinite: list
    per_seed: dict = field(default_factory=dict)
    seed_level: dict | None = None
    seed_verdict: str = ""
    testability: dict | None = None
    equivalence: dict | None = None


@dataclass(frozen=True)
class Efficiency(_Row):
    """Tokens (on the metric's axis) an arm needs to reach the target, against the baseline's, with the
    crossing rule used; the token means are over the seeds that reach it (None when none does), and
    ``saved`` holds the Student-t interval over those seeds of each saving (``tokens``, ``fraction``,
    ``tokens_incl_ppt``, ``fraction_incl_ppt``; :func:`~preschool.analysis.stats.t_interval`): a saving is
    printed with its interval, or not as a number."""

    arm: str
    metric: str
    axis: str
    crossing: str
    ppt_tokens: int
    seeds: int
    reached: int
    nonfinite: list
    not_comparable: int
    target_spec: str
    target: float | None
    targets: list
    base_tokens: float | None
    arm_tokens: float | None
    saved_tokens: float | None
    saved_tokens_incl_ppt: float | None
    saved_fraction: float | None
    saved_fraction_incl_ppt: float | None
    saved: dict = field(default_factory=dict)


@dataclass(frozen=True)
class NonfiniteValue(_Row):
    """A logged value that is not a number (``value``: ``"nan"``, ``"inf"`` or ``"-inf"``)."""

    arm: str
    seed: Any
    metric: str
    step: int
    value: str


@dataclass(frozen=True)
class Report:
    """The computed report, as every section reads it (``ctx.report``).

    ``names``: the arms in config order; ``baseline``: the arm compared against; ``stages``: arm -> its
    stage configs (``name``, ``data``, ``tokens``, ``counts_as_pt``, ``schedule``, ``group``, ...);
    ``metric_names``: every metric some run logged; ``headline``: the metrics the tables, plots, gains and
    efficiency carry; ``higher``: metric -> higher is better (None: its evaluator declares no direction, so
    the metric is shown and not judged); ``chance``: metric -> its chance level, for the metrics that have
    one; ``arms``: arm -> seed -> :class:`SeedResult`;
    ``axes``: metric -> ``"pt"`` or the dataset whose tokens are its x axis; ``setups``: evaluator label ->
    its setup; ``window``: the share of each axis the gains are taken over (``report.window``)."""

    names: list[str]
    baseline: str
    stages: dict[str, list]
    metric_names: list[str]
    headline: list[str]
    higher: dict[str, bool]
    arms: dict[str, dict[Any, SeedResult]]
    table: list[TableRow]
    axes: dict[str, str]
    nonfinite: list[NonfiniteValue]
    setups: dict[str, str]
    after_stages: list[AfterStage]
    stable_gain: list[Gain]
    token_efficiency: list[Efficiency]
    window: float
    chance: dict[str, float] = field(default_factory=dict)
    starts: dict[str, str] = field(default_factory=dict)  # arm -> where its runs started, in words (analysis/starts.py)

    @property
    def directions(self) -> dict[str, str | None]:
        """Each headline metric's direction as ``results.json`` words it (``"higher"`` / ``"lower"``; None
        when its evaluator declares none)."""
        return {m: direction_word(self.higher.get(m)) for m in self.headline}

    def seed_results(self, arm: str) -> dict[Any, SeedResult]:
        """``{seed: SeedResult}`` of ``arm`` ({} for an arm without runs)."""
        return self.arms.get(arm, {})

    def to_json(self) -> dict[str, Any]:
        """The computed part of ``results.json`` (see the module docstring), plain data."""
        return {"arms": {name: {"seeds": {s: r.to_json() for s, r in seeds.items()}}
                         for name, seeds in self.arms.items()},
                "table": [r.to_json() for r in self.table],
                "axes": {m: {"axis": self.axes.get(m, "pt"), "label": axis_label(self.axes.get(m, "pt"))}
                         for m in self.metric_names},
                "nonfinite": [r.to_json() for r in self.nonfinite],
                "setups": self.setups, "directions": self.directions,
                "chance": {m: v for m, v in self.chance.items() if m in self.headline},
                "after_stages": [r.to_json() for r in self.after_stages],
                "stable_gain": [r.to_json() for r in self.stable_gain],
                "token_efficiency": [r.to_json() for r in self.token_efficiency],
                # only where an arm started from other weights or a shared prefix (results.json as before else)
                **({"starts": self.starts} if self.starts else {})}


@dataclass(frozen=True)
class RungArm:
    """One arm at one rung of a ladder: its cost (a finished run's; every seed trains the same model and
    budget), each finished run's final headline values and every run's folder.

    ``finals``: seed -> metric -> final value, of the runs that finished with a FLOPs record (an unfinished
    run's last value is not the rung's); ``unfinished``: the seeds whose run logged but did not finish;
    ``no_flops``: finished seeds whose ``DONE`` predates the FLOPs record (left out of ``finals``);
    ``runs``: seed -> run folder of every run that logged anything (a section that reads files reads them)."""

    flops: float | None
    params: int | None
    params_non_embedding: int | None
    finals: dict[Any, dict[str, float]]
    unfinished: list
    no_flops: list
    runs: dict[Any, str]

    def to_json(self) -> dict[str, Any]:
        return {"flops": self.flops, "params": self.params, "params_non_embedding": self.params_non_embedding,
                "seeds": sorted(self.finals, key=str), "unfinished": self.unfinished, "no_flops": self.no_flops}


@dataclass(frozen=True)
class Rung:
    """One rung of a ladder as the report pipeline computed it: its name, each arm's :class:`RungArm` (arms in
    config order) and the rung's own :class:`Report` (its curves, gains and verdicts)."""

    name: str
    arms: dict[str, RungArm]
    report: Report

    @property
    def finished(self) -> bool:
        """Whether any arm has a finished run to read at this rung."""
        return any(a.finals for a in self.arms.values())

    @property
    def flops(self) -> float:
        """The largest training FLOPs of one run at this rung (what orders the rungs); 0 without any."""
        return max((a.flops for a in self.arms.values() if a.flops is not None), default=0.0)
