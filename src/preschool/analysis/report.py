"""The experiment report: ``report.md`` + ``results.json`` + PNG plots.

Reads what the other steps left on disk (each arm's ``metrics.jsonl`` and
cached evaluation summaries), so it can be rebuilt at any time with
``preschool report``. Every number in the report is in ``results.json``
together with the config, code version and data manifests that produced it.

Curves are plotted against *PT tokens* (tokens of stages with
``counts_as_pt``), so a pre-pretraining stage sits left of zero's origin and
arms are compared at equal natural-text budgets.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ..io import provenance, read_json, write_json, write_text
from ..layout import arm_runs, checkpoints_dir, evals_dir, is_done, read_metrics


def collect(cfg) -> dict[str, Any]:
    """Gather curves per arm and seed: val losses from metrics.jsonl, eval metrics from evals/."""
    from ..evals.runner import collect_results

    arms: dict[str, dict] = {}
    for arm, seed, run_dir in arm_runs(cfg.out_dir, cfg.arms, cfg.seeds):
        a = arms.setdefault(arm.name, {"seeds": {}})
        rows = read_metrics(run_dir)
        curves: dict[str, dict[int, tuple[int, float]]] = defaultdict(dict)
        total_tokens = 0
        for r in rows:
            total_tokens = max(total_tokens, int(r.get("tokens", 0)))
            if r.get("event") != "val":
                continue
            for k, v in r.items():
                if k.startswith("val/"):
                    # keyed by step so a resumed run's repeated rows collapse to one point
                    curves[k][int(r["step"])] = (int(r.get("pt_tokens", r.get("tokens", 0))), float(v))
        evals: dict[str, dict[int, tuple[int, float]]] = defaultdict(dict)
        if checkpoints_dir(run_dir).is_dir():
            for r in collect_results(run_dir):
                evals[f"{r['evaluator']}/{r['metric']}"][int(r["step"])] = (int(r["pt_tokens"]), float(r["value"]))
        a["seeds"][seed] = {
            "run_dir": str(run_dir),
            "done": is_done(run_dir),
            "total_tokens": total_tokens,
            "curves": {k: [v for _, v in sorted(d.items())] for k, d in {**curves, **evals}.items()},
        }
    return arms


def _is_count(metric: str) -> bool:
    """Bookkeeping metrics (pair counts, ties) and micro-averages stay out of the headline table."""
    return metric.startswith("n_") or metric.startswith("ties") or metric.endswith("_micro")


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


def write_report(cfg) -> Path:
    """Write ``report.md``, ``results.json`` and ``plots/*.png`` under the experiment folder."""
    from . import plots
    from .efficiency import token_efficiency
    from .stats import format_mean_sd, mean_sd, one_sd_verdict, stable_gain

    out = cfg.out_dir
    arms = collect(cfg)
    names = [a.name for a in cfg.arms]
    baseline = cfg.report.baseline or names[0]
    metric_names = sorted({k for a in arms.values() for s in a["seeds"].values() for k in s["curves"]})
    # Headline metrics: validation losses and the overall minimal-pair accuracy; per-phenomenon
    # and per-paradigm breakdowns go to their own table/plot.
    headline = [m for m in metric_names if m.startswith("val/")] + [
        m for m in metric_names if not m.startswith("val/") and m.count("/") == 1
        and not _is_count(m.split("/", 1)[1])]
    lower_better = lambda m: m.startswith("val/") or any(  # noqa: E731
        k in m for k in ("loss", "nll", "ppl", "perplexity", "x_perc", "x_del", "surprisal"))

    # --- final values, mean ± SD over seeds
    table = []
    for name in names:
        seeds = arms[name]["seeds"]
        row = {"arm": name, "seeds": len(seeds), "done": all(s["done"] for s in seeds.values()),
               "total_tokens": max(s["total_tokens"] for s in seeds.values())}
        for m in headline:
            vals = [_final(s["curves"].get(m, [])) for s in seeds.values()]
            row[m] = mean_sd(vals)
        table.append(row)

    # --- stable gain vs baseline over the last `window` of PT checkpoints (per seed, then pooled)
    gains = []
    for name in names:
        if name == baseline:
            continue
        for m in headline:
            deltas_all, per_seed = [], []
            for seed, s in arms[name]["seeds"].items():
                b = arms[baseline]["seeds"].get(seed)
                if b is None or m not in s["curves"] or m not in b["curves"]:
                    continue
                xs, av, bv = _on_base_grid(s["curves"][m], b["curves"][m])
                if not xs:
                    continue
                lo = xs[-1] * (1 - cfg.report.window)
                g = stable_gain(xs, av, bv, window=(lo, xs[-1]), higher_is_better=not lower_better(m))
                per_seed.append(g)
                deltas_all += list(g["deltas"])
            if per_seed:
                mean, sd, n = mean_sd(deltas_all)
                verdict = one_sd_verdict(mean, sd, n)
                gains.append({"arm": name, "metric": m, "mean": mean, "sd": sd, "n": n,
                              "stable": verdict == "above", "stable_harm": verdict == "below",
                              "seeds": len(per_seed)})

    # --- token efficiency: PT tokens each arm needs to reach the baseline's final value
    efficiency = []
    for i, arm in enumerate(cfg.arms):
        if arm.name == baseline:
            continue
        stages = cfg.train_config(arm, cfg.seeds[0]).stages
        last_pt = max((j for j, st in enumerate(stages) if st.counts_as_pt), default=-1)
        ppt_tokens = sum(st.tokens for st in stages[:last_pt] if not st.counts_as_pt)
        for m in headline:
            per_seed = []
            for seed, sdata in arms[arm.name]["seeds"].items():
                b = arms[baseline]["seeds"].get(seed)
                if b is None or not sdata["curves"].get(m) or not b["curves"].get(m):
                    continue
                per_seed.append(token_efficiency(_last_per_x(b["curves"][m]), _last_per_x(sdata["curves"][m]),
                                                 extra_tokens=ppt_tokens, higher_is_better=not lower_better(m)))
            if per_seed:
                reached = [e for e in per_seed if e["reached"]]
                mean = lambda k: (sum(e[k] for e in reached) / len(reached)) if reached else None  # noqa: E731
                efficiency.append({"arm": arm.name, "metric": m, "ppt_tokens": ppt_tokens, "seeds": len(per_seed),
                                   "reached": len(reached), "target": per_seed[0]["target"],
                                   "targets": [e["target"] for e in per_seed],
                                   "base_tokens": mean("base_tokens"), "arm_tokens": mean("arm_tokens"),
                                   "saved_fraction": mean("saved_fraction"),
                                   "saved_fraction_incl_ppt": mean("saved_fraction_incl_ppt")})

    # --- plots
    pdir = out / "plots"
    pdir.mkdir(parents=True, exist_ok=True)
    figures = []
    for m in headline:
        curves = {name: [s["curves"].get(m, []) for s in arms[name]["seeds"].values()] for name in names}
        if not any(any(c) for c in curves.values()):
            continue
        fname = m.replace("/", "_") + ".png"
        ylim = _focus_ylim(curves) if lower_better(m) else None
        plots.plot_metric_vs_tokens(curves, pdir / fname, title=m, ylabel=m, xlabel="PT tokens", ylim=ylim)
        figures.append((m, f"plots/{fname}"))
    phen = {}
    for name in names:
        acc = defaultdict(list)
        for s in arms[name]["seeds"].values():
            for m, pts in s["curves"].items():
                if "/acc/term/" in m and pts:
                    acc[m.rsplit("/", 1)[-1]].append(pts[-1][1])
        if acc:
            phen[name] = {k: sum(v) / len(v) for k, v in sorted(acc.items())}
    if phen:
        plots.plot_phenomenon_bars(phen, pdir / "minimal_pairs_by_phenomenon.png")
        figures.append(("minimal-pair accuracy by phenomenon (final checkpoint)", "plots/minimal_pairs_by_phenomenon.png"))

    verbatim = _verbatim_positions(cfg, names)
    if verbatim:
        plots.plot_verbatim_positions(verbatim, pdir / "verbatim_positions.png",
                                      title="verbatim retrieval: surprisal by list position (final checkpoint)")
        figures.append(("verbatim retrieval by list position (final checkpoint)", "plots/verbatim_positions.png"))

    # --- markdown
    lines = [f"# {cfg.name}: report", ""]
    lines += [f"Arms: {', '.join(names)}; baseline for comparisons: **{baseline}**; training seeds: {list(cfg.seeds)}.",
              "Values are at the final checkpoint, mean ± SD over seeds when there are several. "
              "Lower is better for losses, higher for accuracies.", ""]
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
            bits = [f"{st.tokens:,} tokens of {data}", st.schedule, carry, f"embeddings: {st.embeddings_at_start}"]
            if not st.counts_as_pt:
                bits.append("not counted as PT")
            steps.append(f"**{st.name}** ({', '.join(bits)})")
        lines.append(f"- `{arm.name}`: " + " → ".join(steps))
    lines.append("")
    lines += ["## Results", ""]
    hdr = ["arm", "tokens trained"] + headline
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "---|" * len(hdr))
    for row in table:
        cells = [row["arm"] + ("" if row["done"] else " (unfinished)"), f"{row['total_tokens']:,}"]
        cells += [format_mean_sd(*row[m]) for m in headline]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if gains:
        lines += [f"## Difference from {baseline}",
                  f"Per-checkpoint difference (arm − baseline, sign flipped for losses so positive = better) over the "
                  f"last {cfg.report.window:.0%} of PT tokens, at the baseline's checkpoints (the arm's curve is "
                  f"linearly interpolated there). A gain is **stable** when mean > SD (the verify-ppt one-SD "
                  f"rule); the same rule with the sign flipped flags a **stable harm**.", "",
                  "| arm | metric | mean Δ | SD | n | verdict |", "|---|---|---|---|---|---|"]
        for g in gains:
            verdict = "stable gain" if g["stable"] else "stable harm" if g["stable_harm"] else "no stable difference"
            lines.append(f"| {g['arm']} | {g['metric']} | {g['mean']:+.4f} | {g['sd']:.4f} | {g['n']} | {verdict} |")
        lines.append("")
    if efficiency:
        lines += ["## Token efficiency",
                  f"PT tokens each arm needs to reach {baseline}'s final value (each seed against {baseline}'s run "
                  "of the same seed; targets listed per seed; first crossing, linear interpolation "
                  "between checkpoints; mean over the seeds that reach it). \"saved\" = 1 − arm/baseline; "
                  "\"incl. PPT\" also charges the arm its pre-pretraining tokens.", "",
                  "| arm | metric | target | reached (seeds) | baseline tokens | arm tokens | saved | saved incl. PPT |",
                  "|---|---|---|---|---|---|---|---|"]
        for e in efficiency:
            f = lambda v, pct=False: "–" if v is None else (f"{v:+.1%}" if pct else f"{v:,.0f}")  # noqa: E731
            tg = " / ".join(f"{t:.4g}" for t in e["targets"])
            lines.append(f"| {e['arm']} | {e['metric']} | {tg} | {e['reached']}/{e['seeds']} | "
                         f"{f(e['base_tokens'])} | {f(e['arm_tokens'])} | {f(e['saved_fraction'], True)} | "
                         f"{f(e['saved_fraction_incl_ppt'], True)} |")
        lines.append("")
    if phen:
        ph_names = sorted({k for v in phen.values() for k in v})
        lines += ["## Minimal pairs by phenomenon (final checkpoint)", "",
                  "| phenomenon | " + " | ".join(phen) + " |", "|---|" + "---|" * len(phen)]
        for p in ph_names:
            lines.append(f"| {p} | " + " | ".join(f"{phen[a].get(p, float('nan')):.3f}" for a in phen) + " |")
        lines.append("")
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
    write_json(out / "results.json", {"arms": arms, "table": [{k: (list(v) if isinstance(v, tuple) else v)
                                                                for k, v in r.items()} for r in table],
                                      "stable_gain": gains, "token_efficiency": efficiency, "phenomena": phen,
                                      **prov})
    path = out / "report.md"
    write_text(path, "\n".join(lines))
    return path


def _verbatim_positions(cfg, names: list[str]) -> dict:
    """Per arm, the repeat-condition surprisal by list position of the longest lists, final checkpoint, first seed."""
    out: dict = {}
    for arm, seed, run_dir in arm_runs(cfg.out_dir, cfg.arms, cfg.seeds):
        if arm.name in out or seed != cfg.seeds[0]:
            continue
        found = sorted(evals_dir(run_dir).glob("step-*/verbatim*/summary.json"))
        if not found:
            continue
        pos = (read_json(found[-1]).get("extra") or {}).get("positions") or {}
        cond = pos.get("repeat") or next(iter(pos.values()), None)
        if cond:
            longest = max(cond, key=lambda k: int(k.lstrip("n")) if k.lstrip("n").isdigit() else 0)
            out[arm.name] = cond[longest]
    return {n: out[n] for n in names if n in out}


def _data_manifest(out: Path) -> Any:
    p = out / "data" / "manifest.json"
    return read_json(p) if p.is_file() else None
