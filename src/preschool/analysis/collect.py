"""Collect, the report's first step: every run's logged and evaluated numbers, read from disk.

:func:`collect` reads each run's ``metrics.jsonl`` (val losses, the token accounts) and its evaluation
summaries into a :class:`~preschool.analysis.records.SeedRun` per arm and seed; :func:`add_downstream_average`
adds the ``downstream/*`` averages to them. A value that is not finite is set aside (``nonfinite``), never a
point: one such value makes the run's metric unusable (a curve through it has no mean, and one without it
would pass over the failure). A value that is not a number at all (``null``, ``true``, a string, a list) is
set aside the same way, listed with its JSON text, and named on stderr in one line (file, line, field): JSON's
``true`` is no 1.0. A row whose step or token account is not a whole number cannot be placed on any axis: it
is named the same way and left out.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from ..errors import ConfigError, DataError
from ..layout import (DONE, EVAL_SUMMARY, checkpoints_dir, done_path, evals_dir, is_done, metrics_lines, metrics_path)
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


def collect(runs: Sequence) -> Collected:
    """Every run of ``runs`` (the run records the report reads: an arm x seed grid, of a ladder one rung's):
    its val losses (metrics.jsonl), evaluator metrics (evals/), the tokens each stage trained per source and
    the PPT tokens it trained (:func:`ppt_tokens`). Values and rows it cannot use are named on stderr
    (:class:`Unusable`) and set aside."""
    from ..evals.runner import collect_results

    arms: dict[str, dict[Any, SeedRun]] = {}
    for rec in runs:
        seed, run_dir, stages = rec.seed, rec.run_dir, rec.train.stages
        points: dict[str, dict[int, Point]] = defaultdict(dict)
        shown: dict[str, dict[int, str]] = defaultdict(dict)  # metric -> step -> a non-number's JSON text
        setups: dict[str, str] = {}
        directions: dict[str, bool] = {}
        reported: set[str] = set()
        total_tokens = 0
        unusable = Unusable()
        path = metrics_path(run_dir)
        done = is_done(run_dir)
        if done and not path.is_file():  # reported, it would read as a run that trained 0 tokens
            raise DataError(f"{path}: missing, though the run finished ({DONE} is there): its curves and token "
                            f"counts cannot be reported; restore it, or delete {run_dir} to train the run again")
        lines = [(ln, r) for ln, r in metrics_lines(run_dir) if unusable.account(r, path, ln)]
        rows = [r for _, r in lines]
        accounts = []  # rows with a token account: where each stage ended, per source
        for ln, r in lines:
            total_tokens = max(total_tokens, int(r.get("tokens") or 0))
            if r.get("event") != "val":
                continue
            accounts.append(r)
            for k, v in r.items():
                if k.startswith("val/"):
                    # keyed by step so a resumed run's repeated rows collapse to one point
                    _add(points, shown, k, r, v, unusable.value(v, k, k, path, ln))
        if checkpoints_dir(run_dir).is_dir():
            for r in collect_results(run_dir):
                m = f"{r['evaluator']}/{r['metric']}"
                summary = evals_dir(run_dir, r["step"]) / r["evaluator"] / EVAL_SUMMARY
                if not unusable.account(r, summary):
                    continue
                _add(points, shown, m, r, r["value"], unusable.value(r["value"], f"metrics.{r['metric']}", m, summary))
                accounts.append(r)
                directions[m] = r["higher_is_better"]
                if r["reported"]:
                    reported.add(m)
                if r.get("setup"):
                    setups[r["evaluator"]] = r["setup"]
        cost = run_cost(run_dir, unusable) if done else None
        unusable.say()
        nonfinite = _take_nonfinite(points, shown)
        arms.setdefault(rec.arm, {})[seed] = SeedRun(
            run_dir=str(run_dir), done=done, total_tokens=total_tokens,
            ppt_tokens=ppt_tokens([r for r in rows if r.get("event") == "train"], stages, done),
            doses=stage_doses(accounts, [st.name for st in stages]), setups=setups,
            higher_is_better=directions, reported=tuple(sorted(reported)),
            points={k: tuple(p for _, p in sorted(d.items())) for k, d in points.items()}, nonfinite=nonfinite,
            cost=cost)
    return Collected(arms)


def _add(points: dict[str, dict[int, Point]], shown: dict[str, dict[int, str]], metric: str, row: dict,
         value: Any, number: float | None) -> None:
    """Put ``row``'s ``value`` of ``metric`` at its step (a later row of the same step replaces it): ``number``,
    or, for a value that is not a number (``number`` None), NaN with its JSON text kept for the listing."""
    step = int(row["step"])
    if number is None:
        shown[metric][step] = _json_text(value)
        number = math.nan
    else:
        shown[metric].pop(step, None)
    points[metric][step] = point(row, number)


def _json_text(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, allow_nan=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _whole(value: Any) -> bool:
    """Whether ``value`` is a whole number as JSON gives one (``6`` or ``6.0``; never ``true``)."""
    return not isinstance(value, bool) and (isinstance(value, int)
                                            or (isinstance(value, float) and value.is_integer()))


def _bad_field(row: dict) -> tuple[str, str] | None:
    """The first field of ``row``'s step and token account that is not what the trainer writes, as ``(field,
    what it should be)``, else None:
    a whole ``step`` (which a val row must have); whole ``tokens`` and ``pt_tokens`` (null: unknown, as an
    evaluation of an old checkpoint records them, but not in a train row, whose difference is its PPT
    tokens); a text ``stage``; mappings of whole numbers in ``tokens_by_source`` and ``tokens_by_stage``.
    Other fields absent or null are older runs'."""
    train = row.get("event") == "train"
    for k in ("step", "tokens", "pt_tokens"):
        if k in row or (k == "step" and row.get("event") == "val"):
            v = row.get(k)
            if not (_whole(v) or (v is None and k != "step" and not train)):
                return k, "a whole number"
    if not (row.get("stage") is None or isinstance(row["stage"], str)):
        return "stage", "a stage name"
    for k in ("tokens_by_source", "tokens_by_stage"):
        v = row.get(k)
        if v is not None and not (isinstance(v, dict) and all(_whole(x) for x in v.values())):
            return k, "a mapping of whole numbers"
    return None


class Unusable:
    """What one run's files hold that the report cannot use, named on stderr once per file and field:
    the first place, what it holds, and how many more (:meth:`say`)."""

    def __init__(self):
        # (file, field) -> [the first place ("file:line"), what it holds, what is done about it, how many more]
        self.seen: dict[tuple[Path, str], list] = {}

    def note(self, file: Path, line: int | None, field: str, value: Any, expected: str, what: str) -> None:
        """``field`` of ``file`` (at ``line``) holds ``value``, not ``expected``; ``what`` is done about it."""
        if (file, field) in self.seen:
            self.seen[file, field][3] += 1
        else:
            place = f"{file}:{line}" if line is not None else str(file)
            self.seen[file, field] = [place, f"{_json_text(value)}, not {expected}", what, 0]

    def account(self, row: dict, file: Path, line: int | None = None) -> bool:
        """Whether ``row`` (of ``file``, at ``line`` for JSON Lines) has a step and token account that can be
        used (:func:`_bad_field`); a row that has not is noted, and must be left out."""
        bad = _bad_field(row)
        if bad is not None:
            self.note(file, line, bad[0], row.get(bad[0]), bad[1], "the row is left out")
        return bad is None

    def value(self, value: Any, field: str, metric: str, file: Path, line: int | None = None) -> float | None:
        """``value`` (``field`` of ``file``) as a float when it is a JSON number (NaN and infinities included:
        :func:`_take_nonfinite` sets those aside), else None, noted: the run's ``metric`` is then left out as
        for a non-finite value; so is a whole number past a float's range (JSON has no limit)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:
                expected = "a number a float can hold"
        else:
            expected = "a number"
        self.note(file, line, field, value, expected, f"the run's {metric} is left out like a non-finite value")
        return None

    def say(self) -> None:
        """One line on stderr per file and field noted (a line this process said already is not repeated: the
        compartments sections read one run's rows several times)."""
        for (_, field), (place, holds, what, more) in self.seen.items():
            also = f" (and {more} more like it in this file)" if more else ""
            line = f"[preschool] report: {place}: {field} is {holds}{also}; {what}"
            if line not in _SAID:
                _SAID.add(line)
                print(line, file=sys.stderr, flush=True)


_SAID: set[str] = set()  # the lines Unusable.say has printed in this process


def val_rows(run_dir, missing_ok: bool = True) -> list[dict]:
    """A run's val rows as the report reads them, for a section that reads ``metrics.jsonl`` itself (the
    compartments sections): a row whose step or token account is no whole number is left out, and a ``val/*``
    value that is no number becomes NaN, which those sections drop as a non-finite value; each is named on
    stderr in one line (:class:`Unusable`). ``missing_ok``: as :func:`~preschool.layout.read_metrics`'s."""
    path, unusable = metrics_path(run_dir), Unusable()
    rows = []
    for ln, row in metrics_lines(run_dir, missing_ok):
        if row.get("event") != "val" or not unusable.account(row, path, ln):
            continue
        numbers = {k: unusable.value(v, k, k, path, ln) for k, v in row.items() if k.startswith("val/")}
        rows.append({**row, **{k: math.nan if v is None else v for k, v in numbers.items()}})
    unusable.say()
    return rows


def run_cost(run_dir, unusable: Unusable | None = None) -> RunCost:
    """A finished run's training FLOPs and parameters, from the ``DONE`` the trainer wrote (None for what an
    older trainer did not record, and for what is not a number: a ``DONE`` that is no JSON object, an empty
    one a hand or an older tool wrote, gives no cost at all). ``unusable`` notes what could not be read."""
    from ..io import UnreadableJSON, read_json

    path = done_path(run_dir)
    unusable = unusable or Unusable()
    try:
        done = read_json(path)
    except UnreadableJSON:
        done = None
    if not isinstance(done, dict):
        unusable.note(path, None, "the file", path.read_bytes()[:20].decode("utf-8", "replace"), "a JSON object",
                      "the run's cost (FLOPs, parameters) is left out")
        return RunCost(flops=None, params=None, params_non_embedding=None)
    model = done.get("model") if isinstance(done.get("model"), dict) else {}

    def number(where: dict, key: str, field: str, whole: bool):
        v = where.get(key)
        if v is None:
            return None
        if not (_whole(v) if whole else (isinstance(v, (int, float)) and not isinstance(v, bool))):
            unusable.note(path, None, field, v, "a whole number" if whole else "a number",
                          "the run's cost is left out")
            return None
        return int(v) if whole else float(v)

    return RunCost(flops=number(done, "flops", "flops", False),
                   params=number(model, "params_total", "model.params_total", True),
                   params_non_embedding=number(model, "params_non_embedding", "model.params_non_embedding", True))


def _take_nonfinite(points: dict[str, dict[int, Point]], shown: dict[str, dict[int, str]]) -> dict[str, list]:
    """Remove from ``points`` (metric -> step -> point, still being built) every metric with a value that is
    not finite; return them as metric -> ``[[step, "nan" | "inf" | "-inf" | a non-number's JSON text], ...]``."""
    out = {}
    for m in [m for m, d in points.items() if any(not math.isfinite(p.value) for p in d.values())]:
        out[m] = [[step, shown.get(m, {}).get(step, str(p.value))] for step, p in sorted(points.pop(m).items())
                  if not math.isfinite(p.value)]
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


def _direction_text(higher: bool | None) -> str:
    return "no declared direction" if higher is None else "higher is better" if higher else "lower is better"


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
    dirs = {m: s.higher_is_better.get(m) for m in metrics}
    if {True, False} <= set(dirs.values()):
        raise ConfigError("report.efficiency.downstream", f"{name} averages metrics of opposite directions: "
                          + ", ".join(f"{m} ({_direction_text(h)})" for m, h in dirs.items()))
    mean = tuple(replace(by_step[0][t], value=math.fsum(d[t].value for d in by_step) / len(metrics)) for t in steps)
    # one component without a declared direction: the average has none either (shown, not judged)
    direction = None if None in dirs.values() else next(iter(dirs.values()))
    return replace(s, points={**s.points, name: mean}, reported=(*s.reported, name),
                   higher_is_better={**s.higher_is_better, name: direction})
