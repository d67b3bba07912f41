"""Re-render a report from its ``results.json`` alone (``preschool report --from-results``): no run folders.

A committed study (docs/results/<study>/) keeps ``report.md``, ``results.json`` and its plots, not its run
folders. ``results.json`` stores what the report's numbers come from: the config, the code version and data
manifests of the runs, and every run's curves (arm x seed x metric, on the metric's axis) with the facts the
standard tables read (stage ends, final stage and step, doses, PPT tokens, setups, non-finite values). This
module rebuilds the computed :class:`~preschool.analysis.records.Report` from those (:func:`stored_report`),
so the standard tables, the minimal-pair breakdowns and the ladder section are recomputed with today's rules
(the crossing rule of the token efficiency, the verdicts, the ladder statistics) from the numbers the runs
produced. The provenance stays the stored one: the config and code version that produced the runs.

What cannot be re-rendered is refused in one line naming the file: a ``results.json`` of the retired
compartments runner (no ``arms.<arm>.seeds``), and an experiment whose report needs a section that reads
run files results.json does not hold (:meth:`~preschool.analysis.sections.Section.stored_gap`: a section
with ``reads_runs``, or a :class:`~preschool.analysis.sections.GatheredSection` such as the compartments
sections whose ``results.json`` predates its stored ``inputs``), and a ladder whose ``results.json``
predates ``sections.ladder.rung_results`` (each rung's costs, per-seed finals and stable-gain rows, which a
ladder report stores for its re-render), and a token-efficiency target at a baseline step (``baseline@<step>``:
the curves are stored by tokens, not steps). A ``results.json`` written before a
field existed is read with what it has: curves without stage names give no final-stage table, a report
without ``axes`` / ``directions`` takes each metric's axis from the config (:func:`metric_axes`), its headline
metrics from the stored table's columns and each one's direction from its evaluator
(``Evaluator.higher_is_better``), and one without per-run PPT tokens those of its efficiency rows.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import DataError
from .records import NonfiniteValue, Report, SeedResult


def stored_seed(seeds, key) -> Any:
    """A seed as ``results.json`` stores it (a JSON object key is a string: ``"0"``) as the config names it
    (``0``), given the config's ``seeds``; a key that names none of them stays as it is."""
    return next((s for s in seeds if str(s) == str(key)), key)


def _seed_result(d: dict, charged: int = 0) -> SeedResult:
    """A run's :class:`SeedResult` from its ``results.json`` entry (fields it predates take their defaults;
    ``charged``: the PPT tokens of a report that kept them per efficiency row, not per run)."""
    return SeedResult(run_dir=d.get("run_dir", ""), done=bool(d.get("done", True)),
                      total_tokens=int(d.get("total_tokens", 0)), ppt_tokens=d.get("ppt_tokens", charged),
                      doses=d.get("doses") or {}, setups=d.get("setups") or {}, nonfinite=d.get("nonfinite") or {},
                      curves=d.get("curves") or {}, stage_ends=d.get("stage_ends") or {},
                      final_stage=d.get("final_stage") or {}, final_step=d.get("final_step") or {})


def _one_stage(s: SeedResult, stages: list) -> SeedResult:
    """``s`` with the stage facts a ``results.json`` from before stage names lacks, where the config alone
    settles them: an arm of one stage ends every curve there, and a stage of one dataset trained all the run's
    tokens from it. Runs of several stages keep what is stored (none: no final-stage or doses rows)."""
    from dataclasses import replace

    if s.stage_ends or len(stages) != 1:
        return s
    st = stages[0]
    ends = {m: {st.name: c[-1][1]} for m, c in s.curves.items() if c}
    doses = s.doses or ({st.name: {st.datasets[0]: s.total_tokens}} if len(st.datasets) == 1 else {})
    return replace(s, stage_ends=ends, final_stage={m: st.name for m in ends}, doses=doses)


def _higher(metric: str) -> bool | None:
    """Whether higher is better for ``metric`` by today's rule: a val loss is lower-is-better, an evaluator
    metric goes its evaluator class's declared way (None: it declares none, or the evaluator is not
    registered here: shown, not judged)."""
    from ..evals import EVALUATORS

    name, _, rest = metric.partition("/")
    if name == "val":
        return False
    return EVALUATORS.get(name).cls.direction(rest) if rest and name in EVALUATORS else None


def stored_report(runs: Sequence, stored: dict, report, data: Mapping[str, Any]) -> Report:
    """The computed report of the run records ``runs`` from what ``stored`` (a ``results.json``) holds of them:
    each run's curves and facts as stored, then the final table, later stages, differences and token
    efficiency computed again (analysis/compute.py), so today's rules apply to the stored numbers; ``report``
    and ``data``: the experiment's ``report:`` settings and datasets."""
    from .compute import (after_stage_rows, arm_stages, efficiency_rows, final_table, metric_axes, metric_chances,
                          stable_gains, task_datasets)

    names = list(dict.fromkeys(rec.arm for rec in runs))
    seed_order = list(dict.fromkeys(rec.seed for rec in runs))  # the config's seeds
    missing = [n for n in names if n not in stored["arms"]]
    if missing:
        raise DataError(f"arms {missing} of its config have no stored runs")
    stages = arm_stages(runs)
    arms: dict[str, dict[Any, SeedResult]] = {}
    charged = {e["arm"]: e.get("ppt_tokens") for e in stored.get("token_efficiency") or []}
    for name in names:
        arms[name] = {stored_seed(seed_order, k): _one_stage(_seed_result(d, charged.get(name) or 0), stages[name])
                      for k, d in stored["arms"][name]["seeds"].items()}
    metric_names = sorted({m for seeds in arms.values() for s in seeds.values() for m in [*s.curves, *s.nonfinite]})
    # a results.json before `axes`: the config's choice
    axes = metric_axes(data, report.axes, metric_names, task_datasets(runs, data))
    axes.update({m: a["axis"] for m, a in (stored.get("axes") or {}).items()})
    if stored.get("directions"):
        headline = list(stored["directions"])
        higher = {m: None if d is None else d == "higher" for m, d in stored["directions"].items()}
    else:  # before `directions`: the stored table's columns, each in its evaluator's direction
        headline = [m for m in (stored.get("table") or [{}])[0] if m in metric_names]
        higher = {m: _higher(m) for m in metric_names}
    baseline = report.baseline or names[0]
    table = final_table(arms, names, headline, stages)
    chance = metric_chances(runs, report, headline)  # today's declarations, as every other rule
    nonfinite = [NonfiniteValue(r["arm"], stored_seed(seed_order, r["seed"]), r["metric"], r["step"], r["value"])
                 for r in stored.get("nonfinite") or []]
    return Report(names=names, baseline=baseline, stages=stages, metric_names=metric_names, headline=headline,
                  higher=higher, arms=arms, table=table, axes=axes, nonfinite=nonfinite,
                  setups=dict(stored.get("setups") or {}), after_stages=after_stage_rows(table, headline, stages),
                  stable_gain=stable_gains(arms, names, baseline, headline, axes, higher, report.window, chance,
                                           report.equivalence),
                  token_efficiency=efficiency_rows(report.efficiency, names, arms, baseline, headline, axes, higher),
                  window=report.window, chance=chance, starts=dict(stored.get("starts") or {}))


def stored_provenance(stored: dict) -> dict:
    """The provenance block of the runs (config, code version, data manifests) as ``stored`` holds it."""
    return {k: stored[k] for k in ("code_version", "config", "data_manifests") if k in stored}


def stored_rungs(stored: dict, rep: Report, seeds: list) -> list:
    """A ladder's :class:`~preschool.analysis.records.Rung` records from ``stored``'s
    ``sections.ladder.rung_results`` (analysis/ladder.py ``rung_json``): each arm's cost and finished runs'
    final values as stored, and per rung a report holding its headline metrics, their directions and its
    stable-gain rows (the rung ``rep`` is of keeps ``rep``, computed again); seeds as the config names them."""
    from .records import Gain, Rung, RungArm

    rung_of = (stored.get("config") or {}).get("rung")
    out = []
    for r in ((stored.get("sections") or {}).get("ladder") or {}).get("rung_results") or []:  # [] without a ladder
        arms = {a: RungArm(flops=d["flops"], params=d["params"], params_non_embedding=d["params_non_embedding"],
                           finals={stored_seed(seeds, k): v for k, v in d["seeds"].items()},
                           unfinished=d["unfinished"], no_flops=d["no_flops"], runs={})
                for a, d in r["arms"].items()}
        if r["rung"] == rung_of:
            out.append(Rung(name=r["rung"], arms=arms, report=rep))
            continue
        out.append(Rung(name=r["rung"], arms=arms, report=Report(
            names=list(arms) or rep.names, baseline=rep.baseline, stages={}, metric_names=list(r["headline"]),
            headline=list(r["headline"]), higher=dict(r["higher"]), arms={}, table=[], axes={}, nonfinite=[],
            setups={}, after_stages=[], stable_gain=[Gain(**g) for g in r["stable_gain"]], token_efficiency=[],
            window=rep.window)))
    return out
