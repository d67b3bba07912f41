"""Collect, the report's first step: every run's logged and evaluated numbers, read from disk.

:func:`collect` reads each run's ``metrics.jsonl`` (val losses, the token accounts) and its evaluation
summaries into a :class:`~preschool.analysis.records.SeedRun` per arm and seed; :func:`add_downstream_average`
adds the ``downstream/*`` averages to them. A value that is not finite is set aside (``nonfinite``), never a
point: one such value makes the run's metric unusable (a curve through it has no mean, and one without it
would pass over the failure).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from typing import Any

from ..errors import ConfigError
from ..layout import arm_runs, checkpoints_dir, done_path, is_done, read_metrics
from .records import Collected, NonfiniteValue, Point, RunCost, SeedRun

DOWNSTREAM = "downstream/avg"


def point(row: dict, value: float) -> Point:
    """One checkpoint of a curve with its token accounting and the stage it belongs to (a val row names
    it; a checkpoint's is the last stage of its ``tokens_by_stage``). Older runs lack the per-source
    counts and the stage (None)."""
    pt = row.get("pt_tokens")
    pt = row.get("tokens") if pt is None else pt
    return Point(step=int(row["step"]), pt=int(pt or 0), stage=stage_of(row), sources=row.get("tokens_by_source"),
                 value=float(value))


def stage_of(row: dict) -> str | None:
    """The stage a logged row belongs to: the one it names, else the last of its ``tokens_by_stage``."""
    if row.get("stage") is not None:
        return row["stage"]
    by_stage = row.get("tokens_by_stage")
    return next(reversed(by_stage)) if by_stage else None


def collect(cfg) -> Collected:
    """Every run of the arm x seed grid: its val losses (metrics.jsonl), evaluator metrics (evals/), the
    tokens each stage trained per source and the PPT tokens it trained (:func:`ppt_tokens`)."""
    from ..evals.runner import collect_results

    arms: dict[str, dict[Any, SeedRun]] = {}
    stages = {arm.name: cfg.train_config(arm, cfg.seeds[0]).stages for arm in cfg.arms}
    for arm, seed, run_dir in arm_runs(cfg.out_dir, cfg.arms, cfg.seeds, cfg.rung):  # a ladder: the rung's runs
        points: dict[str, dict[int, Point]] = defaultdict(dict)
        setups: dict[str, str] = {}
        directions: dict[str, bool] = {}
        reported: set[str] = set()
        total_tokens = 0
        rows = read_metrics(run_dir)
        accounts = []  # rows with a token account: where each stage ended, per source
        for r in rows:
            total_tokens = max(total_tokens, int(r.get("tokens", 0)))
            if r.get("event") != "val":
                continue
            accounts.append(r)
            for k, v in r.items():
                if k.startswith("val/"):
                    # keyed by step so a resumed run's repeated rows collapse to one point
                    points[k][int(r["step"])] = point(r, v)
        if checkpoints_dir(run_dir).is_dir():
            for r in collect_results(run_dir):
                m = f"{r['evaluator']}/{r['metric']}"
                points[m][int(r["step"])] = point(r, r["value"])
                accounts.append(r)
                directions[m] = r["higher_is_better"]
                if r["reported"]:
                    reported.add(m)
                if r.get("setup"):
                    setups[r["evaluator"]] = r["setup"]
        done = is_done(run_dir)
        nonfinite = _take_nonfinite(points)
        arms.setdefault(arm.name, {})[seed] = SeedRun(
            run_dir=str(run_dir), done=done, total_tokens=total_tokens,
            ppt_tokens=ppt_tokens([r for r in rows if r.get("event") == "train"], stages[arm.name], done),
            doses=stage_doses(accounts, [st.name for st in stages[arm.name]]), setups=setups,
            higher_is_better=directions, reported=tuple(sorted(reported)),
            points={k: tuple(p for _, p in sorted(d.items())) for k, d in points.items()}, nonfinite=nonfinite,
            cost=run_cost(run_dir) if done else None)
    return Collected(arms)


def run_cost(run_dir) -> RunCost:
    """A finished run's training FLOPs and parameters, from the ``DONE`` the trainer wrote (None for what an
    older trainer did not record)."""
    from ..io import read_json

    done = read_json(done_path(run_dir))
    model = done.get("model") or {}
    flops = done.get("flops")
    return RunCost(flops=None if flops is None else float(flops),
                   params=None if model.get("params_total") is None else int(model["params_total"]),
                   params_non_embedding=(None if model.get("params_non_embedding") is None
                                         else int(model["params_non_embedding"])))


def _take_nonfinite(points: dict[str, dict[int, Point]]) -> dict[str, list]:
    """Remove from ``points`` (metric -> step -> point, still being built) every metric with a value that is
    not finite; return them as metric -> ``[[step, "nan" | "inf" | "-inf"], ...]``."""
    out = {}
    for m in [m for m, d in points.items() if any(not math.isfinite(p.value) for p in d.values())]:
        out[m] = [[step, str(p.value)] for step, p in sorted(points.pop(m).items()) if not math.isfinite(p.value)]
    return out


def nonfinite_values(collected: Collected) -> list[NonfiniteValue]:
    """Every non-finite value the runs logged, in arm, seed, metric order."""
    return [NonfiniteValue(name, seed, m, step, v)
            for name, seeds in collected.arms.items() for seed, s in seeds.items()
            for m, bad in sorted(s.nonfinite.items()) for step, v in bad]


def stage_doses(rows: list[dict], stage_names: list[str]) -> dict[str, dict[str, int]]:
    """Tokens each stage trained from each source, as the run logged them: the ``tokens_by_source``
    of the last row logged in a stage (validation runs and checkpoints are written at every stage's
    end) minus that of the stage before. Stages without a logged row (or runs too old to log per-source
    counts) are left out."""
    last: dict[str, tuple[int, dict]] = {}
    for r in rows:
        st, by_source = stage_of(r), r.get("tokens_by_source")
        if st is None or by_source is None:
            continue
        if st not in last or int(r["step"]) >= last[st][0]:
            last[st] = (int(r["step"]), by_source)
    out: dict[str, dict[str, int]] = {}
    before: dict = {}
    for name in stage_names:
        if name not in last:
            continue
        now = last[name][1]
        out[name] = {s: int(t - before.get(s, 0)) for s, t in now.items() if t - before.get(s, 0)}
        before = now
    return out


def last_pt(stages) -> int:
    """Index of the last stage that counts as PT (language) tokens; -1 when none does."""
    return max((j for j, st in enumerate(stages) if st.counts_as_pt), default=-1)


def ppt_tokens(train_rows: list[dict], stages, done: bool) -> int | None:
    """Non-language tokens a run trained before the end of its last PT stage (charged as PPT tokens):
    ``tokens - pt_tokens`` of the train row that closes that stage (the trainer logs every stage's last
    step), so whole stages that do not count as PT and the synthetic share of PT mixtures are counted as
    trained (whole steps, the mixture's exact per-batch counts), not as budgeted. None before that row."""
    end = last_pt(stages)
    if end < 0:
        return 0
    k = max((k for k, r in enumerate(train_rows) if r.get("stage") == stages[end].name), default=None)
    # the stage is closed once a later stage has logged or the run is done (not when it stopped mid-stage)
    if k is None or not (k < len(train_rows) - 1 or done):
        return None
    return int(train_rows[k]["tokens"] - train_rows[k]["pt_tokens"])


def add_downstream_average(collected: Collected, downstream) -> Collected:
    """``collected`` with ``downstream/avg`` (and ``downstream/<group>`` per named group) added to every run:
    per checkpoint, the mean of the ``report.efficiency.downstream`` metrics (checkpoints scored on all of them).

    ``downstream`` is a list of metrics (``downstream/avg`` is their mean) or named groups
    (:class:`~preschool.experiment.DownstreamGroups`: each group's mean is ``downstream/<group>``, and
    ``downstream/avg`` the mean of the group means, or with ``average: tasks`` of every metric). Each average's
    direction is its components' (``higher_is_better`` as their evaluators recorded it); averaging metrics of
    opposite directions raises ConfigError naming ``report.efficiency.downstream``.
    """
    if isinstance(downstream, (list, tuple)):
        groups, flat = {}, list(downstream)
    else:
        groups, flat = downstream.groups, downstream.metrics()
    if not flat:
        return collected
    arms = {}
    for name, seeds in collected.arms.items():
        arms[name] = {}
        for seed, s in seeds.items():
            for g, metrics in groups.items():
                s = _with_mean(s, f"downstream/{g}", metrics)
            if groups and downstream.average == "groups":
                s = _with_mean(s, DOWNSTREAM, [f"downstream/{g}" for g in groups])
            else:
                s = _with_mean(s, DOWNSTREAM, flat)
            arms[name][seed] = s
    return Collected(arms)


def _with_mean(s: SeedRun, name: str, metrics: list[str]) -> SeedRun:
    """``s`` with ``points[name]``: the per-checkpoint mean of ``metrics`` at the steps all of them have (or,
    when one of them logged a non-finite value, with ``name`` non-finite too: an average over it is not a
    number either)."""
    bad = sorted(v for m in metrics for v in s.nonfinite.get(m, []))
    if bad:
        return replace(s, nonfinite={**s.nonfinite, name: bad})
    by_step = [{p.step: p for p in s.points.get(m, ())} for m in metrics]
    steps = sorted(set.intersection(*(set(d) for d in by_step)))
    if not steps:
        return s
    dirs = {m: s.higher_is_better.get(m, True) for m in metrics}
    if len(set(dirs.values())) > 1:
        raise ConfigError("report.efficiency.downstream", f"{name} averages metrics of opposite directions: "
                          + ", ".join(f"{m} ({'higher' if h else 'lower'} is better)" for m, h in dirs.items()))
    mean = tuple(replace(by_step[0][t], value=sum(d[t].value for d in by_step) / len(metrics)) for t in steps)
    return replace(s, points={**s.points, name: mean}, reported=(*s.reported, name),
                   higher_is_better={**s.higher_is_better, name: next(iter(dirs.values()))})
