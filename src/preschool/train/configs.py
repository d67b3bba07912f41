"""What determines a training run: :class:`StageConfig` (one stage) and :class:`TrainConfig` (the run).

A stage's LR schedule is one nested :class:`~.schedules.ScheduleConfig`::

    stages:
      - {name: pt, data: raw, tokens: 3e6, schedule: {name: cosine, warmup: 0.05, min_lr_ratio: 0.0}}
      - {name: ft, data: qa, tokens: 1e5, schedule: constant}   # a bare name: that shape, the defaults

``schedule.lr`` unset (null) means the run's ``lr``. The flat spelling of
earlier versions (``schedule: wsd`` beside ``lr``, ``warmup``,
``min_lr_ratio``, ``wsd_decay``, ``wsd_decay_shape`` on the stage) is still
read, with a ``FutureWarning`` (:meth:`StageConfig.upgrade_raw`).

Stage semantics (the trainer, train/trainer.py, carries them out):

- ``reset_optimizer: true`` (default) gives the stage fresh AdamW moments and
  its own schedule from warm-up: only the weights carry over. This is the
  verify-ppt PPT -> PT protocol (``load_optimizer: false``,
  ``load_lr_scheduler: false``; spec synthetic_ppt.md A.4).
- ``group``: stages with the same group share one schedule spanning their
  summed steps and one optimizer state. If a stage of another group runs in
  between, the group's optimizer state and schedule position are saved and
  restored when it resumes; if the resumed stage reads the same data as the
  group's first stage, it also continues that data stream (no row repeats).
  This is the "insert a synthetic stage after X% of PT" timing variant.
  Schedule settings come from the group's first stage.
- ``embeddings_at_start``: ``keep``, ``reinit`` (input embeddings ~ N(0,
  init_std); with tied embeddings the head changes too) or ``mean`` (every row
  outside ``reserved_ids = [lo, hi)`` set to the mean of the reserved rows),
  the transfer options of procedural pretraining (Shinnick et al. 2025).

``reserved_ids: auto`` is resolved from the datasets' shard manifests by
:func:`resolve_reserved_ids` before training and before a run folder is checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, Mapping

from .. import config as C
from ..config import check
from ..errors import ConfigError
from ..io import read_json
from ..layout import MANIFEST
from .model import ModelConfig
from .schedules import ScheduleConfig


@dataclass
class WandbConfig:
    """Where and how a run is logged to Weights & Biases (``train.wandb``; the logger is callbacks/wandb.py)."""

    project: str = "preschool"
    entity: str | None = None
    name: str | None = None  # default: <experiment>/<arm>/seed<k> from the run folder
    group: str | None = None  # default: the experiment (the run folder's <out>)
    tags: list[str] = field(default_factory=list)
    mode: Literal["online", "offline", "disabled"] | None = None  # None: W&B's default / WANDB_MODE

    def validate(self) -> None:
        check(bool(self.project), "project", "must be a non-empty W&B project name")


@dataclass
class InitFrom:
    """A run's or a stage's starting weights (train/init_from.py): a local HF folder (``path``), or (in an experiment) an arm
    of it at a ``stage`` end, a ``step`` or a ``pt_tokens`` count, which the experiment turns into ``path``."""

    path: str | None = None  # a save_pretrained folder (a checkpoint of this toolkit too)
    arm: str | None = None  # experiment only: an arm of the same experiment and seed
    stage: str | None = None  # ... at the end of this stage of it
    step: int | None = None  # ... at this step (a checkpoint there)
    pt_tokens: int | None = None  # ... at its first checkpoint with at least this many PT tokens
    optimizer: Literal["reset", "keep"] = "reset"  # keep: the source's AdamW state (this toolkit's checkpoints)

    def validate(self) -> None:
        check(self.path is not None or self.arm is not None, "", "give a folder (path) or an arm of the experiment "
              "(arm)")
        where = [k for k in ("stage", "step", "pt_tokens") if getattr(self, k) is not None]
        if self.arm is None:
            check(not where, where[0] if where else "", "only with arm: (a point of an arm's run)")
        else:
            check(len(where) <= 1, where[-1] if where else "", f"give one of stage, step, pt_tokens, not {where}")
        for k in ("step", "pt_tokens"):
            v = getattr(self, k)
            check(v is None or (isinstance(v, int) and v >= 0), k, f"must be a count >= 0, got {v!r}")

    def describe(self) -> str:
        """The start in words: ``arm base step 300``, ``arm base end of stage pt``, ``DIR``."""
        if self.arm is None:
            return str(self.path)
        at = (f"step {self.step}" if self.step is not None else f"{self.pt_tokens:,} PT tokens"
              if self.pt_tokens is not None else f"end of stage {self.stage}" if self.stage is not None else "end")
        return f"arm {self.arm} {at}"


# the schedule keys a stage carried flat before they moved into `schedule:` (the same names there;
# the flat `schedule: <name>` is the shorthand that still stands)
_FLAT_SCHEDULE_KEYS = ("lr", "warmup", "min_lr_ratio", "wsd_decay", "wsd_decay_shape")


#: the most tokens a stage may train: 2^53, past which a float (a token-per-parameter ratio, a schedule's
#: position, an epoch count) no longer holds a count exactly; about 9e15, 600 times the largest runs published
MAX_TOKENS = 2**53


def check_tokens(tokens: float, field: str, how: str = "") -> None:
    """ConfigError on ``field`` unless ``tokens`` is a finite count within :data:`MAX_TOKENS` (``how`` says how
    it was reached: a ladder's ``multiplier: 1e308`` makes a budget infinite, ``ratio: 1e300`` a 300-digit
    count that the plan printed as an epoch count)."""
    if not (math.isfinite(tokens) and tokens <= MAX_TOKENS):
        raise ConfigError(field, f"{how}{float(tokens):.3g} tokens, more than 2^53 (about 9.0e15), past which token "
                          "counts are not exact; give a smaller value")


@dataclass
class StageConfig:
    """One stage: ``data`` (dataset name or {name: weight}), token budget, schedule and carry-over rules."""

    name: str
    data: str | dict[str, float]
    tokens: int
    # the LR schedule (YAML: a mapping, or a bare name for that shape with defaults); lr null: TrainConfig.lr
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    reset_optimizer: bool = True
    counts_as_pt: bool = True
    pt_sources: list[str] | None = None  # mixture sources counted as PT; None = its language sources (docstring)
    group: str | None = None
    embeddings_at_start: Literal["keep", "reinit", "mean"] = "keep"
    # weights (and with optimizer: keep, AdamW state) this stage starts from: a mid-run switch (train/init_from.py)
    init_from: InitFrom | None = None

    @classmethod
    def upgrade_raw(cls, data: dict[str, Any], path: str = "") -> tuple[dict[str, Any], list[str]]:
        """A raw stage mapping in the current spelling, and a note per old spelling met (config.py's hook).

        ``schedule: <name>`` becomes ``schedule: {name: <name>}`` (a shorthand, no note); the flat
        keys of earlier versions (``lr``, ``warmup``, ... on the stage) move into ``schedule``. A key
        given both flat and inside ``schedule`` raises ConfigError naming the flat one.
        """
        at = f"{path}." if path else ""
        data = dict(data)
        sched = data.get("schedule")
        if isinstance(sched, str):
            data["schedule"] = sched = {"name": sched}
        flat = [k for k in _FLAT_SCHEDULE_KEYS if k in data]
        if not flat:
            return data, []  # nothing to move (a schedule that is no mapping fails in from_dict, named)
        if not (sched is None or isinstance(sched, dict)):  # the bad value, not the flat key beside it
            raise ConfigError(f"{at}schedule", f"expected a mapping for ScheduleConfig or a name, got {sched!r}")
        sched = dict(sched or {})
        for k in flat:
            if k in sched:
                raise ConfigError(f"{at}{k}", f"given both here and as {at}schedule.{k}; keep only schedule.{k}")
            sched[k] = data.pop(k)
        data["schedule"] = sched
        return data, [f"{at}{k} -> {at}schedule.{k}" for k in flat]

    @property
    def datasets(self) -> list[str]:
        """Names of the datasets this stage reads (one, or a mixture's components)."""
        return [self.data] if isinstance(self.data, str) else list(self.data)

    def validate(self) -> None:
        check(bool(self.name) and "/" not in self.name, "name", f"must be a non-empty name without '/', got {self.name!r}")
        check(self.tokens > 0, "tokens", f"must be > 0, got {self.tokens}")
        check_tokens(self.tokens, "tokens")
        if isinstance(self.data, str):
            check(bool(self.data), "data", "must name a dataset")
        else:
            check(bool(self.data), "data", "mixture must name at least one dataset")
            for k, w in self.data.items():
                check(w >= 0 and math.isfinite(w), f"data.{k}", f"weight must be >= 0, got {w}")
            check(sum(self.data.values()) > 0, "data", "mixture weights sum to 0")
        if self.init_from is not None:
            C.validate(self.init_from, "init_from")
        for k, n in enumerate(self.pt_sources or []):
            check(n in self.datasets, f"pt_sources[{k}]", f"{n!r} is not a source of this stage ({self.datasets})")
        # a StageConfig built in Python skips from_dict's coercion: say so here, not at the first step
        check(isinstance(self.schedule, ScheduleConfig), "schedule",
              f"must be a ScheduleConfig, got {type(self.schedule).__name__} (YAML: a mapping or a name)")
        C.validate(self.schedule, "schedule")


@dataclass
class TrainConfig:
    """Everything that determines a training run (model, stages, optimisation, logging, checkpoints)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    stages: list[StageConfig] = field(default_factory=list)
    # the weights the run starts from instead of a fresh `model` (train/init_from.py): the folder's model
    init_from: InitFrom | None = None
    seed: int = 0
    batch_size: int = 16  # global sequences per optimizer step
    micro_batch_size: int | None = None  # per rank per forward; None: the whole rank batch
    lr: float = 1e-3
    weight_decay: float = 0.1
    decay_embeddings: bool = False  # True: embeddings / LM head decay too (HF Trainer, L2T; verify-ppt)
    decay_all_params: bool = False  # True: every parameter decays, norms and biases too (Nanotron, verify-ppt)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float = 1.0  # 0 disables clipping
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    # auto: fp32 on CPU, bf16 autocast on CUDA; bf16 on CPU pays off with AMX / AVX-512 BF16 (train/precision.py);
    # pure_bf16: the model itself in bf16 (weights, gradients, AdamW states), no autocast (L2T)
    precision: Literal["auto", "fp32", "bf16", "pure_bf16"] = "auto"
    # false | true/"model" (torch.compile of the whole forward) | "blocks" (each decoder layer) | "auto" (a CPU:
    # blocks when the run is long enough to pay for the compiling, else off; train/kernels.py)
    compile: bool | Literal["off", "model", "blocks", "auto"] = False
    # Liger's fused RMSNorm/SwiGLU on CUDA, this model only; auto: when not compiled (train/kernels.py): auto | off | liger
    kernels: Literal["auto", "off", "liger"] = "auto"
    parallel: Literal["ddp", "fsdp"] = "ddp"  # data parallel mode; see train/parallel.py
    activation_checkpointing: Literal["none", "blocks"] = "none"  # blocks: recompute each block in backward
    # CPU runs: "retain" keeps freed memory in the process heap (no page faults on every
    # step: 1.06-1.19x at the CPU presets; see train/cpu_heap.py); "system" leaves glibc's defaults
    cpu_heap: Literal["retain", "system"] = "retain"
    eval_every: int = 100  # 0 disables periodic validation (stage ends still validate)
    # "log": validate at step 0, at log-spaced steps round(10**(k / evals_per_decade)) and at the end,
    # instead of every eval_every steps (the early resolution loss-vs-step comparisons such as slowdown need)
    eval_schedule: Literal["linear", "log"] = "linear"
    evals_per_decade: int = 4
    val_rows: int = 64
    val: list[str] | None = None  # datasets whose val/ split is scored; None: every stage dataset with a val/
    verify: Literal["full", "size"] = "full"  # shard check before first use: sha256 of every file, or sizes only
    checkpoint_every: int = 100
    checkpoint_schedule: Literal["linear", "log"] = "linear"
    checkpoints_per_decade: int = 4  # log schedule: steps round(10**(k / n)), k = 0, 1, ...
    # checkpoints that keep trainer_state.pt (optimizer, schedule, RNG, data position): the newest N, or "all";
    # two by default so a resume can fall back to the previous checkpoint if the newest is damaged ("last" = 1)
    keep_optimizer_state: int | Literal["last", "all"] = 2
    # a step whose loss or gradient norm is not finite (train/trainer.py): "stop" the run (TrainingError naming
    # stage, step and batch; the newest checkpoint stays the last good one, no DONE); "skip" that batch (no
    # optimizer step); "rewind" to the stage's newest checkpoint and skip every batch since it (PaLM's recovery
    # from loss spikes). Each one is an {"event": "nonfinite"} row in metrics.jsonl; the run stops at the
    # (nonfinite_limit + 1)-th. Neither changes a run that never meets one, so a stopped run may go on with skip.
    nonfinite: Literal["stop", "skip", "rewind"] = "stop"
    nonfinite_limit: int = 3
    log_every: int = 10
    # [lo, hi): reserved (synthetic) token ids; "auto": the range the datasets' shard manifests record
    # for what they render on reserved ids (resolve_reserved_ids, before training and run-folder checks)
    reserved_ids: list[int] | Literal["auto"] | None = None
    attention_reset_between_docs: bool = False
    # how documents are kept apart (train/attention.py): auto (flex on CUDA, dense elsewhere) | dense | flex
    doc_attention: Literal["auto", "dense", "flex"] = "auto"
    # loss without the [B, L, V] logits tensor (train/loss.py): auto | off | chunked | liger
    fused_loss: Literal["auto", "off", "chunked", "liger"] = "auto"
    tensorboard: bool = False
    wandb: WandbConfig | None = None  # Weights & Biases logging (callbacks/wandb.py; the `wandb` extra)
    progress: bool = True

    def validate(self) -> None:
        check(len(self.stages) > 0, "stages", "at least one stage is required")
        if self.init_from is not None:
            C.validate(self.init_from, "init_from")
            check(self.stages[0].init_from is None, "stages[0].init_from",
                  "the run's init_from already gives the first stage its weights; keep one of them")
        names = [s.name for s in self.stages]
        for i, s in enumerate(self.stages):
            C.validate(s, f"stages[{i}]")
            check(names.count(s.name) == 1, f"stages[{i}].name", f"duplicate stage name {s.name!r}")
            if s.embeddings_at_start == "mean":
                check(self.reserved_ids is not None, f"stages[{i}].embeddings_at_start",
                      "'mean' needs reserved_ids: [lo, hi) in the train config")
        if self.wandb is not None:  # an overlay may have built or changed it: checked with the rest
            C.validate(self.wandb, "wandb")
        check(self.batch_size > 0, "batch_size", f"must be > 0, got {self.batch_size}")
        if self.micro_batch_size is not None:
            check(self.micro_batch_size > 0, "micro_batch_size", f"must be > 0, got {self.micro_batch_size}")
        check(self.lr > 0, "lr", f"must be > 0, got {self.lr}")
        check(self.weight_decay >= 0, "weight_decay", f"must be >= 0, got {self.weight_decay}")
        check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas", f"must be two numbers in [0, 1), got {self.betas}")
        check(self.eps > 0, "eps", f"must be > 0, got {self.eps}")
        check(self.grad_clip >= 0, "grad_clip", f"must be >= 0, got {self.grad_clip}")
        check(self.device == "auto" or self.device == "cpu" or self.device.startswith("cuda"), "device",
              f"must be auto, cpu or cuda[:N], got {self.device!r}")
        check(self.eval_every >= 0, "eval_every", f"must be >= 0, got {self.eval_every}")
        check(self.evals_per_decade > 0, "evals_per_decade", f"must be > 0, got {self.evals_per_decade}")
        check(self.val_rows > 0, "val_rows", f"must be > 0, got {self.val_rows}")
        check(self.checkpoint_every > 0, "checkpoint_every", f"must be > 0, got {self.checkpoint_every}")
        check(self.checkpoints_per_decade > 0, "checkpoints_per_decade", "must be > 0")
        check(self.log_every > 0, "log_every", f"must be > 0, got {self.log_every}")
        if isinstance(self.keep_optimizer_state, int):
            check(self.keep_optimizer_state >= 1, "keep_optimizer_state",
                  f"must be >= 1, 'last' or 'all', got {self.keep_optimizer_state}")
        check(self.nonfinite_limit >= 1, "nonfinite_limit", f"must be >= 1, got {self.nonfinite_limit}")
        if isinstance(self.reserved_ids, list):
            check(len(self.reserved_ids) == 2 and 0 <= self.reserved_ids[0] < self.reserved_ids[1], "reserved_ids",
                  f"must be [lo, hi) with 0 <= lo < hi, got {self.reserved_ids}")
        # stages of one group resume one schedule: check they agree on it
        first: dict[str, int] = {}
        for i, s in enumerate(self.stages):
            if s.group is None:
                continue
            if s.group not in first:
                first[s.group] = i
                continue
            # compared resolved: lr unset and lr equal to the run's are the same schedule
            a, b = s.schedule.resolved(self.lr), self.stages[first[s.group]].schedule.resolved(self.lr)
            differ = [f.name for f in fields(a) if getattr(a, f.name) != getattr(b, f.name)]
            if differ:
                raise ConfigError(f"stages[{i}].schedule.{differ[0]}", f"stages of group {s.group!r} share one "
                                  f"schedule; differs from stages[{first[s.group]}]")


def resolve_reserved_ids(cfg: TrainConfig, datasets: Mapping[str, str | Path]) -> TrainConfig:
    """``cfg`` with ``reserved_ids: auto`` replaced by ``[lo, hi)`` covering every reserved-id range the
    datasets' ``train/`` shard manifests record (``ConfigError`` when none renders on reserved ids)."""
    if cfg.reserved_ids != "auto":
        return cfg
    ranges = [m["reserved_ids"] for p in datasets.values() if (Path(p) / "train" / MANIFEST).is_file()
              if (m := read_json(Path(p) / "train" / MANIFEST)).get("reserved_ids")]
    if not ranges:
        raise ConfigError("reserved_ids", f"'auto', but none of the datasets ({', '.join(sorted(datasets))}) "
                          "renders symbols on reserved ids; give [lo, hi) or render: reserved")
    return replace(cfg, reserved_ids=[min(r[0] for r in ranges), max(r[1] for r in ranges)])
