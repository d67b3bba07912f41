"""Compute planner: what an experiment YAML costs before anything runs (``preschool plan``).

For every arm and stage it prints the parameter counts (embedding and
non-embedding), tokens, training FLOPs, memory per GPU for DDP and FSDP with
and without activation checkpointing at the configured micro-batch, whether that
fits, the largest micro-batch that fits, and wall-time / GPU-hours at an assumed
MFU. Arithmetic only: shapes come from the HF config of the preset
(:func:`preschool.train.model.describe`), no model is built, so a 7B plan takes
as long as a micro one.

FLOPs: :mod:`preschool.train.flops` (6 N_matmul + 6 L d_attn s per token).
Wall time: FLOPs / (devices x peak x MFU), where an MFU counts model FLOPs only;
activation recompute is counted once (:func:`time_factor`): the default MFU,
0.35, was derived from a run that recomputed, so it already holds the recompute
and a mode without it runs 6/8 of that time (``--mfu-without-recompute`` says
the MFU came from a run without recompute: a recomputing mode then costs 8/6).

Memory per GPU: :mod:`preschool.train.memory` (the formulas, and how they were checked).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import load_yaml
from .errors import ConfigError
from .train.flops import GIB, GPU, GPUS, flops_per_token
from .train.memory import CUDA_RESERVED, Memory, largest_micro, memory  # noqa: F401  (memory: the planner's API)

USABLE = 0.9  # share of a card's memory a plan may fill (allocator fragmentation; assumption)
MODES = (("ddp", "none"), ("fsdp", "none"), ("ddp", "blocks"), ("fsdp", "blocks"))  # preference order


# ----------------------------------------------------------------------------- what to plan


@dataclass
class StageTarget:
    name: str
    tokens: int
    seq_len: int
    counts_as_pt: bool = True  # a language stage (a ladder's plan adds these up apart from the others)


@dataclass
class ArmTarget:
    """One arm as the planner sees it: model summary, batch settings and stages."""

    name: str
    desc: dict[str, Any]  # train.model.describe() of the arm's model at its vocab
    batch_size: int
    micro_batch_size: int | None
    stages: list[StageTarget]
    seeds: int = 1
    extra_params: int = 0  # parameters outside the HF model (compartment embedding)
    # the leading stages another arm trains for it (a shared prefix, experiment/branches.py): (that arm, stages)
    shared: tuple[str, int] | None = None
    parallel: str | None = None  # the arm's train.parallel
    checkpointing: str | None = None  # the arm's train.activation_checkpointing
    notes: list[str] = field(default_factory=list)


def _tokenizer_vocab(tok: dict, out_dir: Path, notes: list[str]) -> int:
    """The model vocabulary: the prepared data's when it exists, else what the tokenizer config implies."""
    from .layout import data_manifest_path

    manifest = data_manifest_path(out_dir)
    if manifest.is_file():
        from .io import read_json

        m = read_json(manifest)
        # derived datasets (an arm's compartments) widen only their arms' vocabulary: see load_targets
        sizes = [m["tokenizer"]["vocab_size"]] + [d.get("vocab_size", 0) for d in m.get("datasets", {}).values()
                                                  if "source" not in d]
        notes.append(f"vocab from the prepared data ({manifest})")
        return int(max(sizes))
    kind = tok.get("kind", "train")
    if kind == "train":
        return int(tok.get("vocab_size") or 2048)
    if kind == "hf":
        # the tokenizer's length as the config declares it (prepare checks it), else a local folder's
        if tok.get("vocab_size"):
            return int(tok["vocab_size"])
        local = Path(str(tok.get("name") or "")) / "tokenizer.json"
        if local.is_file():
            import json

            model = json.loads(local.read_text(encoding="utf-8"))
            vocab = model["model"].get("vocab") or {}
            n = len(vocab) if isinstance(vocab, list) else max(vocab.values(), default=-1) + 1  # Unigram: a list
            return max([n] + [t["id"] + 1 for t in model.get("added_tokens", [])])
        raise ConfigError("tokenizer.vocab_size", f"give the size of tokenizer {tok.get('name')!r} "
                          "(len(tokenizer)) to plan before the data is prepared")
    path = tok.get("path")
    if path:
        import json

        p = Path(path)
        p = p / "tokenizer.json" if p.is_dir() else p
        if p.is_file():
            model = json.loads(p.read_text(encoding="utf-8"))
            return len(model["model"]["vocab"]) + len(model.get("added_tokens", []))
    raise ConfigError("tokenizer.path", f"cannot read the vocabulary size from {path!r}; "
                      "prepare the data first or point tokenizer.path at a tokenizer.json")


def load_targets(path: str | Path, overrides: list[str] = ()) -> tuple[str, list[ArmTarget]]:
    """(experiment name, one ArmTarget per arm).

    An arm's vocabulary is the tokenizer's (the prepared data's, when it exists), widened by the
    derived datasets its stages train on (``DatasetKind.vocab_size``: c compartments of V ids);
    a callback config with ``extra_params(hidden_size, kinds)`` adds parameters outside the HF model
    (the compartment embedding).
    """
    from .experiment import load_experiment

    raw = load_yaml(path)
    exp = load_experiment(path, list(overrides))
    if len(exp.rungs) > 1:
        raise ConfigError("rung", f"{exp.cfg.name} is a ladder: plan one rung (--rung, one of {exp.rungs}) or "
                          "every rung (preschool plan without --rung)")
    return exp.cfg.name, config_targets(exp, exp.rungs[0], raw.get("tokenizer") or {})


def config_targets(exp, rung: str | None, tokenizer: dict) -> list[ArmTarget]:
    """One ArmTarget per arm of ``exp`` (a resolved :class:`~preschool.experiment.Experiment`) at ``rung``
    (None without a ladder), read from its run records of the first seed, the vocabulary read from
    ``tokenizer`` (the YAML's mapping) or the prepared data (:func:`load_targets`)."""
    from .data.builders.derived import DerivedSpec, kind_of
    from .train.callbacks.registry import callback_configs
    from .train.init_from import describe_folder
    from .train.model import describe, embedding_rows

    cfg = exp.cfg
    notes: list[str] = []
    vocab = _tokenizer_vocab(tokenizer, cfg.out_dir, notes)
    if not notes and cfg.renders_reserved():
        notes.append("synthetic symbols on reserved ids add rows to the vocabulary once the data exists "
                     "(not counted here)")
    out = []
    for i, arm in enumerate(cfg.arms):
        rec = exp.record((rung, arm.name, cfg.seeds[0]))
        tcfg = rec.train
        kinds = [kind_of(cfg.data[t], f"data.{t}") for t in rec.stage_datasets
                 if isinstance(cfg.data[t], DerivedSpec)]
        # a run started from a folder (init_from) trains the folder's model: its config.json's shape
        desc = describe_folder(tcfg.init_from) or \
            describe(tcfg.model, embedding_rows(tcfg.model, max([vocab] + [k.vocab_size(vocab) for k in kinds])))
        extra = sum(cb.extra_params(desc["hidden_size"], kinds)
                    for cb in callback_configs(arm.callbacks, f"arms[{i}].callbacks").values()
                    if hasattr(cb, "extra_params"))
        stages = [StageTarget(s.name, s.tokens, cfg.seq_len, s.counts_as_pt) for s in tcfg.stages]
        shared = (rec.branch.parent.arm, rec.branch.stages) if rec.branch is not None else None
        out.append(ArmTarget(arm.name, desc, tcfg.batch_size, tcfg.micro_batch_size, stages, len(cfg.seeds), extra,
                             shared, tcfg.parallel, tcfg.activation_checkpointing, notes=list(notes)))
    return out


def ladder_targets(exp, tokenizer: dict) -> list[tuple[str, list[ArmTarget]]]:
    """``(rung, its ArmTargets)`` for every rung of the ladder ``exp`` plans (:attr:`~Experiment.rungs`)."""
    return [(rung, config_targets(exp, rung, tokenizer)) for rung in exp.rungs]


def stage_cost(arm: ArmTarget, st: StageTarget) -> tuple[int, int, float]:
    """``(steps, tokens, FLOPs)`` of one stage: the trainer trains whole steps of the global batch."""
    steps = math.ceil(st.tokens / (arm.batch_size * st.seq_len))
    tokens = steps * arm.batch_size * st.seq_len
    return steps, tokens, flops_per_token(arm.desc, st.seq_len) * tokens


def training_flops(arm: ArmTarget) -> float:
    """Training FLOPs of one run of the arm (every stage, whole steps; model FLOPs, train/flops.py)."""
    return sum(stage_cost(arm, st)[2] for st in arm.stages)


# ----------------------------------------------------------------------------- the plan


@dataclass
class Hardware:
    name: str
    count: int
    peak_flops: float  # per device
    memory_bytes: float  # per device
    device: str  # "cuda" or "cpu"
    source: str


def cpu_hardware(measure: bool = True) -> Hardware:
    """This machine as one device: RAM from the OS, peak = a fp32 matmul rate measured now."""
    from .train.flops import matmul_flops

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    rate = matmul_flops("cpu") if measure else float("nan")
    import torch

    return Hardware(f"this CPU ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)", 1, rate, ram,
                    "cpu", f"fp32 matmul rate measured at plan time (1024^3, ~0.3 s): {rate / 1e9:.0f} GFLOP/s")


def gpu_hardware(kind: str, count: int) -> Hardware:
    g: GPU = GPUS.get(kind, "--gpu").cls  # unknown: ConfigError naming the known rows
    return Hardware(g.name, count, g.bf16_flops, g.memory_bytes, "cuda", g.source)


@dataclass
class StageEstimate:
    """What one stage of one arm costs, estimated (the trainer's stage plan is train/stages.py's StagePlan)."""

    arm: str
    stage: str
    tokens: int
    steps: int
    seq_len: int
    flops: float
    micro: int
    local_batch: int
    memory: dict[str, Memory]
    max_micro: dict[str, int]
    fits: dict[str, bool]
    chosen: str | None
    seconds: float
    gpu_hours: float


def mode_name(parallel: str, ckpt: str) -> str:
    return parallel + (" + ckpt" if ckpt == "blocks" else "")


RECOMPUTE = 8 / 6  # training FLOPs with one forward recomputed (activation checkpointing), per model FLOP


def time_factor(recomputes: bool, mfu_recomputed: bool) -> float:
    """Wall-time multiplier of a mode over ``FLOPs / (devices x peak x MFU)``.

    An MFU counts model FLOPs only, so one measured on a run that recomputed
    already has the recompute in its wall-time: the hardware did 8/6 x the work.
    The recompute is counted once: a mode that recomputes costs 8/6 over an MFU
    measured without recompute, and one that does not is 6/8 of an MFU measured
    with it (the default 0.35 is the paper's 3B run, which recomputed).
    """
    return (RECOMPUTE if recomputes else 1.0) / (RECOMPUTE if mfu_recomputed else 1.0)


def plan_arm(arm: ArmTarget, hw: Hardware, mfu: float, mfu_recomputed: bool = True) -> list[StageEstimate]:
    """Every stage of ``arm`` on ``hw`` at ``mfu`` (measured with recompute when ``mfu_recomputed``)."""
    world = hw.count
    capacity = hw.memory_bytes * (USABLE if hw.device != "cpu" else 1.0)
    out = []
    for st in arm.stages:
        steps, tokens, flops = stage_cost(arm, st)
        local = max(arm.batch_size // world, 0)
        micro = min(arm.micro_batch_size or local, local) if local else 0
        mems, maxm, fits = {}, {}, {}
        for par, ac in MODES:
            key = mode_name(par, ac)
            if local == 0:
                continue
            mems[key] = memory(arm.desc, micro, st.seq_len, world, par, ac, hw.device, arm.extra_params, local)
            fits[key] = mems[key].total <= capacity
            maxm[key] = largest_micro(arm.desc, st.seq_len, world, par, ac, hw.device, capacity, local,
                                      arm.extra_params)
        configured = mode_name(arm.parallel or "ddp", arm.checkpointing or "none")
        if fits.get(configured):
            chosen = configured
        else:  # the first mode (preference order: no recompute first) that fits some micro-batch
            chosen = next((k for k in maxm if maxm[k] > 0), None)
        seconds = flops * time_factor(bool(chosen and "ckpt" in chosen), mfu_recomputed) / (world * hw.peak_flops * mfu)
        out.append(StageEstimate(arm.name, st.name, tokens, steps, st.seq_len, flops, micro, local, mems, maxm, fits,
                             chosen, seconds, seconds * world / 3600))
    return out


# ----------------------------------------------------------------------------- printing


def _n(x: float) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.0f}"


def _gib(x: float) -> str:
    return f"{x / GIB:.1f}" if x >= 0.05 * GIB else f"{x / GIB:.3f}"


def _dur(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def format_plan(name: str, arms: list[ArmTarget], plans: list[list[StageEstimate]], hw: Hardware, mfu: float,
                mfu_recomputed: bool = True) -> str:
    lines = [f"plan: {name} on {hw.count} x {hw.name}, MFU {mfu:.2f} "
             f"(measured {'with' if mfu_recomputed else 'without'} activation recompute: a mode that "
             f"{'does not recompute runs x6/8' if mfu_recomputed else 'recomputes runs x8/6'})",
             f"  peak {hw.peak_flops / 1e12:.3g} TFLOP/s and {hw.memory_bytes / GIB:.0f} GiB per device "
             f"({hw.source})"]
    if hw.device != "cpu":
        lines.append(f"  fits = peak <= {USABLE:.0%} of memory, peak includes {CUDA_RESERVED / GIB:.0f} GiB "
                     "for the CUDA context and workspaces (assumptions; GPU rows are estimates)")
    total_h, total_s = 0.0, 0.0
    saved = {"tokens": 0, "h": 0.0, "s": 0.0}  # what the shared prefixes do not train again
    all_tokens = 0
    for arm, stages in zip(arms, plans):
        d = arm.desc
        P = d["params_total"] + arm.extra_params
        lines += ["", f"arm {arm.name}: {d['preset']} ({d['family']}, {d['layers']} x {d['hidden_size']}, "
                      f"{d['heads']}/{d['kv_heads']} heads of {d['head_dim']}, FFN {d['ffn']}, vocab {d['vocab_size']:,})",
                  f"  parameters {P:,} = embedding {d['params_embedding']:,} + non-embedding "
                  f"{d['params_non_embedding'] + arm.extra_params:,}"
                  + (f" (incl. {arm.extra_params:,} compartment embedding)" if arm.extra_params else ""),
                  f"  global batch {arm.batch_size} sequences; per-rank batch {stages[0].local_batch if stages else 0}"
                  + (f"; configured: train.parallel {arm.parallel}" if arm.parallel else "")
                  + (f", activation_checkpointing {arm.checkpointing}" if arm.checkpointing else "")]
        for note in arm.notes:
            lines.append(f"  note: {note}")
        if arm.shared is not None:
            parent, k = arm.shared
            lines.append(f"  shared prefix: its first {k} stage(s) are arm {parent}'s, trained once (it continues "
                         "from that run's checkpoint; not counted in the tree's total)")
        for j, sp in enumerate(stages):
            all_tokens += sp.tokens * arm.seeds
            if arm.shared is not None and j < arm.shared[1]:
                saved["tokens"] += sp.tokens * arm.seeds
                saved["h"] += sp.gpu_hours * arm.seeds
                saved["s"] += sp.seconds * arm.seeds
        for sp in stages:
            lines.append(f"  stage {sp.stage}: {_n(sp.tokens)} tokens ({sp.steps:,} steps x {arm.batch_size} x "
                         f"{sp.seq_len}), {flops_per_token(d, sp.seq_len) / 1e9:.3g} GFLOP/token -> "
                         f"{sp.flops:.3g} FLOPs")
            if sp.local_batch == 0:
                lines.append(f"    global batch {arm.batch_size} < {hw.count} devices: every rank needs a sequence")
                continue
            lines.append(f"    memory per device at micro-batch {sp.micro} (GiB):")
            lines.append("      mode           weights  grads  AdamW  activ.  buffers   total  fits  max micro")
            for key, m in sp.memory.items():
                lines.append(f"      {key:<13} {_gib(m.weights):>8} {_gib(m.grads):>6} {_gib(m.optimizer):>6} "
                             f"{_gib(m.activations):>7} {_gib(m.buffers):>8} {_gib(m.total):>7}  "
                             f"{'yes' if sp.fits[key] else 'NO':>4}  {sp.max_micro[key]:>9}")
            if sp.chosen is None:
                lines.append("    does not fit in any mode even at micro-batch 1: more devices or a smaller model")
                continue
            at = "" if sp.fits[sp.chosen] else f" at micro-batch {sp.max_micro[sp.chosen]}"
            lines.append(f"    {sp.chosen}{at}: {_dur(sp.seconds)} on {hw.count} device(s) = {sp.gpu_hours:,.1f} "
                         "device-hours per seed")
            total_h += sp.gpu_hours * arm.seeds
            total_s += sp.seconds * arm.seeds
    lines += ["", f"total: {total_h:,.1f} device-hours ({_dur(total_s)} on {hw.count} device(s)) for "
                  f"{sum(a.seeds for a in arms)} arm x seed runs trained independently"]
    if saved["tokens"]:
        lines.append(f"as a tree (shared prefixes trained once): {_n(all_tokens - saved['tokens'])} of "
                     f"{_n(all_tokens)} tokens, {total_h - saved['h']:,.1f} device-hours "
                     f"({_dur(total_s - saved['s'])}); saved {_n(saved['tokens'])} tokens "
                     f"({saved['tokens'] / all_tokens:.0%}), {saved['h']:,.1f} device-hours ({_dur(saved['s'])})")
    return "\n".join(lines)


def data_repeats(exp, rung: str | None) -> list[str]:
    """Notes for the stages of ``exp``'s runs at ``rung`` that train more tokens than their dataset holds
    (the trainer then repeats it: one more epoch each time it runs out)."""
    cfg = exp.cfg
    notes = []
    for arm in cfg.arms:
        for st in exp.record((rung, arm.name, cfg.seeds[0])).train.stages:
            if not isinstance(st.data, str):  # a mixture's sources are each a share of the stage
                continue
            target = arm.datasets.get(st.data, st.data)
            held = getattr(cfg.data.get(target), "tokens", None)  # derived datasets hold their source's
            if held and st.tokens > held:
                notes.append(f"arm {arm.name} stage {st.name}: {_n(st.tokens)} tokens from data.{target} of "
                             f"{_n(held)}: {st.tokens / held:.1f} epochs")
    return notes


def format_ladder_plan(name: str, rungs: list[tuple[str, list[ArmTarget]]], plans: list[list[list[StageEstimate]]],
                       hw: Hardware, mfu: float, notes: dict[str, list[str]] | None = None) -> str:
    """The ladder's cost: per rung and arm the model, parameters, tokens, training FLOPs and time of one
    run, then per rung and in total over every rung x arm x seed (``preschool plan --rung R``: a rung's
    memory per mode). Times as :func:`plan_arm` (the mode each stage would run in)."""
    seeds = rungs[0][1][0].seeds if rungs and rungs[0][1] else 0
    lines = [f"plan: {name} ladder of {len(rungs)} rungs x {len(rungs[0][1]) if rungs else 0} arms x {seeds} seeds "
             f"on {hw.count} x {hw.name}, MFU {mfu:.2f}",
             f"  peak {hw.peak_flops / 1e12:.3g} TFLOP/s per device ({hw.source})",
             "  per run: parameters total (non-embedding), tokens of stages that count as PT + of the others; "
             "memory per mode: preschool plan CONFIG --rung NAME", "",
             "| rung | arm | model | params | PT tokens | other tokens | FLOPs / run | time / run |",
             "|---|---|---|---|---|---|---|---|"]
    total_f = total_s = 0.0
    per_rung = []
    for (rung, arms), arm_plans in zip(rungs, plans):
        rung_f = rung_s = 0.0
        for arm, sps in zip(arms, arm_plans):
            d = arm.desc
            counts = {s.name: s for s in arm.stages}
            pt = sum(sp.tokens for sp in sps if counts[sp.stage].counts_as_pt)
            flops, secs = math.fsum(sp.flops for sp in sps), math.fsum(sp.seconds for sp in sps)
            fit = "" if all(sp.chosen for sp in sps) else " (does not fit)"
            lines.append(f"| {rung} | {arm.name} | {d['preset']} {d['layers']}x{d['hidden_size']} | "
                         f"{_n(d['params_total'] + arm.extra_params)} ({_n(d['params_non_embedding'])}) | {_n(pt)} | "
                         f"{_n(sum(sp.tokens for sp in sps) - pt)} | {flops:.3g} | {_dur(secs)}{fit} |")
            rung_f += flops * arm.seeds
            rung_s += secs * arm.seeds
        per_rung.append(f"  {rung}: {rung_f:.3g} FLOPs, {_dur(rung_s)} on {hw.count} device(s)")
        total_f += rung_f
        total_s += rung_s
    lines += ["", "per rung (every arm x seed):", *per_rung, "",
              f"total: {total_f:.3g} FLOPs, {_dur(total_s)} on {hw.count} device(s) "
              f"({total_s * hw.count / 3600:,.1f} device-hours) for {sum(len(a) for _, a in rungs) * seeds} runs"]
    for rung, ns in (notes or {}).items():
        lines += [f"note ({rung}): {n}" for n in ns]
    return "\n".join(lines)
