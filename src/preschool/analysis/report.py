"""The experiment report: ``report.md`` + ``results.json`` + PNG plots.

Reads what the other steps left on disk (each arm's ``metrics.jsonl`` and
cached evaluation summaries), so it can be rebuilt at any time with
``preschool report``. Every number in the report is in ``results.json``
together with the config, code version and data manifests that produced it.

Each metric is plotted and compared on its own token axis (``metric_axes``):
language metrics (held-out loss on natural text, minimal pairs, downstream
tasks) against *language tokens* (``pt_tokens``: tokens of stages with
``counts_as_pt``, only the language share of a mixture), so a pre-pretraining
stage sits at zero and arms are compared at equal natural-text budgets; a
synthetic task's metrics (its held-out loss, the evaluator of the same name,
e.g. DEPO accuracy) against *that task's own tokens* (``tokens_by_source``),
which draws its acquisition curve and compares arms at equal task exposure.
``report.axes`` overrides the choice per metric prefix. The table, the plots
and ``results.json`` (``axes``) say which axis each metric uses, and the
evaluation setup (preset, stimuli) behind every evaluator's numbers.

A value that is not finite (a NaN or infinite val loss, an evaluator's NaN) is never a number of the
report: the run's metric that logged one is left out of every table, difference and plot (its other
seeds still count), each such value is listed under "Non-finite values" (``results.json``:
``nonfinite``), and every row it was left out of says so. ``results.json`` is strict JSON (``null``
where there is no value).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..io import provenance, read_json, remove_orphan_temp_files, write_json, write_text
from ..layout import (PLOTS, REPORT, RESULTS, arm_runs, checkpoints_dir, data_manifest_path, is_done, plots_dir,
                      read_metrics, report_path, results_path)
from .sections import SectionContext, run_sections


def _point(row: dict, value: float) -> dict:
    """One checkpoint of a curve with its token accounting and the stage it belongs to (a val row names
    it; a checkpoint's is the last stage of its ``tokens_by_stage``). Older runs lack the per-source
    counts and the stage (None)."""
    pt = row.get("pt_tokens")
    pt = row.get("tokens") if pt is None else pt
    return {"step": int(row["step"]), "pt": int(pt or 0), "stage": _stage_of(row),
            "sources": row.get("tokens_by_source"), "value": float(value)}


def _stage_of(row: dict) -> str | None:
    if row.get("stage") is not None:
        return row["stage"]
    by_stage = row.get("tokens_by_stage")
    return next(reversed(by_stage)) if by_stage else None


def collect(cfg) -> dict[str, Any]:
    """Gather points per arm and seed: val losses from metrics.jsonl, eval metrics from evals/, and the
    PPT tokens each run trained (:func:`_ppt_tokens`, from the same metrics.jsonl read).

    A point is ``{step, pt, sources, value}``; :func:`build_curves` turns points into
    ``[x, value]`` curves on each metric's axis.
    """
    from ..evals.runner import collect_results

    arms: dict[str, dict] = {}
    stages = {arm.name: cfg.train_config(arm, cfg.seeds[0]).stages for arm in cfg.arms}
    for arm, seed, run_dir in arm_runs(cfg.out_dir, cfg.arms, cfg.seeds, cfg.rung):  # a ladder: the rung's runs
        a = arms.setdefault(arm.name, {"seeds": {}})
        points: dict[str, dict[int, dict]] = defaultdict(dict)
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
                    points[k][int(r["step"])] = _point(r, v)
        if checkpoints_dir(run_dir).is_dir():
            for r in collect_results(run_dir):
                m = f"{r['evaluator']}/{r['metric']}"
                points[m][int(r["step"])] = _point(r, r["value"])
                accounts.append(r)
                directions[m] = r["higher_is_better"]
                if r["reported"]:
                    reported.add(m)
                if r.get("setup"):
                    setups[r["evaluator"]] = r["setup"]
        done = is_done(run_dir)
        nonfinite = _take_nonfinite(points)
        a["seeds"][seed] = {
            "run_dir": str(run_dir),
            "done": done,
            "total_tokens": total_tokens,
            "ppt_tokens": _ppt_tokens([r for r in rows if r.get("event") == "train"], stages[arm.name], done),
            "doses": stage_doses(accounts, [st.name for st in stages[arm.name]]),
            "setups": setups,
            "higher_is_better": directions,
            "reported": sorted(reported),
            "points": {k: [p for _, p in sorted(d.items())] for k, d in points.items()},
            "nonfinite": nonfinite,
        }
    return arms


def _take_nonfinite(points: dict[str, dict[int, dict]]) -> dict[str, list]:
    """Remove from ``points`` (metric -> step -> point) every metric with a value that is not finite;
    return them as metric -> ``[[step, "nan" | "inf" | "-inf"], ...]``. One such value makes the run's
    metric unusable: a curve through it has no mean, and one without it would pass over the failure."""
    out = {}
    for m in [m for m, d in points.items() if any(not math.isfinite(p["value"]) for p in d.values())]:
        out[m] = [[step, str(p["value"])] for step, p in sorted(points.pop(m).items()) if not math.isfinite(p["value"])]
    return out


def nonfinite_rows(arms: dict) -> list[dict]:
    """Every non-finite value the runs logged: ``{arm, seed, metric, step, value}`` in arm, seed, metric order."""
    return [{"arm": name, "seed": seed, "metric": m, "step": step, "value": v}
            for name, a in arms.items() for seed, s in a["seeds"].items()
            for m, bad in sorted(s.get("nonfinite", {}).items()) for step, v in bad]


def stage_doses(rows: list[dict], stage_names: list[str]) -> dict[str, dict[str, int]]:
    """Tokens each stage trained from each source, as the run logged them: the ``tokens_by_source``
    of the last row logged in a stage (validation runs and checkpoints are written at every stage's
    end) minus that of the stage before. Stages without a logged row (or runs too old to log per-source
    counts) are left out."""
    last: dict[str, tuple[int, dict]] = {}
    for r in rows:
        st, by_source = _stage_of(r), r.get("tokens_by_source")
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


DOWNSTREAM = "downstream/avg"


def add_downstream_average(arms: dict, downstream) -> None:
    """Add ``downstream/avg`` (and ``downstream/<group>`` per named group): per checkpoint, the mean of the
    ``report.efficiency.downstream`` metrics (checkpoints scored on all of them).

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
        return
    for a in arms.values():
        for s in a["seeds"].values():
            for g, metrics in groups.items():
                _add_mean(s, f"downstream/{g}", metrics)
            if groups and downstream.average == "groups":
                _add_mean(s, DOWNSTREAM, [f"downstream/{g}" for g in groups])
            else:
                _add_mean(s, DOWNSTREAM, flat)


def _add_mean(s: dict, name: str, metrics: list[str]) -> None:
    """One seed's ``points[name]``: the per-checkpoint mean of ``metrics`` at the steps all of them have."""
    from ..errors import ConfigError

    bad = sorted(v for m in metrics for v in s.get("nonfinite", {}).get(m, []))
    if bad:  # an average over a non-finite value is not a number either
        s["nonfinite"][name] = bad
        return
    by_step = [{p["step"]: p for p in s["points"].get(m, [])} for m in metrics]
    steps = sorted(set.intersection(*(set(d) for d in by_step)))
    if not steps:
        return
    dirs = {m: s.get("higher_is_better", {}).get(m, True) for m in metrics}
    if len(set(dirs.values())) > 1:
        raise ConfigError("report.efficiency.downstream", f"{name} averages metrics of opposite directions: "
                          + ", ".join(f"{m} ({'higher' if h else 'lower'} is better)" for m, h in dirs.items()))
    s["points"][name] = [{**by_step[0][t], "value": sum(d[t]["value"] for d in by_step) / len(metrics)}
                         for t in steps]
    s.setdefault("higher_is_better", {})[name] = next(iter(dirs.values()))
    s.setdefault("reported", []).append(name)


def synthetic_datasets(cfg) -> set[str]:
    """The datasets of ``cfg.data`` made by a generator."""
    from ..synthetic.builder import GeneratorSpec

    return {name for name, spec in cfg.data.items() if isinstance(spec, GeneratorSpec)}


def task_datasets(cfg) -> set[str]:
    """Synthetic datasets trained as a *task stage*: after the last language (PT) stage of every arm
    that trains them (DEPO after pretraining). A pre-pretraining set (before or inside PT) is not one:
    its held-out loss is read for retention along the language axis."""
    synthetic = synthetic_datasets(cfg)
    after, before = set(), set()
    for arm in cfg.arms:
        stages = cfg.train_config(arm, cfg.seeds[0]).stages
        last_pt = _last_pt(stages)
        for j, st in enumerate(stages):
            (after if j > last_pt else before).update(set(st.datasets) & synthetic)
    return after - before


def metric_axes(cfg, metrics: list[str], tasks: set[str] | None = None) -> dict[str, str]:
    """The x axis of each metric: ``"pt"`` (language tokens) or the dataset whose own tokens count.

    ``report.axes`` wins (longest matching prefix); otherwise ``val/<dataset>`` of a
    synthetic dataset (task or pre-pretraining) uses that dataset's tokens (its loss
    falls as that dataset is trained, not as language is), an evaluator named like
    the generator of exactly one synthetic task dataset (:func:`task_datasets`;
    ``depo`` scoring the ``depo`` data) uses that dataset's tokens, so does an evaluator
    metric of one source named like a synthetic dataset (``heldout/loss/depo``), and
    everything else language tokens.
    """
    tasks = task_datasets(cfg) if tasks is None else tasks
    synthetic = synthetic_datasets(cfg)
    by_generator: dict[str, list[str]] = defaultdict(list)
    for name in sorted(tasks):
        by_generator[cfg.data[name].generator].append(name)
    out = {}
    for m in metrics:
        given = [p for p in cfg.report.axes if m == p or m.startswith(p + "/")]
        if given:
            out[m] = cfg.report.axes[max(given, key=len)]
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


def headline_metrics(arms: dict, metric_names: list[str]) -> tuple[list[str], dict[str, bool]]:
    """The metrics a report headlines (table column, plot, stable gain, token efficiency) and each
    metric's direction (``True``: higher is better); takes the per-seed ``higher_is_better`` and
    ``reported`` that :func:`collect` read out of the seeds.

    Validation losses (the trainer's held-out NLL: lower is better) and every evaluator metric its
    evaluator reports (:meth:`~preschool.evals.base.Evaluator.reported`: ``minimal_pairs/acc``,
    ``lm_eval/<task>/acc``, ...), in the direction the evaluator recorded; breakdowns (per phenomenon,
    per paradigm) and bookkeeping counts stay out.
    """
    higher = {m: False for m in metric_names if m.startswith("val/")}
    reported: set[str] = set()
    for a in arms.values():
        for s in a["seeds"].values():
            higher.update(s.pop("higher_is_better", {}))
            reported.update(s.pop("reported", []))
    headline = [m for m in metric_names if m.startswith("val/")] + sorted(
        m for m in reported if m in metric_names and not m.startswith("val/"))
    return headline, higher


def axis_label(axis: str) -> str:
    return "language (PT) tokens" if axis == "pt" else f"{axis} tokens"


def axis_stage_end(stages, axis: str) -> int | None:
    """Index of the last stage that trains on ``axis`` (``"pt"``: counts as PT; a dataset: reads it);
    None when no stage does."""
    return max((j for j, st in enumerate(stages)
                if (st.counts_as_pt if axis == "pt" else axis in st.datasets)), default=None)


def build_curves(arms: dict, axes: dict[str, str], stages: dict[str, list] | None = None) -> dict[str, str]:
    """Each seed's ``curves[metric] = [[x, value], ...]`` on the metric's axis; returns the axes used.

    With ``stages`` (arm -> its StageConfigs), a curve stops at the end of the last stage that
    trains on the metric's axis (:func:`axis_stage_end`): a later stage (DEPO after pretraining)
    changes the value at an unchanged x, and is reported as its own "after <stage>" value, never
    as the curve's end. Each seed also gets ``stage_ends[metric] = {stage: value at its end}``
    (every stage that logged the metric, in stage order), ``final_stage[metric]``, the stage
    whose end gives the curve's last value (None: the run predates stage names, or no stage trains
    on the axis and the whole curve is kept), and ``final_step[metric]``, the step of that value.

    A task axis needs every point's per-source counts; runs written before they
    existed fall back to language tokens for that metric.
    """
    used = dict(axes)
    for m, axis in axes.items():
        if axis == "pt":
            continue
        pts = [p for a in arms.values() for s in a["seeds"].values() for p in s["points"].get(m, [])]
        if any(p["sources"] is None for p in pts):
            used[m] = "pt"
    for name, a in arms.items():
        names = [st.name for st in (stages or {}).get(name, [])]
        for s in a["seeds"].values():
            s["curves"], s["stage_ends"], s["final_stage"], s["final_step"] = {}, {}, {}, {}
            for m, pts in s["points"].items():
                axis = used.get(m, "pt")
                ends = {p["stage"]: p["value"] for p in pts if p.get("stage") in names}  # the last of each stage
                s["stage_ends"][m] = {st: ends[st] for st in names if st in ends}
                cut = axis_stage_end(stages[name], axis) if names else None
                if cut is not None:
                    pts = [p for p in pts if p.get("stage") not in names or names.index(p["stage"]) <= cut]
                    s["final_stage"][m] = names[cut] if names[cut] in ends else None
                else:
                    s["final_stage"][m] = None
                s["curves"][m] = [[p["pt"] if axis == "pt" else int(p["sources"].get(axis, 0)), p["value"]]
                                  for p in pts]
                s["final_step"][m] = pts[-1]["step"] if pts else None
    return used


def _on_base_grid(arm: list, base: list) -> tuple[list, list, list]:
    """The arm's curve read at the baseline's checkpoints (linear interpolation inside the arm's range).

    Arms checkpoint at different PT-token counts when a PPT stage shifts their
    step counter, so curves are compared on the baseline's grid, never extrapolated.
    """
    import numpy as np

    if not arm or not base:
        return [], [], []
    # Stages that do not count as PT (a final DEPO stage, say) add checkpoints at the same
    # PT-token count; the comparison keeps the latest checkpoint at each count.
    arm, base = _last_per_x(arm), _last_per_x(base)
    ax = np.array([p[0] for p in arm], float)
    av = np.array([p[1] for p in arm], float)
    xs, a_out, b_out = [], [], []
    for x, v in base:
        if ax[0] <= x <= ax[-1]:
            xs.append(float(x))
            a_out.append(float(np.interp(x, ax, av)))
            b_out.append(float(v))
    return xs, a_out, b_out


def _last_per_x(points: list) -> list:
    """Points sorted by x, one per x: the last one given (curves arrive in step order)."""
    return sorted({float(x): float(v) for x, v in points}.items())


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


def _final(points: list) -> float:
    return points[-1][1] if points else float("nan")


def _common(values: list):
    """The value every seed agrees on, else None."""
    return values[0] if values and all(v == values[0] for v in values) else None


def _dose_lines(cfg, arms: dict, stages: dict[str, list]) -> list[str]:
    """Markdown: per arm, stage and source, the tokens planned (stage tokens x weight share) and trained."""
    rows = []
    for arm in cfg.arms:
        seeds = arms.get(arm.name, {}).get("seeds", {})
        for st in stages[arm.name]:
            weights = {st.data: 1.0} if isinstance(st.data, str) else dict(st.data)
            total = sum(weights.values())
            for src, w in weights.items():
                got = sorted({s["doses"][st.name].get(src, 0) for s in seeds.values() if st.name in s["doses"]})
                realised = " / ".join(f"{t:,}" for t in got) if got else "–"
                rows.append(f"| {arm.name} | {st.name} | {src} | {st.tokens * w / total:,.0f} | {realised} |")
    if not rows:
        return []
    return ["## Doses",
            "Tokens each stage trained from each source, as the runs logged them (`results.json`: each seed's "
            "`doses`), beside the plan (the stage's tokens × the source's weight share). A stage trains whole "
            "steps and a mixture carries each source's fractional rows from batch to batch, so the two agree to "
            "within a step's tokens in total and one row per source.", "",
            "| arm | stage | source | planned | trained |", "|---|---|---|---|---|", *rows, ""]


def write_report(cfg) -> Path:
    """Write ``report.md``, ``results.json`` and ``plots/*.png`` under the experiment folder.

    Collect (:func:`collect`: every run's logged and evaluated numbers) → compute (:func:`compute`: the
    standard tables) → sections (analysis/sections.py: those their evaluator's results switch on, then
    those ``report.sections`` names) → render (:func:`render`)."""
    from ..lock import config_key, output_lock

    arms = collect(cfg)
    add_downstream_average(arms, cfg.report.efficiency.downstream)
    rep = compute(cfg, arms)
    ctx = section_context(cfg, rep)
    # one report writer at a time (the same config waits), so the temp files of plots, report.md and
    # results.json that a killed report left are provably dead: removed here, not left forever
    with output_lock(ctx.plots, f"preschool report ({cfg.name})", key=config_key(cfg), beside=True):
        ctx.plots.mkdir(parents=True, exist_ok=True)
        remove_orphan_temp_files(ctx.plots)
        remove_orphan_temp_files(cfg.out_dir, [REPORT, RESULTS])
        return render(cfg, rep, ctx, run_sections(ctx, cfg.report.sections))


def compute(cfg, arms: dict) -> dict[str, Any]:
    """The standard tables from :func:`collect`'s ``arms``: curves on each metric's axis, final values
    (mean ± SD over seeds), values after later stages, stable gain and token efficiency against the
    baseline. Returns what ``results.json`` holds (``arms``, ``table``, ``axes``, ...) plus the names
    the rendering needs (``names``, ``baseline``, ``stages``, ``headline``, ``higher``)."""
    names = [a.name for a in cfg.arms]
    baseline = cfg.report.baseline or names[0]
    # a metric only non-finite values logged is still headlined, to say so
    metric_names = sorted({k for a in arms.values() for s in a["seeds"].values()
                           for k in [*s["points"], *s.get("nonfinite", {})]})
    stages = {arm.name: cfg.train_config(arm, cfg.seeds[0]).stages for arm in cfg.arms}
    axes = build_curves(arms, metric_axes(cfg, metric_names), stages)
    setups: dict[str, set] = defaultdict(set)
    for a in arms.values():
        for s in a["seeds"].values():
            for label, setup in s["setups"].items():
                setups[label].add(setup)
    headline, higher = headline_metrics(arms, metric_names)
    table = final_table(arms, names, headline, stages)
    return {"names": names, "baseline": baseline, "stages": stages, "metric_names": metric_names,
            "headline": headline, "higher": higher,
            "arms": arms, "table": table, "axes": axes, "nonfinite": nonfinite_rows(arms),
            "setups": {label: " / ".join(sorted(v)) for label, v in setups.items()},
            "directions": {m: "higher" if higher.get(m, True) else "lower" for m in headline},
            "after_stages": after_stage_rows(table, headline, stages),
            "stable_gain": stable_gains(arms, names, baseline, headline, axes, higher, cfg.report.window),
            "token_efficiency": efficiency_rows(cfg, arms, baseline, headline, axes, higher)}


def final_table(arms: dict, names: list[str], headline: list[str], stages: dict[str, list]) -> list[dict]:
    """One row per arm: each headline metric's final value as ``(mean, sd, n)`` over seeds, the stage it
    comes from (``final_stage``, when the seeds agree) and every stage's end (``stage_ends``)."""
    from .stats import mean_sd

    table = []
    for name in names:
        seeds = arms[name]["seeds"]
        row = {"arm": name, "seeds": len(seeds), "done": all(s["done"] for s in seeds.values()),
               "total_tokens": max(s["total_tokens"] for s in seeds.values())}
        for m in headline:
            vals = [_final(s["curves"].get(m, [])) for s in seeds.values()]
            row[m] = mean_sd(vals)
        row["nonfinite"] = {m: left for m in headline if (left := _nonfinite_seeds(seeds, m))}
        row["final_stage"] = {m: _common([s["final_stage"].get(m) for s in seeds.values()
                                          if m not in s.get("nonfinite", {})]) for m in headline}
        row["stage_ends"] = {m: {st: mean_sd([s["stage_ends"][m][st] for s in seeds.values()
                                               if st in s["stage_ends"].get(m, {})])
                                  for st in [x.name for x in stages[name]]
                                  if any(st in s["stage_ends"].get(m, {}) for s in seeds.values())}
                             for m in headline}
        table.append(row)
    return table


def _nonfinite_seeds(seeds: dict, m: str) -> list:
    """The seeds (of one arm's ``seeds``) whose metric ``m`` logged a non-finite value (it has no curve)."""
    return [seed for seed, s in seeds.items() if m in s.get("nonfinite", {})]


def _left_out(arms: dict, pairs: list[tuple[str, Any]], m: str) -> list[str]:
    """``"<arm> seed <k>"`` for each (arm, seed) of ``pairs`` whose metric ``m`` logged a non-finite value."""
    return [f"{name} seed {seed}" for name, seed in pairs
            if m in arms[name]["seeds"].get(seed, {}).get("nonfinite", {})]


def after_stage_rows(table: list[dict], headline: list[str], stages: dict[str, list]) -> list[dict]:
    """A stage after a metric's final stage (the last one on its axis): its own value, beside the headline one."""
    after = []
    for row in table:
        names_ = [x.name for x in stages[row["arm"]]]
        for m in headline:
            fin = row["final_stage"].get(m)
            if fin is None:
                continue
            for st, v in row["stage_ends"][m].items():
                if names_.index(st) > names_.index(fin):
                    after.append({"arm": row["arm"], "metric": m, "final_stage": fin, "stage": st,
                                  "final": list(row[m]), "value": list(v), "change": v[0] - row[m][0]})
    return after


def stable_gains(arms: dict, names: list[str], baseline: str, headline: list[str], axes: dict[str, str],
                 higher: dict[str, bool], window: float) -> list[dict]:
    """Per arm and metric, the difference from the baseline over the last ``window`` of the metric's axis
    (per seed at the baseline's checkpoints, then pooled) with the one-SD verdict. A seed where either run
    logged a non-finite value of the metric is left out and named (``nonfinite``); with none left the
    row's verdict is ``not compared``."""
    from .stats import mean_sd, one_sd_verdict, stable_gain

    gains = []
    for name in names:
        if name == baseline:
            continue
        for m in headline:
            deltas_all, per_seed, left_out = [], [], []
            for seed, s in arms[name]["seeds"].items():
                b = arms[baseline]["seeds"].get(seed)
                if bad := _left_out(arms, [(name, seed), (baseline, seed)], m):
                    left_out += bad
                    continue
                if b is None or m not in s["curves"] or m not in b["curves"]:
                    continue
                xs, av, bv = _on_base_grid(s["curves"][m], b["curves"][m])
                if not xs:
                    continue
                lo = xs[-1] * (1 - window)  # the last `window` of this metric's own axis
                g = stable_gain(xs, av, bv, window=(lo, xs[-1]), higher_is_better=higher.get(m, True))
                per_seed.append(g)
                deltas_all += list(g["deltas"])
            if per_seed:
                mean, sd, n = mean_sd(deltas_all)
                verdict = one_sd_verdict(mean, sd, n)
                gains.append({"arm": name, "metric": m, "axis": axes.get(m, "pt"), "mean": mean, "sd": sd, "n": n,
                              "stable": verdict == "above", "stable_harm": verdict == "below",
                              "verdict": _VERDICTS.get(verdict, "no stable difference"),
                              "seeds": len(per_seed), "nonfinite": left_out})
            elif left_out:
                gains.append({"arm": name, "metric": m, "axis": axes.get(m, "pt"), "mean": None, "sd": None, "n": 0,
                              "stable": False, "stable_harm": False, "verdict": "not compared", "seeds": 0,
                              "nonfinite": left_out})
    return gains


_VERDICTS = {"above": "stable gain", "below": "stable harm"}  # one_sd_verdict's, as the report words them


def efficiency_rows(cfg, arms: dict, baseline: str, headline: list[str], axes: dict[str, str],
                    higher: dict[str, bool]) -> list[dict]:
    """Per arm and metric, the tokens (on the metric's axis) it needs to reach the target
    (``report.efficiency.targets``; default the baseline's final value), each seed against the baseline's
    run of the same seed, and the tokens saved (charging PPT tokens on the language axis)."""
    from .efficiency import token_efficiency

    efficiency = []
    targets, crossing = cfg.report.efficiency.targets, cfg.report.efficiency.crossing
    for arm in cfg.arms:
        if arm.name == baseline:
            continue
        for m in headline:
            axis = axes.get(m, "pt")
            per_seed, charged, left_out = [], [], []
            for seed, sdata in arms[arm.name]["seeds"].items():
                b = arms[baseline]["seeds"].get(seed)
                if bad := _left_out(arms, [(arm.name, seed), (baseline, seed)], m):
                    left_out += bad
                    continue
                if b is None or not sdata["curves"].get(m) or not b["curves"].get(m):
                    continue
                extra = sdata["ppt_tokens"] if axis == "pt" else 0  # PPT tokens are charged against language tokens only
                if extra is None:  # this seed has not finished its last PT stage yet: nothing to charge it with
                    continue
                charged.append(extra)
                target = _target(targets.get(m), b.get("points", {}).get(m, []), m)
                e = token_efficiency(_last_per_x(b["curves"][m]), _last_per_x(sdata["curves"][m]), target=target,
                                     extra_tokens=extra, higher_is_better=higher.get(m, True), crossing=crossing)
                per_seed.append(e)
            if per_seed:
                reached = [e for e in per_seed if e["reached"]]
                spec = targets.get(m)
                efficiency.append({"arm": arm.name, "metric": m, "axis": axis, "crossing": crossing,
                                   "ppt_tokens": max(charged),
                                   "seeds": len(per_seed), "reached": len(reached), "nonfinite": left_out,
                                   "not_comparable": sum(not e["comparable"] for e in per_seed),
                                   "target_spec": "baseline final" if spec is None else str(spec),
                                   "target": per_seed[0]["target"], "targets": [e["target"] for e in per_seed],
                                   "base_tokens": _mean_of(reached, "base_tokens"),
                                   "arm_tokens": _mean_of(reached, "arm_tokens"),
                                   "saved_tokens": _mean_of(reached, "saved_tokens"),
                                   "saved_tokens_incl_ppt": _mean_of(reached, "saved_tokens_incl_ppt") if axis == "pt" else None,
                                   "saved_fraction": _mean_of(reached, "saved_fraction"),
                                   "saved_fraction_incl_ppt": _mean_of(reached, "saved_fraction_incl_ppt")
                                   if axis == "pt" else None})
    return efficiency


# what compute() returns for rendering only, not for results.json
_RENDER_ONLY = ("names", "baseline", "stages", "metric_names", "headline", "higher")


def section_context(cfg, rep: dict) -> SectionContext:
    """What the sections see: the experiment, the computed numbers and the evaluators that have results
    (label -> evaluator name: the experiment's ``evals`` name it, a label it does not list is its own name)."""
    from ..config import to_dict

    name_of = {spec.key: spec.name for spec in cfg.evals}
    labels = {m.split("/", 1)[0] for m in rep["metric_names"] if not m.startswith(("val/", "downstream/"))}
    return SectionContext(cfg.out_dir, to_dict(cfg), rep["names"], list(cfg.seeds), rep["baseline"],
                          [list(p) for p in cfg.report.compare],
                          results={k: v for k, v in rep.items() if k not in _RENDER_ONLY},
                          evaluators={label: name_of.get(label, label) for label in sorted(labels)},
                          ladder=cfg.ladder_views())


def render(cfg, rep: dict, ctx, sections: list) -> Path:
    """Write the headline plots, ``report.md`` (standard tables, then each section's lines, the plots,
    the provenance) and ``results.json``; returns the report's path."""
    out = cfg.out_dir
    figures = _headline_plots(out, rep) + ctx.figures
    lines = _standard_lines(cfg, rep)
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
    prov = provenance(cfg, data_manifests=_data_manifest(out))
    lines += ["## Provenance", "",
              f"- code: preschool {prov['code_version'].get('preschool')} "
              f"commit {prov['code_version'].get('git_commit', 'unknown')[:12]}"
              f"{' (dirty)' if prov['code_version'].get('git_dirty') else ''}",
              "- config: `experiment.yaml`; data manifest: `data/manifest.json`; every number: `results.json`", ""]
    for a in rep["arms"].values():  # curves carry the numbers; the raw points were only the means to them
        for sd in a["seeds"].values():
            sd.pop("points", None)
    results = {k: v for k, v in rep.items() if k not in _RENDER_ONLY}
    results["table"] = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()} for r in rep["table"]]
    results["axes"] = {m: {"axis": rep["axes"].get(m, "pt"), "label": axis_label(rep["axes"].get(m, "pt"))}
                       for m in rep["metric_names"]}
    write_json(results_path(out), _strict({**results, **top, "sections": results_of, **prov}))
    path = report_path(out)
    write_text(path, "\n".join(lines))
    return path


def _strict(obj: Any) -> Any:
    """``obj`` with every float that is not finite (a mean over no values) as None: JSON has no NaN, and
    readers other than Python's refuse the ``NaN`` it would write."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return obj


def _headline_plots(out: Path, rep: dict) -> list[tuple[str, str]]:
    """One plot per headline metric with a curve (each arm's seeds on the metric's axis); ``(title, path)``."""
    from . import plots

    pdir = plots_dir(out)
    figures = []
    arms, axes = rep["arms"], rep["axes"]
    for m in rep["headline"]:
        curves = {name: [s["curves"].get(m, []) for s in arms[name]["seeds"].values()] for name in rep["names"]}
        if not any(any(c) for c in curves.values()):
            continue
        fname = m.replace("/", "_") + ".png"
        ylim = _focus_ylim(curves) if not rep["higher"].get(m, True) else None
        setup = rep["setups"].get(m.split("/", 1)[0])
        plots.plot_metric_vs_tokens(curves, pdir / fname, title=m + (f" [{setup}]" if setup else ""), ylabel=m,
                                    xlabel=axis_label(axes.get(m, "pt")), ylim=ylim)
        figures.append((m, f"{PLOTS}/{fname}"))
    return figures


def _standard_lines(cfg, rep: dict) -> list[str]:
    """report.md up to the sections: arms, doses, axes, results, after later stages, gains, efficiency."""
    from .stats import format_mean_sd

    names, baseline, headline, axes = rep["names"], rep["baseline"], rep["headline"], rep["axes"]
    setup_of, table, after = rep["setups"], rep["table"], rep["after_stages"]
    gains, efficiency = rep["stable_gain"], rep["token_efficiency"]
    lines = [f"# {cfg.name}: report", ""]
    lines += [f"Arms: {', '.join(names)}; baseline for comparisons: **{baseline}**; training seeds: {list(cfg.seeds)}.",
              "Values are at the end of the last stage that trains on each metric's axis (its final stage: the "
              "`final stage` table), mean ± SD over seeds when there are several; a later stage's effect on a metric "
              "is its own row under \"After later stages\". Each evaluator states each metric's direction "
              "(lower is better for losses and perplexities, higher for accuracies).", ""]
    lines += _nonfinite_lines(rep["nonfinite"])
    lines += ["## Arms", ""]
    for arm in cfg.arms:
        tc = cfg.train_config(arm, cfg.seeds[0])
        steps, groups_seen = [], set()
        for st in tc.stages:
            data = st.data if isinstance(st.data, str) else " + ".join(f"{k}×{w:g}" for k, w in st.data.items())
            if st.group is not None and st.group in groups_seen:
                carry = f"resumes group '{st.group}' (its optimizer, schedule and data position)"
            else:
                carry = "fresh optimizer + schedule" if st.reset_optimizer else "optimizer carried over"
                if st.group is not None:
                    carry += f", schedule shared by group '{st.group}'"
            if st.group is not None:
                groups_seen.add(st.group)
            bits = [f"{st.tokens:,} tokens of {data}", st.schedule.name, carry, f"embeddings: {st.embeddings_at_start}"]
            if not st.counts_as_pt:
                bits.append("not counted as PT")
            steps.append(f"**{st.name}** ({', '.join(bits)})")
        lines.append(f"- `{arm.name}`: " + " → ".join(steps))
    lines.append("")
    lines += _dose_lines(cfg, rep["arms"], rep["stages"])
    lines += ["## Axes and evaluation setups",
              "Each metric is compared on its own token axis: language metrics against language (PT) tokens "
              "(a mixture counts only its language share), a synthetic task's metrics against that task's own "
              "tokens. The setup names the preset / stimuli that produced an evaluator's numbers.", "",
              "| metric | x axis | setup |", "|---|---|---|"]
    for m in headline:
        lines.append(f"| {m} | {axis_label(axes.get(m, 'pt'))} | {setup_of.get(m.split('/', 1)[0], '') or '–'} |")
    lines.append("")
    lines += ["## Results", ""]
    hdr = ["arm", "tokens trained"] + headline
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "---|" * len(hdr))
    for row in table:
        cells = [row["arm"] + ("" if row["done"] else " (unfinished)"), f"{row['total_tokens']:,}"]
        cells += [_result_cell(row, m) for m in headline]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += ["Final stage of each value (the last stage training on the metric's axis):", "",
              "| arm | " + " | ".join(headline) + " |", "|---|" + "---|" * len(headline)]
    for row in table:
        lines.append(f"| {row['arm']} | " + " | ".join(row["final_stage"].get(m) or "–" for m in headline) + " |")
    lines.append("")
    if after:
        lines += ["## After later stages",
                  "A stage after a metric's final stage (say DEPO after pretraining) leaves its axis where it was "
                  "and moves the metric: its value at that stage's end, beside the headline one. Curves, "
                  "differences and token efficiency use only checkpoints up to the end of the final stage.", "",
                  "| arm | metric | final (end of) | after | value | change |", "|---|---|---|---|---|---|"]
        for r in after:
            lines.append(f"| {r['arm']} | {r['metric']} | {format_mean_sd(*r['final'])} ({r['final_stage']}) | "
                         f"after {r['stage']} | {format_mean_sd(*r['value'])} | {r['change']:+.4f} |")
        lines.append("")
    if gains:
        lines += [f"## Difference from {baseline}",
                  f"Per-checkpoint difference (arm − baseline, sign flipped for losses so positive = better) over the "
                  f"last {cfg.report.window:.0%} of each metric's axis, at the baseline's checkpoints (the arm's curve "
                  f"is linearly interpolated there). A gain is **stable** when mean > SD (the verify-ppt one-SD "
                  f"rule); the same rule with the sign flipped flags a **stable harm**.", "",
                  "| arm | metric | axis | mean Δ | SD | n | verdict |", "|---|---|---|---|---|---|---|"]
        for g in gains:
            verdict, bad = g["verdict"], ", ".join(g["nonfinite"])
            if bad:
                verdict = f"not compared (non-finite values in {bad})" if verdict == "not compared" else \
                    f"{verdict}; left out: non-finite values in {bad}"
            mean, sd = ("–", "–") if g["mean"] is None else (f"{g['mean']:+.4f}", f"{g['sd']:.4f}")
            lines.append(f"| {g['arm']} | {g['metric']} | {axis_label(g['axis'])} | {mean} | {sd} "
                         f"| {g['n']} | {verdict} |")
        lines.append("")
    lines += efficiency_lines(efficiency, baseline)
    return lines


def efficiency_lines(efficiency: list[dict], baseline: str) -> list[str]:
    """Markdown: the token-efficiency table, one row per arm and metric with the crossing rule it used."""
    if not efficiency:
        return []
    lines = ["## Token efficiency",
             f"Tokens (on the metric's axis) each arm needs to reach the target: {baseline}'s final value "
             "unless `report.efficiency.targets` gives a value or `baseline@<step>` (each seed against "
             f"{baseline}'s run of the same seed; targets listed per seed; linear interpolation between "
             "checkpoints; mean over the seeds that reach it). The rule column says when a curve reaches the "
             "target: **stays** = at the checkpoint from which it stays at or past the target to its end (a "
             "curve that touches the target and falls back never reaches it), **first** = at its first "
             "checkpoint there, whatever follows (`report.efficiency.crossing`). \"saved\" = baseline − arm "
             "tokens and 1 − arm/baseline; \"incl. PPT\" also charges the arm its pre-pretraining tokens (language axis "
             "only). A seed is **not comparable** (n.c.) when either curve is already at the target at its "
             "first checkpoint on the axis (the crossing happened before, under another stage or none): "
             "it counts as not reached.", "",
             "| arm | metric | axis | target | rule | reached (seeds) | baseline tokens | arm tokens | "
             "saved tokens | saved | saved incl. PPT |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in efficiency:
        f = lambda v, pct=False: "–" if v is None else (f"{v:+.1%}" if pct else f"{v:,.0f}")  # noqa: E731
        tg = " / ".join(f"{t:.4g}" for t in e["targets"]) + f" ({e['target_spec']})"
        incl = "–" if e["saved_tokens_incl_ppt"] is None else \
            f"{f(e['saved_tokens_incl_ppt'])} ({f(e['saved_fraction_incl_ppt'], True)})"
        nc = f" ({e['not_comparable']} n.c.)" if e["not_comparable"] else ""
        nc += f" (left out: non-finite values in {', '.join(e['nonfinite'])})" if e["nonfinite"] else ""
        lines.append(f"| {e['arm']} | {e['metric']} | {axis_label(e['axis'])} | {tg} | {e['crossing']} "
                     f"| {e['reached']}/{e['seeds']}{nc} | "
                     f"{f(e['base_tokens'])} | {f(e['arm_tokens'])} | {f(e['saved_tokens'])} | "
                     f"{f(e['saved_fraction'], True)} | {incl} |")
    lines.append("")
    return lines


def _nonfinite_lines(rows: list[dict]) -> list[str]:
    """``report.md``'s list of the non-finite values the runs logged (nothing when there are none)."""
    if not rows:
        return []
    return ["## Non-finite values",
            "These logged values are not numbers: a run's metric with one is left out of the results, the "
            "differences from the baseline and the token efficiency (each row it is left out of says so; the "
            "other seeds still count), and its curve is not plotted. A NaN or infinite loss means the run "
            "diverged there: look at its `metrics.jsonl` before reading anything below.", "",
            "| arm | seed | metric | step | value |", "|---|---|---|---|---|",
            *(f"| {r['arm']} | {r['seed']} | {r['metric']} | {r['step']} | {r['value']} |" for r in rows), ""]


def _result_cell(row: dict, m: str) -> str:
    """A results-table cell: mean ± SD over the seeds, and the seeds left out for a non-finite value."""
    from .stats import format_mean_sd

    bad = row["nonfinite"].get(m)
    if not bad:
        return format_mean_sd(*row[m])
    if row[m][2] == 0:
        return "non-finite"
    return f"{format_mean_sd(*row[m])} (seed {', '.join(map(str, bad))} left out: non-finite)"


def _mean_of(rows: list[dict], key: str) -> float | None:
    """Mean of ``key`` over the rows that have it (a zero-token baseline has no saved fraction)."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def _last_pt(stages) -> int:
    """Index of the last stage that counts as PT (language) tokens; -1 when none does."""
    return max((j for j, st in enumerate(stages) if st.counts_as_pt), default=-1)


def _ppt_tokens(train_rows: list[dict], stages, done: bool) -> int | None:
    """Non-language tokens a run trained before the end of its last PT stage (charged as PPT tokens):
    ``tokens - pt_tokens`` of the train row that closes that stage (the trainer logs every stage's last
    step), so whole stages that do not count as PT and the synthetic share of PT mixtures are counted as
    trained (whole steps, the mixture's exact per-batch counts), not as budgeted. None before that row."""
    last_pt = _last_pt(stages)
    if last_pt < 0:
        return 0
    k = max((k for k, r in enumerate(train_rows) if r.get("stage") == stages[last_pt].name), default=None)
    # the stage is closed once a later stage has logged or the run is done (not when it stopped mid-stage)
    if k is None or not (k < len(train_rows) - 1 or done):
        return None
    return int(train_rows[k]["tokens"] - train_rows[k]["pt_tokens"])


def _target(spec, base_points: list, metric: str) -> float | None:
    """A token-efficiency target: None (the baseline's final value), a number, or 'baseline@<step>'."""
    from ..errors import ConfigError

    if spec is None or not isinstance(spec, str):
        return spec
    step = int(spec.split("@", 1)[1])
    at = [p["value"] for p in base_points if p["step"] == step]
    if not at:
        raise ConfigError(f"report.efficiency.targets.{metric}",
                          f"the baseline has no checkpoint at step {step} for {metric} "
                          f"(steps: {[p['step'] for p in base_points][:12]})")
    return at[-1]


def _data_manifest(out: Path) -> Any:
    p = data_manifest_path(out)
    return read_json(p) if p.is_file() else None
