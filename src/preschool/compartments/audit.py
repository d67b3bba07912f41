"""Dataset audit: how compartmentalized is learning on a multi-presentation corpus?

Follows Howe & Wingate's operational measure (vinhowe/compartmentalization
``scripts/prepare_wiki_qwen3.py``, ``experiment/plot_multilingual_scaling.py``;
spec B.6). Given P labelled presentations of one corpus (languages, code
languages, clusters... each a ``DatasetSpec`` under ``presentations``, sharing
one tokenizer), train from the same data:

1. ``shared``: the presentations mixed (``weights``, default equal), ordinary
   shared vocabulary;
2. ``compartmented``: identical rows, but the ids of presentation k >= 1 are
   shifted by k*V (vocabulary P*V + 1), so no id - not even punctuation,
   digits or EOS - is shared: compartmentalization forced at the token level;
3. optionally ``mono_<p>``: each presentation alone, same token budget.

The measure is the per-presentation val-loss **gap** (compartmented - shared)
over training at matched steps: near 0 means the data is learned as if fully
compartmentalized (shared ids and cross-presentation structure buy nothing);
positive means sharing helps. ``mono_<p> - shared`` is the cost or benefit of
the other presentations' data. Departure: the tokenizer is whatever
``data.prepare`` builds (trained on the first corpus, or loaded); the paper
uses a fixed pretrained tokenizer (Qwen3) for both languages.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..config import check, from_dict, to_dict
from ..data.prepare import DatasetSpec
from ..data.shards import ShardSet, ShardWriter
from ..data.tokenizer import TokenizerConfig
from ..errors import ConfigError
from ..analysis.plots import new_figure, save_figure
from ..io import read_json, write_json, write_text
from ..layout import is_done, metrics_path, read_metrics
from .offsets import build_presentation


@dataclass
class AuditConfig:
    """``kind: audit`` experiment YAML (see examples/compartments_audit.yaml)."""

    name: str
    kind: Literal["audit"] = "audit"
    out: str | None = None
    seed: int = 0
    seq_len: int = 64
    corpora: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    presentations: dict[str, DatasetSpec] = field(default_factory=dict)  # first one keeps its ids
    weights: dict[str, float] | None = None  # mixture weights (default equal)
    monolingual: bool = False
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    stage: dict[str, Any] = field(default_factory=dict)
    tokens: int = 1_000_000
    val_per_decade: int = 4

    def validate(self) -> None:
        check(len(self.presentations) >= 2, "presentations", f"needs >= 2 presentations, got {len(self.presentations)}")
        check(self.tokens > 0, "tokens", f"must be > 0, got {self.tokens}")
        for name, spec in self.presentations.items():
            check("/" not in name and not name.startswith("_"), f"presentations.{name}", "not a valid dataset name")
            check(spec.val_tokens > 0, f"presentations.{name}.val_tokens", "the audit needs a val split (> 0)")
            if spec.corpus is not None:
                check(spec.corpus in self.corpora, f"presentations.{name}.corpus", f"no corpus named {spec.corpus!r}")
        if self.weights is not None:
            for k in self.weights:
                check(k in self.presentations, f"weights.{k}", f"no presentation named {k!r}")
        for arm in self.arm_names():
            self.train_config(arm)

    @property
    def out_dir(self) -> Path:
        return Path(self.out or f"runs/{self.name}")

    def arm_names(self) -> list[str]:
        names = ["shared", "compartmented"]
        if self.monolingual:
            names += [f"mono_{p}" for p in self.presentations]
        return names

    def train_config(self, arm: str):
        from ..train.trainer import TrainConfig

        pres = list(self.presentations)
        if arm.startswith("mono_"):
            data: Any = arm[len("mono_"):]
            val = [data]
        else:
            data = {p: float((self.weights or {}).get(p, 1.0)) for p in pres}
            val = pres
        stage = {"name": "train", "data": data, "tokens": self.tokens, **self.stage}
        merged = {"eval_every": 0, "eval_schedule": "log", "evals_per_decade": self.val_per_decade,
                  "checkpoint_schedule": "log", **copy.deepcopy(self.train),
                  "model": self.model, "stages": [stage], "seed": self.seed, "val": val}
        try:
            return from_dict(TrainConfig, merged)
        except ConfigError as e:
            raise ConfigError(f"train.{e.field}", str(e).split(": ", 1)[-1]) from None


def load_audit(path: str | Path, overrides: list[str] = ()) -> AuditConfig:
    from ..config import load_config

    return load_config(AuditConfig, path, overrides)


def shift_shard_set(src: str | Path, out: str | Path, k: int, n_presentations: int) -> dict:
    """Copy a shard set with every id moved into compartment ``k`` of an offset presentation."""
    src = ShardSet(src)
    pres = build_presentation("offset", n_presentations, src.vocab_size)
    arrays = [a for a in src.array_names if a != "tokens"]
    with ShardWriter(out, src.row_len, pres.vocab_size, arrays=arrays) as w:
        for a in range(0, len(src), 8192):
            idx = range(a, min(len(src), a + 8192))
            extra = {n: src.rows(idx, n) for n in arrays}
            w.add_rows(pres.encode(src.rows(idx), k), **extra)
        return w.close(source={"kind": "audit_shift", "path": str(src.path), "presentation_index": k},
                       compartments={"presentation": pres.manifest(), "compartment": k})


def prepare_audit(cfg: AuditConfig, progress: bool = True) -> dict[str, dict[str, Path]]:
    """Datasets per arm: {arm: {presentation: folder with train/ and val/}}."""
    from ..corpora import CorpusConfig
    from ..data.prepare import prepare_data

    data_dir = cfg.out_dir / "data"
    corpora = {n: from_dict(CorpusConfig, c, f"corpora.{n}") for n, c in cfg.corpora.items()}
    man = prepare_data(data_dir, cfg.tokenizer, corpora, cfg.presentations, cfg.seq_len, cfg.seed, 1, progress)
    pres = list(cfg.presentations)
    P = len(pres)
    shared = {p: data_dir / p for p in pres}
    comp = {pres[0]: data_dir / pres[0]}
    for k, p in enumerate(pres[1:], start=1):
        dst = data_dir / "_shifted" / p
        key = {"hash": man["datasets"][p]["hash"], "k": k, "P": P}
        if not ((dst / "shift.json").is_file() and read_json(dst / "shift.json") == key):
            for split in ("train", "val"):
                shift_shard_set(data_dir / p / split, dst / split, k, P)
            write_json(dst / "shift.json", key)
        comp[p] = dst
    arms = {"shared": shared, "compartmented": comp}
    for p in pres if cfg.monolingual else []:
        arms[f"mono_{p}"] = {p: data_dir / p}
    return arms


def _val_rows(run_dir: Path) -> list[dict]:
    return read_metrics(run_dir, event="val")


def gap_curves(runs: dict[str, Path], presentations: list[str], against: str = "shared") -> dict:
    """{arm: {presentation: {"steps", "gap"}}}: arm loss minus ``against`` loss at the steps both logged."""
    ref = {r["step"]: r for r in _val_rows(runs[against])}
    out: dict[str, dict] = {}
    for arm, d in runs.items():
        if arm == against:
            continue
        per = {}
        rows = [r for r in _val_rows(d) if r["step"] in ref]
        for p in presentations:
            pts = [(r["step"], r[f"val/{p}"] - ref[r["step"]][f"val/{p}"]) for r in rows
                   if f"val/{p}" in r and f"val/{p}" in ref[r["step"]]]
            if pts:
                per[p] = {"steps": [s for s, _ in pts], "gap": [g for _, g in pts]}
        out[arm] = per
    return out


def run_audit(cfg: AuditConfig, progress: bool = True, steps: tuple[str, ...] = ("train",)) -> Path:
    import yaml

    from ..train.trainer import train

    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    write_text(cfg.out_dir / "experiment.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    arms = prepare_audit(cfg, progress)
    runs = {arm: cfg.out_dir / "arms" / arm for arm in arms}
    if "train" in steps:
        for arm, datasets in arms.items():
            print(f"[compartments] audit arm {arm} -> {runs[arm]}", flush=True)
            tcfg = cfg.train_config(arm)
            tcfg.progress = tcfg.progress and progress  # --no-progress silences the training bars too
            train(tcfg, runs[arm], datasets, None)
    return write_audit_report(cfg, {a: d for a, d in runs.items() if metrics_path(d).is_file()})


def write_audit_report(cfg: AuditConfig, runs: dict[str, Path]) -> Path:
    from ..io import provenance

    pres = list(cfg.presentations)
    if "shared" not in runs:
        raise ConfigError("arms", "the shared arm has not been trained; nothing to compare against")
    gaps = gap_curves(runs, pres)
    finals = {}
    for arm, d in runs.items():
        rows = _val_rows(d)
        finals[arm] = {p: rows[-1].get(f"val/{p}") for p in pres} if rows else {}
    fig = new_figure()
    ax = fig.add_subplot(111)
    for p, g in gaps.get("compartmented", {}).items():
        ax.plot(np.maximum(g["steps"], 0.5), g["gap"], marker=".", label=f"{p}: compartmented - shared")
    for arm, per in gaps.items():
        if arm.startswith("mono_"):
            p = arm[len("mono_"):]
            if p in per:
                ax.plot(np.maximum(per[p]["steps"], 0.5), per[p]["gap"], ls="--", label=f"{p}: {arm} - shared")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("val loss gap (nats)")
    ax.legend(fontsize=8)
    plot = save_figure(fig, cfg.out_dir / "plots" / "audit_gap.png").name

    lines = [f"# {cfg.name}: compartmentalization audit", "",
             f"Presentations: {', '.join(pres)} (ids of all but `{pres[0]}` shifted in the compartmented arm); "
             f"{cfg.tokens:,} tokens per arm; model {cfg.model}.", "",
             "Gap = compartmented - shared val loss of each presentation at the same step. Near 0: learned as if "
             "compartmentalized (sharing buys nothing). Positive: sharing helps.", "",
             "| presentation | " + " | ".join(f"final {a}" for a in runs) + " | final gap | mean gap, 2nd half |",
             "|---|" + "---|" * (len(runs) + 2)]
    summary = {}
    for p in pres:
        g = gaps.get("compartmented", {}).get(p)
        final_gap = g["gap"][-1] if g else float("nan")
        half = float(np.mean(g["gap"][len(g["gap"]) // 2:])) if g else float("nan")
        summary[p] = {"final_gap": final_gap, "mean_gap_second_half": half}
        cells = [f"{finals[a].get(p):.4f}" if finals[a].get(p) is not None else "-" for a in runs]
        lines.append(f"| {p} | " + " | ".join(cells) + f" | {final_gap:+.4f} | {half:+.4f} |")
    lines += ["", f"Plot: [audit_gap.png](plots/{plot})", ""]
    write_text(cfg.out_dir / "report.md", "\n".join(lines))
    write_json(cfg.out_dir / "results.json", {"gaps": gaps, "final": finals, "summary": summary,
                                              "done": {a: is_done(d) for a, d in runs.items()},
                                              **provenance(cfg)})
    return cfg.out_dir / "report.md"
