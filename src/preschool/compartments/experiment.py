"""Compartmentalization experiments: one YAML -> base data -> compartmented arms -> slowdown report.

``preschool compartments EXPERIMENT.yaml`` (or ``python -m
preschool.compartments.experiment``) runs, resuming whatever is done:

1. ``prepare``: tokenizer + the base dataset (``data``, one ``DatasetSpec``) via
   ``data.prepare.prepare_data``, under ``<out>/data``;
2. per arm: the compartmented training set (``compartments.dataset``) and one
   val set per compartment (the same rows shifted), under
   ``<out>/data/arms/<arm>/`` (rebuilt only when the arm's data config changes);
3. per arm: training with the staged trainer plus the
   :class:`~preschool.compartments.trainer.CompartmentModel` callback
   (compartment embedding / init copies / c=1 expansion), InfoNCE when the arm
   asks, validation at log-spaced steps, log-spaced checkpoints;
4. report: per-arm curves of loss averaged over compartments, slowdown vs the
   baseline arm (curve and at ``targets``), plateau vs c, cross-compartment
   similarity of the final checkpoint; ``results.json``, ``report.md`` and plots
   (loss vs step per arm, slowdown vs baseline step, plateau vs c).

With ``seeds: [...]`` steps 1-4 run once per seed under ``<out>/seed<k>/`` and
``<out>/report.md`` summarises the replicates (mean +- SD, one-SD verdicts).

The paper's protocol (Howe & Wingate; spec B.2/B.3) at toy scale: every arm
trains the same trunk on the same token budget; c compartments split the rows.
Departures from the paper are the scale (tiny model, tiny BPE vocabulary, CPU
budget) and the LR/schedule, set in the YAML.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import check, deep_merge, from_dict, to_dict
from ..config import load_config as _load_config
from ..data.prepare import DatasetSpec
from ..data.tokenizer import TokenizerConfig
from ..evals.runner import EvalSpec, evaluate_specs
from ..errors import ConfigError, DataError
from ..analysis.plots import new_figure, save_figure
from ..analysis.stats import format_mean_sd, one_sd_verdict
from ..io import read_json, write_json, write_text
from ..layout import final_checkpoint as _final_checkpoint
from ..layout import is_done, metrics_path, read_metrics
from .dataset import CompartmentsConfig, write_compartment_val, write_compartmented, write_translation_val
from .infonce import InfoNCEConfig
from .model import CompartmentModelConfig


@dataclass
class ArmConfig:
    """One arm: its presentation, model options, optional InfoNCE and optional c=1 initialisation."""

    name: str
    compartments: CompartmentsConfig = field(default_factory=CompartmentsConfig)
    model_options: CompartmentModelConfig = field(default_factory=CompartmentModelConfig)
    infonce: InfoNCEConfig | None = None
    init_from: str | None = None  # name of an earlier c=1 arm whose final checkpoint is expanded
    tokens: int | None = None  # default: the experiment's tokens
    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig overrides

    def validate(self) -> None:
        check(bool(self.name) and "/" not in self.name, "name", f"must be a non-empty name without '/', got {self.name!r}")
        if self.compartments.presentation == "permute":
            check(not self.model_options.compartment_embedding, "model_options.compartment_embedding",
                  "needs the offset presentation (compartments are read from ids); set false for permute")
            check(self.infonce is None, "infonce", "needs the offset presentation")
        if self.infonce is not None:
            check(self.compartments.n_compartments >= 2, "infonce", "needs n_compartments >= 2")


@dataclass
class CompartmentExperimentConfig:
    name: str
    out: str | None = None
    seed: int = 0  # data and training seed
    # replicates: the whole experiment once per seed (as `seed`), in <out>/seed<k>/, then a report
    # across seeds (mean +- SD); None: one run at `seed` in <out>
    seeds: list[int] | None = None
    seq_len: int = 64
    corpora: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    data: DatasetSpec = field(default_factory=DatasetSpec)
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig fields
    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields shared by every arm
    stage: dict[str, Any] = field(default_factory=dict)  # StageConfig fields (schedule, lr, warmup...)
    tokens: int = 1_000_000  # training tokens per arm
    val_per_decade: int = 4
    arms: list[ArmConfig] = field(default_factory=list)
    baseline: str | None = None  # default: the first arm with n_compartments == 1
    targets: list[float] = field(default_factory=list)  # named losses for the slowdown table
    similarity_rows: int = 16
    similarity_layer: int = 0
    # with seeds: [arm, reference] pairs compared seed by seed (paired differences: both arms of a
    # replicate share its document split and training seed, so part of the seed noise cancels)
    compare: list[list[str]] = field(default_factory=list)
    # evaluators run on every arm's checkpoints after training, as in `preschool run` (``${data}`` = <out>/data);
    # their final-checkpoint metrics join the report
    evals: list[EvalSpec] = field(default_factory=list)

    def validate(self) -> None:
        check(self.seq_len >= 8, "seq_len", f"must be >= 8, got {self.seq_len}")
        check(self.tokens > 0, "tokens", f"must be > 0, got {self.tokens}")
        check(len(self.arms) > 0, "arms", "needs at least one arm")
        names = [a.name for a in self.arms]
        check(len(set(names)) == len(names), "arms", f"arm names must be unique, got {names}")
        check(self.data.corpus is not None or self.data.generator is not None, "data",
              "name a corpus or a generator for the base dataset")
        for i, a in enumerate(self.arms):
            if a.init_from is not None:
                check(a.init_from in names[:i], f"arms[{i}].init_from", f"must name an earlier arm, got {a.init_from!r}")
                src = self.arms[names.index(a.init_from)]
                check(src.compartments.n_compartments == 1, f"arms[{i}].init_from",
                      f"arm {a.init_from!r} has n_compartments={src.compartments.n_compartments}; expansion needs c=1")
            self.train_config(a)  # validates the merged TrainConfig
        if self.baseline is not None:
            check(self.baseline in names, "baseline", f"no arm named {self.baseline!r}")
        for i, pair in enumerate(self.compare):
            check(len(pair) == 2 and all(x in names for x in pair) and pair[0] != pair[1], f"compare[{i}]",
                  f"must be [arm, reference] naming two different arms, got {pair}")
        if self.seeds is not None:
            check(len(self.seeds) > 0 and all(isinstance(x, int) and x >= 0 for x in self.seeds), "seeds",
                  f"must be a non-empty list of integers >= 0, got {self.seeds}")
            check(len(set(self.seeds)) == len(self.seeds), "seeds", f"must be distinct, got {self.seeds}")

    @property
    def out_dir(self) -> Path:
        return Path(self.out or f"runs/{self.name}")

    def baseline_arm(self) -> ArmConfig | None:
        if self.baseline:
            return next(a for a in self.arms if a.name == self.baseline)
        return next((a for a in self.arms if a.compartments.n_compartments == 1 and a.init_from is None), None)

    def train_config(self, arm: ArmConfig):
        from ..train.trainer import TrainConfig

        merged = deep_merge(self.train, arm.train)
        c = arm.compartments.n_compartments
        stage = {"name": "train", "data": "main", "tokens": arm.tokens or self.tokens, **self.stage}
        val = [f"c{i}" for i in range(c)] + (["translation"] if _has_translation(arm) else [])
        merged = {"eval_every": 0, "eval_schedule": "log", "evals_per_decade": self.val_per_decade,
                  "checkpoint_schedule": "log", **merged,
                  "model": self.model, "stages": [stage], "seed": self.seed, "val": val}
        try:
            return from_dict(TrainConfig, merged)
        except ConfigError as e:
            raise ConfigError(f"arms[{arm.name}].train.{e.field}", str(e).split(": ", 1)[-1]) from None


def _has_translation(arm: ArmConfig) -> bool:
    return arm.compartments.translation.fraction > 0


def load_config(path: str | Path, overrides: list[str] = ()) -> CompartmentExperimentConfig:
    return _load_config(CompartmentExperimentConfig, path, overrides)


# ----------------------------------------------------------------------------- steps


def prepare_base(cfg: CompartmentExperimentConfig, progress: bool = True) -> dict:
    from ..corpora import CorpusConfig
    from ..data.prepare import prepare_data

    corpora = {n: from_dict(CorpusConfig, c, f"corpora.{n}") for n, c in cfg.corpora.items()}
    return prepare_data(cfg.out_dir / "data", cfg.tokenizer, corpora, {"base": cfg.data}, cfg.seq_len, cfg.seed,
                        1, progress)


def arm_data(cfg: CompartmentExperimentConfig, arm: ArmConfig, progress: bool = True) -> dict[str, Path]:
    """Compartmented train set + per-compartment val sets of one arm; returns trainer ``datasets``."""
    base = cfg.out_dir / "data" / "base"
    root = cfg.out_dir / "data" / "arms" / arm.name
    c = arm.compartments.n_compartments
    key = {"compartments": arm.compartments.record(), "base": read_json(base / "dataset.json")["hash"]}
    stamp = root / "data.json"
    datasets = {"main": root / "main", **{f"c{i}": root / f"c{i}" for i in range(c)}}
    if _has_translation(arm):
        datasets["translation"] = root / "translation"
    if stamp.is_file() and read_json(stamp) == key:
        return datasets
    if _has_translation(arm):
        write_translation_val(base / "val", root / "translation" / "val", arm.compartments)
    write_compartmented(base / "train", root / "main" / "train", arm.compartments, progress=progress)
    write_compartment_val(base / "val", root / "val_sets", arm.compartments)
    for i in range(c):
        dst = root / f"c{i}" / "val"
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            import shutil

            shutil.rmtree(dst)
        (root / "val_sets" / f"c{i}").rename(dst)
    write_json(stamp, key)
    return datasets


def final_checkpoint(run_dir: Path) -> Path:
    try:
        return _final_checkpoint(run_dir)
    except DataError as e:
        raise ConfigError("init_from", f"{e} (train that arm first)") from None


def train_arm(cfg: CompartmentExperimentConfig, arm: ArmConfig, progress: bool = True) -> Path:
    from ..train.callbacks.base import Callback
    from ..train.trainer import train
    from .infonce import InfoNCECallback
    from .trainer import CompartmentModel

    run_dir = cfg.out_dir / "arms" / arm.name
    if is_done(run_dir):
        return run_dir
    datasets = arm_data(cfg, arm, progress)
    V = int(read_json(cfg.out_dir / "data" / "base" / "train" / "manifest.json")["vocab_size"])
    tcfg = cfg.train_config(arm)
    tcfg.progress = tcfg.progress and progress  # --no-progress silences the training bars too
    init = final_checkpoint(cfg.out_dir / "arms" / arm.init_from) if arm.init_from else None
    callbacks: list[Callback] = [CompartmentModel(arm.compartments.n_compartments, V, arm.model_options, init)]
    if arm.infonce is not None:
        callbacks.append(InfoNCECallback(arm.infonce, arm.compartments.n_compartments, V,
                                         train_shards=cfg.out_dir / "data" / "base" / "train"))
    print(f"[compartments] arm {arm.name}: c={arm.compartments.n_compartments} -> {run_dir}", flush=True)
    train(tcfg, run_dir, datasets, None, callbacks)
    return run_dir


def analyse(cfg: CompartmentExperimentConfig) -> dict:
    """Curves, slowdown vs baseline, plateau and similarity for every trained arm."""
    from ..data.shards import ShardSet
    from ..train.trainer import quiet_hf_progress
    from .model import load_compartment_model
    from .similarity import cross_compartment_similarity
    from .slowdown import plateau, read_val_curve, slowdown_at_targets, slowdown_curve

    V = int(read_json(cfg.out_dir / "data" / "base" / "train" / "manifest.json")["vocab_size"])
    val = ShardSet(cfg.out_dir / "data" / "base" / "val", verify="size")
    rows = val.rows(range(min(cfg.similarity_rows, len(val))))[:, :-1]
    base_arm = cfg.baseline_arm()
    curves, out = {}, {"baseline": base_arm.name if base_arm else None, "arms": {}}
    for arm in cfg.arms:
        run_dir = cfg.out_dir / "arms" / arm.name
        if not metrics_path(run_dir).is_file():
            continue
        c = arm.compartments.n_compartments
        curve = read_val_curve(run_dir, keys=[f"val/c{i}" for i in range(c)])
        curves[arm.name] = curve
        entry: dict[str, Any] = {"n_compartments": c, "translation_fraction": arm.compartments.translation.fraction,
                                 "infonce": to_dict(arm.infonce) if arm.infonce else None, "init_from": arm.init_from,
                                 "done": is_done(run_dir),
                                 "curve": {"steps": curve.steps.tolist(), "losses": curve.losses.tolist()}}
        per = _per_compartment_final(run_dir, c)
        entry["final_per_compartment"] = per
        entry["final_translation_loss"] = _last_val(run_dir, "val/translation")
        if c >= 2 and arm.compartments.presentation == "offset" and (run_dir / "checkpoints").is_dir():
            with quiet_hf_progress():  # no "Loading weights" bar per arm in the report step
                model = load_compartment_model(final_checkpoint(run_dir))
            entry["similarity"] = cross_compartment_similarity(model, rows, c, V, cfg.similarity_layer)
        out["arms"][arm.name] = entry
    if base_arm is not None and base_arm.name in curves:
        bc = curves[base_arm.name]
        for name, e in out["arms"].items():
            if e["init_from"]:
                continue  # a fine-tune's steps do not start from scratch: no slowdown against a fresh baseline
            e["slowdown"] = slowdown_curve(bc, curves[name])
            e["slowdown_at"] = slowdown_at_targets(bc, curves[name], cfg.targets)
    out["plateau"] = {name: v for name, v in plateau(curves, k=1).items()}
    out["evals"] = _final_evals(cfg)
    return out


def _final_evals(cfg: CompartmentExperimentConfig) -> dict[str, dict[str, float]]:
    """Per arm, ``{evaluator/metric: value}`` at its last evaluated checkpoint (the ``evals:`` results)."""
    from ..evals.runner import collect_results

    out = {}
    for arm in cfg.arms:
        rows = collect_results(cfg.out_dir / "arms" / arm.name) if cfg.evals else []
        if rows:
            last = max(r["step"] for r in rows)
            out[arm.name] = {f"{r['evaluator']}/{r['metric']}": r["value"] for r in rows if r["step"] == last}
    return out


def _last_val(run_dir: Path, key: str) -> float | None:
    return next((row[key] for row in reversed(read_metrics(run_dir, event="val")) if key in row), None)


def _per_compartment_final(run_dir: Path, c: int) -> dict[str, float]:
    row = next((r for r in reversed(read_metrics(run_dir, event="val")) if f"val/c{c - 1}" in r), None)
    return {f"c{i}": row[f"val/c{i}"] for i in range(c)} if row else {}


# ----------------------------------------------------------------------------- report


def write_report(cfg: CompartmentExperimentConfig, res: dict) -> Path:
    from ..io import provenance

    out = cfg.out_dir
    plots = out / "plots"
    arms = res["arms"]
    files = []
    fig = new_figure()
    ax = fig.add_subplot(111)
    for name, e in arms.items():
        s, l = np.asarray(e["curve"]["steps"]), np.asarray(e["curve"]["losses"])
        ax.plot(np.maximum(s, 0.5), l, marker=".", label=f"{name} (c={e['n_compartments']})")
    ax.set_xscale("log")
    ax.set_xlabel("step (step 0 drawn at 0.5)")
    ax.set_ylabel("val loss, mean over compartments")
    ax.legend(fontsize=8)
    files.append(save_figure(fig, plots / "loss_vs_step.png").name)
    if res["baseline"]:
        fig = new_figure()
        ax = fig.add_subplot(111)
        for name, e in arms.items():
            if name == res["baseline"] or not e.get("slowdown"):
                continue
            ax.plot([r["base_step"] for r in e["slowdown"]], [r["slowdown"] for r in e["slowdown"]], marker=".",
                    label=name)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(f"baseline ({res['baseline']}) step at the same loss")
        ax.set_ylabel("slowdown (steps / baseline steps)")
        ax.legend(fontsize=8)
        files.append(save_figure(fig, plots / "slowdown.png").name)
    fig = new_figure()
    ax = fig.add_subplot(111)
    groups: dict[str, list] = {}
    for name, e in arms.items():
        key = f"tr={e['translation_fraction']}" + (" infonce" if e["infonce"] else "") + \
              (f" init={e['init_from']}" if e["init_from"] else "")
        groups.setdefault(key, []).append((e["n_compartments"], res["plateau"][name]))
    for key, pts in groups.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("compartments c")
    ax.set_ylabel("final val loss")
    ax.legend(fontsize=8)
    files.append(save_figure(fig, plots / "plateau_vs_c.png").name)

    lines = [f"# {cfg.name}: compartmentalization", "",
             f"Base data: {cfg.data.corpus or cfg.data.generator}, seq_len {cfg.seq_len}, "
             f"{cfg.tokens:,} training tokens per arm, model {cfg.model}.", "",
             "| arm | c | tr | infonce | init | final loss (mean) | per compartment | translation (target half) "
             "| similarity | done |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in arms.items():
        per = ", ".join(f"{v:.3f}" for v in e["final_per_compartment"].values())
        sim = f"{e['similarity']['mean']:.3f}" if e.get("similarity") else "-"
        trl = f"{e['final_translation_loss']:.3f}" if e.get("final_translation_loss") is not None else "-"
        lines.append(f"| {name} | {e['n_compartments']} | {e['translation_fraction']} | "
                     f"{'yes' if e['infonce'] else 'no'} | {e['init_from'] or '-'} | {res['plateau'][name]:.4f} | "
                     f"{per} | {trl} | {sim} | {'yes' if e['done'] else 'NO'} |")
    if res["baseline"]:
        lines += ["", f"## Slowdown vs `{res['baseline']}`", "",
                  "Slowdown = step of the arm / baseline step at the same loss (linear interpolation, "
                  "overlap of loss ranges only; spec B.3).", ""]
        if cfg.targets:
            lines += ["| arm | " + " | ".join(f"loss {t}" for t in cfg.targets) + " |",
                      "|---|" + "---|" * len(cfg.targets)]
            for name, e in arms.items():
                if e["init_from"]:
                    continue
                cells = []
                for t in cfg.targets:
                    v = e.get("slowdown_at", {}).get(str(float(t)))
                    cells.append(f"{v['slowdown']:.2f}x" if v else "not reached")
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "| arm | points in overlap | median slowdown | last slowdown |", "|---|---|---|---|"]
        for name, e in arms.items():
            sd = e.get("slowdown") or []
            if e["init_from"]:
                lines.append(f"| {name} | fine-tune from {e['init_from']}: not comparable | - | - |")
            elif sd:
                lines.append(f"| {name} | {len(sd)} | {np.median([r['slowdown'] for r in sd]):.2f} | "
                             f"{sd[-1]['slowdown']:.2f} (loss {sd[-1]['loss']:.3f}) |")
            else:
                lines.append(f"| {name} | 0 | - | - |")
    if res.get("evals"):
        metrics = sorted({m for v in res["evals"].values() for m in v if m.count("/") == 1})
        lines += ["", "## Evaluations (last evaluated checkpoint)", "",
                  "| arm | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
        for name, v in res["evals"].items():
            lines.append(f"| {name} | " + " | ".join(f"{v[m]:.4f}" if m in v else "-" for m in metrics) + " |")
    lines += ["", "Plots: " + ", ".join(f"[{f}](plots/{f})" for f in files), ""]
    write_text(out / "report.md", "\n".join(lines))
    write_json(out / "results.json", {**res, **provenance(cfg)})
    return out / "report.md"


def run(cfg: CompartmentExperimentConfig, progress: bool = True, steps: tuple[str, ...] = ("train", "report")) -> Path:
    import yaml

    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    write_text(cfg.out_dir / "experiment.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    if cfg.seeds is not None:
        # each replicate is a complete single-seed experiment; finished ones are skipped on rerun
        for s in cfg.seeds:
            print(f"[compartments] replicate seed {s}", flush=True)
            run(replicate(cfg, s), progress, steps)
        return write_seed_report(cfg, aggregate_seeds(cfg))
    prepare_base(cfg, progress)
    if "train" in steps:
        for arm in cfg.arms:
            train_arm(cfg, arm, progress)
        for arm in cfg.arms:
            evaluate_specs(cfg.out_dir / "arms" / arm.name, cfg.evals, cfg.out_dir / "data")
    res = analyse(cfg)
    return write_report(cfg, res)


# ----------------------------------------------------------------------------- replicates


def replicate(cfg: CompartmentExperimentConfig, seed: int) -> CompartmentExperimentConfig:
    """The single-seed experiment of one replicate: ``seed`` set, written under ``<out>/seed<k>``."""
    from dataclasses import replace

    return replace(cfg, seed=seed, seeds=None, out=str(cfg.out_dir / f"seed{seed}"))


def _slowdown_at(arm_result: dict, target: float) -> float | None:
    """An arm's slowdown at a target loss in one replicate's results (None: not reached or no baseline)."""
    v = (arm_result.get("slowdown_at") or {}).get(str(float(target)))
    return v["slowdown"] if v else None


def _verdict(summary: dict, null: float) -> str:
    """The one-SD rule across seeds (``analysis.stats.one_sd_verdict``)."""
    return one_sd_verdict(summary["mean"], summary["sd"], summary["n"], null, single="one seed")


def aggregate_seeds(cfg: CompartmentExperimentConfig) -> dict:
    """Per arm, across the replicates that have results: final loss, slowdown at each target,
    median slowdown and similarity, each as ``seed_summary`` (mean, SD, t interval, values)."""
    from ..analysis.stats import seed_summary

    per_seed = {}
    for s in cfg.seeds or []:
        path = replicate(cfg, s).out_dir / "results.json"
        if path.is_file():
            per_seed[s] = read_json(path)
    if not per_seed:
        raise ConfigError("seeds", f"no replicate under {cfg.out_dir} has results yet (train first)")

    def summary(values: list[float]) -> dict | None:
        return seed_summary(values, method="t") if values else None

    arms: dict[str, Any] = {}
    for arm in cfg.arms:
        runs = {s: r["arms"][arm.name] for s, r in per_seed.items() if arm.name in r["arms"]}
        if not runs:
            continue
        e: dict[str, Any] = {"n_compartments": arm.compartments.n_compartments, "seeds": sorted(runs),
                             "done": all(v["done"] for v in runs.values()),
                             "final_loss": summary([per_seed[s]["plateau"][arm.name] for s in runs])}
        sims = [v["similarity"]["mean"] for v in runs.values() if v.get("similarity")]
        e["similarity"] = summary(sims)
        if any("slowdown" in v for v in runs.values()):
            e["slowdown_at"] = {}
            for t in cfg.targets:
                got = [x for v in runs.values() if (x := _slowdown_at(v, t)) is not None]
                sm = summary(got)
                e["slowdown_at"][str(float(t))] = {**(sm or {}), "reached": len(got), "of": len(runs),
                                                   "verdict": _verdict(sm, 1.0) if sm else "not reached"}
            med = [float(np.median([r["slowdown"] for r in v["slowdown"]])) for v in runs.values() if v.get("slowdown")]
            e["median_slowdown"] = summary(med)
        arms[arm.name] = e
    base = cfg.baseline_arm()
    pairs = []
    for a, b in cfg.compare:
        both = [s for s, r in per_seed.items() if a in r["arms"] and b in r["arms"]]
        if not both:
            continue
        d: dict[str, Any] = {"arm": a, "reference": b, "seeds": both}
        fin = summary([per_seed[s]["plateau"][a] - per_seed[s]["plateau"][b] for s in both])
        d["final_loss"] = {**fin, "verdict": _verdict(fin, 0.0)}
        d["slowdown_at"] = {}
        for t in cfg.targets:
            k = str(float(t))
            pairs_t = [(_slowdown_at(per_seed[s]["arms"][a], t), _slowdown_at(per_seed[s]["arms"][b], t)) for s in both]
            got = [x - y for x, y in pairs_t if x is not None and y is not None]
            sm = summary(got)
            d["slowdown_at"][k] = {**(sm or {}), "verdict": _verdict(sm, 0.0) if sm else "not reached by both"}
        pairs.append(d)
    return {"baseline": base.name if base else None, "seeds": sorted(per_seed), "arms": arms, "compare": pairs}


def _pm(sm: dict | None, digits: int = 3, suffix: str = "") -> str:
    return format_mean_sd(sm["mean"], sm["sd"], sm["n"], digits, suffix, show_n=True) if sm else "-"


def write_seed_report(cfg: CompartmentExperimentConfig, agg: dict) -> Path:
    """``<out>/report.md``, ``results.json`` and ``plots/plateau_vs_c.png`` across replicates."""
    from ..io import provenance

    out = cfg.out_dir
    arms = agg["arms"]
    fig = new_figure()
    ax = fig.add_subplot(111)
    pts = sorted((e["n_compartments"], e["final_loss"]["mean"], e["final_loss"]["sd"] or 0.0, name)
                 for name, e in arms.items() if e["final_loss"])
    ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3, ls="none")
    for c, m, _, name in pts:
        ax.annotate(name, (c, m), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("compartments c")
    ax.set_ylabel(f"final val loss, mean ± SD over {len(agg['seeds'])} seeds")
    plots = [save_figure(fig, out / "plots" / "plateau_vs_c.png").name]
    if agg["baseline"] and cfg.targets:
        # one x position per arm (several arms may share a c), one offset series per target;
        # fine-tuned arms have no slowdown_at (their steps do not start from scratch)
        names = [n for n, e in arms.items() if "slowdown_at" in e]
        fig = new_figure()
        ax = fig.add_subplot(111)
        width = 0.6 / max(1, len(cfg.targets))
        for k, t in enumerate(cfg.targets):
            xs, ms, sds = [], [], []
            for i, n in enumerate(names):
                v = arms[n]["slowdown_at"][str(float(t))]
                if v["reached"]:
                    xs.append(i + (k - (len(cfg.targets) - 1) / 2) * width)
                    ms.append(v["mean"])
                    sds.append(v["sd"] or 0.0)
                    if v["reached"] < v["of"]:  # a mean over fewer seeds than the others: say so
                        ax.annotate(f"{v['reached']}/{v['of']} seeds", (xs[-1], ms[-1]), textcoords="offset points",
                                    xytext=(3, 5), fontsize=6)
            ax.errorbar(xs, ms, yerr=sds, marker="o", capsize=3, ls="none", label=f"loss {t}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([f"{n}\n(c={arms[n]['n_compartments']})" for n in names], fontsize=7)
        ax.set_ylabel(f"slowdown vs {agg['baseline']}, mean ± SD")
        ax.legend(fontsize=8)
        plots.append(save_figure(fig, out / "plots" / "slowdown_by_arm.png").name)

    lines = [f"# {cfg.name}: compartmentalization across seeds", "",
             f"Replicates: seeds {agg['seeds']} (each a full run of this experiment with `seed` set; "
             "per-seed reports: " + ", ".join(f"[seed {s}](seed{s}/report.md)" for s in agg["seeds"]) + "). "
             "Values are mean ± SD across seeds (sample SD).", "",
             "| arm | c | final loss | median slowdown | similarity | done |", "|---|---|---|---|---|---|"]
    for name, e in arms.items():
        lines.append(f"| {name} | {e['n_compartments']} | {_pm(e['final_loss'])} | "
                     f"{_pm(e.get('median_slowdown'), 2, 'x')} | {_pm(e['similarity'])} | "
                     f"{'yes' if e['done'] else 'NO'} |")
    if agg["baseline"] and cfg.targets:
        lines += ["", f"## Slowdown vs `{agg['baseline']}` at equal loss", "",
                  "Per target loss: mean ± SD of the per-seed slowdowns over the seeds where the arm reached it, "
                  "and the verdict of the one-SD rule against 1x (*above*: slower than the baseline in a way the "
                  "seed spread does not explain).", "",
                  "| arm | " + " | ".join(f"loss {t}" for t in cfg.targets) + " |",
                  "|---|" + "---|" * len(cfg.targets)]
        for name, e in arms.items():
            if "slowdown_at" not in e:
                continue
            cells = []
            for t in cfg.targets:
                v = e["slowdown_at"][str(float(t))]
                cells.append("not reached" if not v["reached"] else
                             f"{_pm(v, 2, 'x')}, {v['verdict']}" + (f" ({v['reached']}/{v['of']} reached)"
                                                                     if v["reached"] < v["of"] else ""))
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if agg["compare"]:
        lines += ["", "## Paired comparisons", "",
                  "Arm minus reference, seed by seed (both arms run with the seed's document split and training "
                  "seed), then mean ± SD of those differences; verdict by the one-SD rule against 0 "
                  "(*below*: the arm's value is lower, e.g. a lower loss or a smaller slowdown).", "",
                  "| arm - reference | Δ final loss | " + " | ".join(f"Δ slowdown at {t}" for t in cfg.targets) + " |",
                  "|---|---|" + "---|" * len(cfg.targets)]
        for d in agg["compare"]:
            cells = [f"{_pm(d['final_loss'], 3)}, {d['final_loss']['verdict']}"]
            for t in cfg.targets:
                v = d["slowdown_at"][str(float(t))]
                cells.append(f"{_pm(v, 2)}, {v['verdict']}" if v.get("n") else v["verdict"])
            lines.append(f"| {d['arm']} - {d['reference']} | " + " | ".join(cells) + " |")
    lines += ["", "Plots: " + ", ".join(f"[{p}](plots/{p})" for p in plots), ""]
    write_text(out / "report.md", "\n".join(lines))
    write_json(out / "results.json", {**agg, **provenance(cfg)})
    return out / "report.md"


# ----------------------------------------------------------------------------- CLI

HELP = "compartmentalization experiments: c presentations, slowdown, remedies, dataset audit"
DESCRIPTION = __doc__


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="experiment YAML (examples/compartments_*.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set tokens=200000 (repeatable)")
    p.add_argument("--report-only", action="store_true", help="skip training; analyse what exists")
    p.add_argument("--no-progress", action="store_true")


def run_cli(args) -> int:
    from ..config import load_yaml

    raw = load_yaml(args.config)
    if raw.get("kind") == "audit":
        from .audit import load_audit, run_audit

        path = run_audit(load_audit(args.config, args.overrides), not args.no_progress,
                         () if args.report_only else ("train",))
    else:
        cfg = load_config(args.config, args.overrides)
        path = run(cfg, not args.no_progress, ("report",) if args.report_only else ("train", "report"))
    print(f"[compartments] report: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m preschool.compartments.experiment ...`` = ``preschool compartments ...``."""
    import sys

    from ..cli import main as cli_main

    return cli_main(["compartments", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
