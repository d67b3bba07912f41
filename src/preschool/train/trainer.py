"""Staged trainer for small Hugging Face decoders: PPT -> PT, mixtures, inserted stages, resume, DDP.

A run is a list of stages trained one after another on the same weights.
Each stage names its data (one dataset or a weighted mixture), a token
budget and an LR schedule (``schedule:``, a :class:`ScheduleConfig`), and says
what carries over (``reset_optimizer``, ``group``, ``embeddings_at_start``:
their semantics are in :mod:`.configs`).

Optimisation: AdamW (torch's fused kernel on CPU and CUDA) with weight decay on
matrices only (no decay on norms or biases; input embeddings and LM head
decay only with ``decay_embeddings: true``, as the HF Trainer that L2T used
does; ``decay_all_params: true`` decays every parameter, as verify-ppt's
Nanotron configs do), global-norm
clipping, gradient accumulation, and a token-mean loss over the whole global
batch (labels -100 where the shard's loss_mask is 0), normalised by the
global count of loss tokens so the gradient does not depend on micro-batch
size or world size. A step whose loss or gradient norm is not finite is never
applied: ``nonfinite`` says whether the run stops there, skips the batch or
rewinds to the last checkpoint (:meth:`Trainer._nonfinite_step`). How a micro-batch
becomes a loss (forward, cross-entropy, the callbacks' extra losses) is
:class:`.train_module.TrainModule`; the step itself (accumulate, clip, guarded update)
is :class:`.step.TrainStep`; this module is the loop around them, the package's only
one (the QA fine-tune runs in it too, below).

Under ``torchrun`` (WORLD_SIZE > 1) the same code runs DDP or, with
``parallel: fsdp``, FSDP2 (gloo on CPU, NCCL on GPU; :mod:`.parallel`); rank r
takes samples j % W == r of each global batch (:mod:`preschool.data.mixture`),
and only rank 0 writes files, except the sharded training state of an FSDP
checkpoint, which every rank writes (:mod:`.sharded_checkpoint`).

The run folder layout is in docs/interfaces.md. Calling :func:`train` again on
the same folder resumes from the last checkpoint with identical data order,
schedule and optimizer state, and refuses if the config changed. What each
stage reads and counts is fixed up front (:mod:`.stages`); checkpoints are
written and read by :mod:`.checkpoint`.

The same loop trains a given model on data that is not a shard set: ``Trainer(...,
model=m, plan=p)`` trains ``m`` in place (instead of building ``cfg.model``) on the
stages of ``p`` (an object with :class:`.stages.StagePlan`'s interface, whose
stage data has ``batch`` and ``seq_len``: its own data and stopping rule). The
supervised fine-tune of :mod:`.finetune` (the QA evaluator's) runs this way, with
the same checkpoints, resume and callbacks as any run.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from .. import config as C
from ..data.mixture import IGNORE_INDEX, Mixture
from ..errors import ConfigError, TrainingError
from ..io import read_json, write_json, write_text
from ..device import check_model_memory, check_step_memory, resolve_device, use_device
from ..layout import MANIFEST, checkpoint_dir, done_path, run_config_path
from . import checkpoint
from .attention import enable_doc_attention, resolve_doc_attention
from .callbacks import Callback, with_builtins
from .configs import StageConfig, TrainConfig, resolve_reserved_ids
from .cpu_heap import retain_freed_memory
from .kernels import apply_liger, compile_blocks, compile_mode, resolve_compile, resolve_kernels
from .loss import FusedLoss, resolve_fused_loss
from .init_from import (Start, announce, assign_weights, check_same_model, check_start, describe_folder,
                        load_start_model, source_optimizer, start_weights)
from .model import build_model, describe, embedding_rows, model_shape, set_input_embeddings
from .memory import memory
from .optim import adamw
from .parallel import _dist, make_parallel
from .precision import param_dtype
from .run_dir import check_run_dir, run_config_tree
from .schedules import ScheduleConfig, lr_at
from .stages import StagePlan, model_special_ids, model_vocab_size
from .step import TrainStep
from .train_module import TrainModule
from ..seeds import EMBEDDING_REINIT, TRAIN_SAMPLING


def check_fits(cfg: TrainConfig, desc: dict, device: torch.device, world: int, sharded: bool, micro: int,
               local_batch: int | None = None, seq_len: int | None = None) -> None:
    """ConfigError when a run of ``cfg`` cannot fit ``device``: its model (``desc``, :func:`describe`) alone
    (field ``model``), or, given ``seq_len``, with the activations of a micro-batch of ``micro`` rows as
    ``preschool plan`` estimates them (field ``batch_size``, or ``micro_batch_size`` when set). Arithmetic
    only: nothing is built or loaded."""
    shards, pbytes = (world if sharded else 1), param_dtype(cfg.precision).itemsize
    if seq_len is None:
        check_model_memory(desc["params_total"], device, shards, pbytes, "model",
                           f"hidden {desc['hidden_size']:,}, FFN {desc['ffn']:,}, {desc['layers']} layers, "
                           f"vocabulary {desc['vocab_size']:,}")
        return

    act = memory(desc, micro, seq_len, world, cfg.parallel, cfg.activation_checkpointing, device.type,
                 local_batch=local_batch).activations
    check_step_memory(desc["params_total"], act, device, shards, pbytes,
                      "micro_batch_size" if cfg.micro_batch_size else "batch_size",
                      f"a micro-batch of {micro:,} rows x {seq_len:,} tokens")


def check_run_fits(cfg: TrainConfig, datasets: Mapping[str, str | Path], tokenizer_dir: str | Path | None = None) -> None:
    """The memory checks a :class:`Trainer` makes as it starts (:func:`check_fits`), made without one, in this
    process (its device, its ranks): the experiment runner makes them for every run it is about to train
    before the first trains, so a ladder's rung that cannot fit is refused before the others spend hours."""
    datasets = {k: Path(v) for k, v in datasets.items()}
    dist = _dist()  # the runner checks before train() makes the process group: torchrun's WORLD_SIZE says it
    world = dist.get_world_size() if dist else max(1, int(os.environ.get("WORLD_SIZE") or 1))
    device = resolve_device(cfg.device)
    vocab = embedding_rows(cfg.model, model_vocab_size(datasets, Path(tokenizer_dir) if tokenizer_dir else None))
    # a run started from a folder trains the folder's model (one not trained yet: the config's stands in)
    desc = describe_folder(cfg.init_from) or describe(cfg.model, vocab)
    local = cfg.batch_size // world if cfg.batch_size % world == 0 else cfg.batch_size
    micro = min(cfg.micro_batch_size or local, local)
    sharded = cfg.parallel == "fsdp" and world > 1
    check_fits(cfg, desc, device, world, sharded, micro)
    # the rows' length from the manifests alone: opening the shard sets (a StagePlan) would hash them here
    manifests = [datasets[n] / "train" / MANIFEST for st in cfg.stages for n in st.datasets if n in datasets]
    rows = [read_json(m, expect=dict).get("row_len") for m in manifests if m.is_file()]
    lengths = [r - 1 for r in rows if isinstance(r, int) and r > 1]
    if lengths:
        check_fits(cfg, desc, device, world, sharded, micro, local, max(lengths))


class Trainer:
    """Runs the stages of a :class:`TrainConfig` into ``out_dir``; use :func:`train`."""

    def __init__(self, cfg: TrainConfig, out_dir: str | Path, datasets: Mapping[str, str | Path],
                 tokenizer_dir: str | Path | None = None, callbacks: Sequence[Callback] = (), *,
                 model: torch.nn.Module | None = None, plan: StagePlan | None = None,
                 callback_configs: Mapping[str, dict] | None = None, keep_state_at: Sequence[int] = ()):
        self.cfg = cfg = resolve_reserved_ids(cfg, datasets)
        self.callback_configs = callback_configs  # what config.yaml records of ``callbacks`` (run_config_tree)
        self.out_dir = Path(out_dir)
        self.datasets = {k: Path(v) for k, v in datasets.items()}
        self.tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir else None
        dist = _dist()
        self.rank = dist.get_rank() if dist else 0
        self.world = dist.get_world_size() if dist else 1
        self.is_main = self.rank == 0
        self.device = use_device(cfg.device)  # CUDA: made current, where Triton kernels launch
        self.parallel = make_parallel(cfg, self.device, self.world)
        self.amp_dtype = self.parallel.amp_dtype
        if cfg.batch_size % self.world:
            raise ConfigError("batch_size", f"global batch {cfg.batch_size} not divisible by world size {self.world}")
        self.local_batch = cfg.batch_size // self.world
        self.micro = min(cfg.micro_batch_size or self.local_batch, self.local_batch)
        if self.local_batch % self.micro:
            raise ConfigError("micro_batch_size",
                              f"{self.micro} does not divide the per-rank batch {self.local_batch}")
        # checkpoints whose training state is never pruned: the branch points other runs continue from
        self.keep_state_at = frozenset(int(x) for x in keep_state_at)
        self._given_model = model  # trained in place instead of a model built from cfg.model
        # where the weights start (train/init_from.py), checked before any work: "init_from" (the run's: the
        # model is the folder's) and "stages[i].init_from" (a stage's, applied at its start)
        self.starts = self._check_starts() if model is None else {}
        run_start = self.starts.get("init_from")
        if model is not None:
            self.vocab_size = int(model.get_input_embeddings().weight.shape[0])
        elif run_start is not None:
            self.vocab_size = run_start.vocab_rows
        else:
            self.vocab_size = embedding_rows(cfg.model, model_vocab_size(self.datasets, self.tokenizer_dir))
        self.family = run_start.family if run_start is not None else cfg.model.family
        if cfg.reserved_ids is not None and cfg.reserved_ids[1] > self.vocab_size:
            raise ConfigError("reserved_ids", f"{cfg.reserved_ids} exceeds vocab size {self.vocab_size}")
        # a given model's shape is not cfg.model's: no shape summary, FLOPs or MFU for it
        self.model_desc = None if model is not None else run_start.describe_model(self.vocab_size) \
            if run_start is not None else describe(cfg.model, self.vocab_size)
        self._check_stage_starts(run_start)
        if self.model_desc is not None:
            # arithmetic on the shape: a model beyond the device's memory is refused before anything is built
            check_fits(cfg, self.model_desc, self.device, self.world, self.parallel.sharded, self.micro)
        # opens the data: bad paths fail now
        self.plan = plan if plan is not None else StagePlan(cfg, self.datasets, self.vocab_size)
        if self.model_desc is not None:  # and a micro-batch whose activations cannot fit, before its rows load
            check_fits(cfg, self.model_desc, self.device, self.world, self.parallel.sharded, self.micro,
                       self.local_batch, max(m.seq_len for m in self.plan.mixtures))
        self.doc_attention = resolve_doc_attention(cfg.doc_attention, self.device)
        # compile: auto decides here, from the run's FLOPs (the config's), so a resume decides alike
        self.compile, why = resolve_compile(cfg.compile, self.device, self.training_flops())
        if compile_mode(cfg.compile) == "auto" and self.is_main:
            print(f"[preschool] {why}", flush=True)
        self.kernels = resolve_kernels(cfg.kernels, self.device, self.compile, self.family)
        self.loss_path = resolve_fused_loss(cfg.fused_loss, self.device,
                                            self.micro * max(m.seq_len for m in self.plan.mixtures), self.vocab_size)

        self.callbacks = with_builtins(cfg, callbacks)
        self.needs_hidden = any(getattr(cb, "needs_hidden_states", False) for cb in self.callbacks)

        # live state: the position, and where the current stage's schedule and data stream start
        self.step = 0
        self.stage_index = 0
        self.stage_step = 0
        self.tokens = 0
        self.pt_tokens = 0
        self.sched_base = 0
        self.data_base = 0
        self.groups: dict[str, dict[str, Any]] = {}  # paused groups: optimizer state, schedule and data position
        self.lr = 0.0
        self.should_stop = False
        self.resumed_from: Path | None = None
        self.nonfinite = 0  # steps with a non-finite loss skipped or rewound past (the nonfinite policy)
        # since the last train row; the loss sums up in _acc_loss (a tensor: no host sync per step)
        self._acc = {"loss_sum": 0.0, "steps": 0, "tokens": 0}
        self._acc_loss = torch.zeros((), dtype=torch.float64)
        self._t_last = time.perf_counter()
        self.last_val: dict[str, float] = {}

    def _check_starts(self) -> dict[str, Start]:
        """Every ``init_from`` of the run and its stages, checked (init_from.check_start) before any work."""
        cfg = self.cfg
        needed = model_vocab_size(self.datasets, self.tokenizer_dir)
        wanted = [("init_from", cfg.init_from)] + [(f"stages[{i}].init_from", s.init_from)
                                                  for i, s in enumerate(cfg.stages)]
        starts = {where: check_start(init, where, self.tokenizer_dir, needed) for where, init in wanted if init}
        if any(st.init.optimizer == "keep" for st in starts.values()) and self.parallel.sharded:
            where = next(w for w, st in starts.items() if st.init.optimizer == "keep")
            raise ConfigError(f"{where}.optimizer", "keep under parallel: fsdp is not supported (the saved AdamW "
                              "state is not sharded); use optimizer: reset, or parallel: ddp")
        return starts

    def _check_stage_starts(self, run_start: Start | None) -> None:
        """A stage's start must be the run's architecture (init_from.check_same_model)."""
        from .families import get_family

        if not any(w != "init_from" for w in self.starts):
            return
        shape = get_family(self.family).shape_from_hf(run_start.config) if run_start is not None else \
            model_shape(self.cfg.model, self.vocab_size)
        for where, st in self.starts.items():
            if where != "init_from":
                check_same_model(st, {"family": self.family, "shape": shape}, self.vocab_size)

    # -- what callbacks read ---------------------------------------------------
    @property
    def stage(self) -> StageConfig:
        return self.cfg.stages[self.stage_index]

    @property
    def stage_steps(self) -> list[int]:
        return self.plan.steps

    @property
    def total_steps(self) -> int:
        return self.plan.total_steps

    @property
    def stage_tokens(self) -> int:
        return self.stage_step * self.plan.step_tokens(self.stage_index)

    def token_account(self) -> dict[str, dict[str, int]]:
        """Tokens trained so far per stage and per data source (a pure function of the position)."""
        return self.plan.token_account(self.stage_index, self.stage_step)

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        """Sum ``t`` over all ranks in place (a no-op in one process); for callbacks that split work by rank."""
        dist = _dist()
        if dist is not None:
            dist.all_reduce(t)
        return t

    def barrier(self) -> None:
        """Wait for every rank (a no-op in one process)."""
        dist = _dist()
        if dist:
            dist.barrier()

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The live optimizer (the step's; a stage that resets it replaces it there)."""
        return self.train_step.optimizer

    @optimizer.setter
    def optimizer(self, opt: torch.optim.Optimizer) -> None:
        self.train_step.optimizer = opt

    # -- checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What ``trainer_state.pt`` holds (:data:`.checkpoint.STATE_KEYS` and the callbacks' states).
        Sharded runs keep the optimizer states (the live one and paused groups') in the checkpoint's
        DCP folder instead (``optimizer`` None, groups without ``optim``)."""
        sharded = self.parallel.sharded
        return {
            "step": self.step, "stage_index": self.stage_index, "stage_step": self.stage_step,
            "tokens": self.tokens, "pt_tokens": self.pt_tokens,
            "sched_base": self.sched_base, "data_base": self.data_base,
            "optimizer": None if sharded else self.optimizer.state_dict(),
            "groups": {k: {f: v for f, v in g.items() if f != "optim"} for k, g in self.groups.items()}
            if sharded else self.groups,
            "acc": {**self._acc, "loss_sum": float(self._acc_loss.item())},
            "rng": {"torch": torch.get_rng_state(), "cuda": cuda_rng_state(self.device)},
            "callbacks": [cb.state_dict() for cb in self.callbacks],
            "nonfinite": self.nonfinite,
        }

    def load_state_dict(self, st: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` (the optimizer too unless it is None: sharded, loaded with the weights).
        ValueError, before anything changes, for a stage this run does not have."""
        if not st["stage_index"] < len(self.cfg.stages):  # else every stage would count as done: DONE at once
            raise ValueError(f"stage_index {st['stage_index']} but this run has {len(self.cfg.stages)} stages")
        if st["optimizer"] is not None:
            self.optimizer.load_state_dict(st["optimizer"])
        self.step, self.stage_index, self.stage_step = st["step"], st["stage_index"], st["stage_step"]
        self.tokens, self.pt_tokens = st["tokens"], st["pt_tokens"]
        self.sched_base, self.data_base = st["sched_base"], st["data_base"]
        self.groups = st["groups"]
        self._acc = {k: v for k, v in st["acc"].items() if k != "loss_sum"}
        self._acc_loss = torch.tensor(st["acc"]["loss_sum"], dtype=torch.float64)
        torch.set_rng_state(st["rng"]["torch"])
        restore_cuda_rng(st["rng"].get("cuda"), self.device)
        for cb, s in zip(self.callbacks, st.get("callbacks", [])):
            cb.load_state_dict(s)
        self.nonfinite = st.get("nonfinite", 0)  # absent from checkpoints written before it was counted

    def save_checkpoint(self) -> Path:
        """Write checkpoints/step-XXXXXXXX of this step (every rank calls it; :func:`.checkpoint.save_checkpoint`)."""
        return checkpoint.save_checkpoint(self)

    # -- setup -------------------------------------------------------------------
    def _setup(self) -> None:
        """The run folder, the model (callbacks' edits, kernels, sharding), the optimizer, then the resume."""
        cfg = self.cfg
        if self.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if not run_config_path(self.out_dir).is_file():
                import yaml

                tree = run_config_tree(cfg, self.datasets, self.tokenizer_dir, self.plan.data_sha256,
                                       self.callback_configs)
                write_text(run_config_path(self.out_dir), yaml.safe_dump(tree, sort_keys=False))
            checkpoint.remove_interrupted_writes(self.out_dir)  # a rerun cleans up after a killed one
        self.barrier()

        if self.device.type == "cpu" and cfg.cpu_heap == "retain":
            retain_freed_memory()
        if self._given_model is not None:
            self.model = self._given_model.to(self.device)
        elif "init_from" in self.starts:  # the folder's model (a resume then loads its own checkpoint over it)
            self.model = load_start_model(self.starts["init_from"]).to(self.device)
        else:
            self.model = build_model(cfg.model, self.vocab_size, seed=cfg.seed,
                                     special=model_special_ids(self.tokenizer_dir)).to(self.device)
        from .flops import device_peak_flops

        self.peak_flops = device_peak_flops(self.device, self.parallel.compute_dtype) \
            if self.model_desc is not None else None  # None: no MFU in the log rows
        for cb in self.callbacks:
            cb.on_model_built(self)
        # the run's parameter dtype (pure_bf16: bf16) for what the callbacks added or loaded too (a saved
        # model comes in the dtype it was saved in); before a resume loads into the model
        self.model.to(param_dtype(cfg.precision))
        if cfg.attention_reset_between_docs:
            enable_doc_attention(self.model, self.doc_attention)
        if self.kernels == "liger":
            apply_liger(self.model)
        if self.compile == "blocks":
            compile_blocks(self.model)
        self.model.train()
        self.parallel.prepare(self.model)  # FSDP shards here, before the optimizer sees the parameters
        fused_loss = FusedLoss(self.model, self.loss_path) if self.loss_path != "off" else None
        self.train_step = TrainStep(self.model, self._make_optimizer(), cfg.grad_clip,
                                    no_sync=self.parallel.no_sync, all_reduce=self.all_reduce)
        # ops that sample from torch's global RNG (dropout) start from the run's seed, not from whatever the
        # process drew before; the same on every rank, so the rank-0 state a checkpoint keeps resumes them all
        torch.manual_seed(int(np.random.default_rng([cfg.seed, TRAIN_SAMPLING]).integers(2**62)))
        self.resumed_from = checkpoint.resume(self)
        if self.resumed_from is not None and self.is_main:  # else a resume and a fresh start look alike
            print(f"[preschool] {self.out_dir}: resumed from step {self.step:,} of {self.total_steps:,} "
                  f"({self.resumed_from.name}, stage {self.stage.name}, {self.tokens:,} tokens trained)", flush=True)
        fwd: Any = self.parallel.wrap(self.model)
        if self.compile == "model":
            fwd = torch.compile(fwd)
        self.train_module = TrainModule(self.model, fwd, self.callbacks, device=self.device, amp_dtype=self.amp_dtype,
                                        fused_loss=fused_loss, doc_attention=cfg.attention_reset_between_docs,
                                        needs_hidden=self.needs_hidden)

    def _make_optimizer(self) -> torch.optim.Optimizer:
        # norms and biases (1-D) decay only with decay_all_params (Nanotron); embeddings when asked (HF Trainer)
        return adamw(self.model, self.cfg.lr, self.cfg.weight_decay, self.cfg.betas, self.cfg.eps,
                     decay_embeddings=self.cfg.decay_embeddings, decay_all=self.cfg.decay_all_params)

    # -- the loop: run -> stages -> steps -----------------------------------------
    def run(self) -> dict[str, Any]:
        """Train the stages not yet done (resuming from the newest checkpoint); returns the summary (DONE)."""
        cfg = self.cfg
        done = done_path(self.out_dir)
        # checked for finished runs too: a changed config or rebuilt data must not reuse old results
        check_run_dir(cfg, self.out_dir, self.datasets, self.tokenizer_dir, self.plan.data_sha256,
                      self.callback_configs)
        if done.is_file():
            return read_json(done)
        self._setup()
        for cb in self.callbacks:
            cb.on_train_start(self)
        self._t_last = time.perf_counter()
        start_stage, start_step = self.stage_index, self.stage_step
        for i in range(start_stage, len(cfg.stages)):
            self._run_stage(i, resuming=i == start_stage and start_step > 0)
            if self.should_stop:
                break
        for cb in self.callbacks:
            cb.on_train_end(self)
        summary = {"out_dir": str(self.out_dir), "steps": self.step, "tokens": self.tokens,
                   "pt_tokens": self.pt_tokens, "stages": [s.name for s in cfg.stages],
                   "val": self.last_val, "final_checkpoint": str(checkpoint_dir(self.out_dir, self.step)),
                   "resumed_from": str(self.resumed_from) if self.resumed_from else None,
                   "stopped": self.should_stop, "nonfinite_steps": self.nonfinite,
                   "model": self.model_desc, "flops": self.training_flops()}
        if not self.should_stop and self.is_main:
            write_json(done, summary)
        self.barrier()
        return summary

    def training_flops(self) -> float | None:
        """The run's training FLOPs: every stage's whole steps x its tokens per step x the model FLOPs per
        token at its sequence length (train/flops.py; the planner's count, so a report can read it).
        None for a given model (no shape summary to count from)."""
        from .flops import flops_per_token

        if self.model_desc is None:
            return None
        plan = self.plan
        return float(math.fsum(n * plan.step_tokens(i) * flops_per_token(self.model_desc, plan.mixtures[i].seq_len)
                         for i, n in enumerate(plan.steps)))

    def _run_stage(self, i: int, resuming: bool) -> None:
        """Train stage ``i`` from its start, or (``resuming``) from the resumed ``stage_step``, until its end or a stop."""
        s, n = self.cfg.stages[i], self.plan.steps[i]
        self.stage_index = i
        if not resuming:
            self.stage_step = 0
            self._start_stage(i)
        elif self.stage_step >= n:
            return  # stage finished before the checkpoint; its end was already processed
        mix = self.plan.mixtures[i]
        sched = s.schedule.resolved(self.cfg.lr)
        sched_total = self.plan.schedule_steps(i)
        for cb in self.callbacks:
            cb.on_stage_start(self, s)
        while self.stage_step < n:
            self._train_step(mix, sched, sched_total)
            if self.step % self.cfg.log_every == 0 or self.stage_step == n:
                self._emit_train_row()
            for cb in self.callbacks:
                cb.on_step_end(self)
            if self.should_stop:
                break
        if self.stage_step >= n:  # a stop on a stage's last step still closes the stage
            if self.plan.group_resumes_later(i):  # pause the group: a later stage of it continues from here
                self.groups[s.group] = {"optim": self.parallel.optimizer_state(self.model, self.optimizer),
                                        "pos": self.sched_base + self.stage_step,
                                        "samples": self.data_base + self.stage_step}
            for cb in self.callbacks:
                cb.on_stage_end(self, s)

    def _start_stage(self, i: int) -> None:
        """Apply a stage's start rules (fresh stage only, not on a mid-stage resume)."""
        s = self.cfg.stages[i]
        # the weights this stage starts from: the run's (loaded with the model) before stage 0, or its own
        start = self.starts.get("init_from") if i == 0 else self.starts.get(f"stages[{i}].init_from")
        if start is not None and i > 0:
            assign_weights(self.model, start_weights(start), start.folder)
        if s.group is not None and s.group in self.groups:  # the group resumes where it paused
            g = self.groups.pop(s.group)
            self.parallel.load_optimizer_state(self.model, self.optimizer, g["optim"])
            self.sched_base = g["pos"]
            self.data_base = g["samples"] if self.plan.continues_stream[i] else 0
        else:
            if s.reset_optimizer:
                self.optimizer = self._make_optimizer()
            self.sched_base = 0
            self.data_base = 0
        if start is not None:
            self._announce_start(start)
        if s.embeddings_at_start != "keep":
            set_input_embeddings(self.model, s.embeddings_at_start, seed=[self.cfg.seed, i, EMBEDDING_REINIT],
                                 init_std=self.cfg.model.init_std, reserved_ids=self.cfg.reserved_ids)

    def _announce_start(self, start: Start) -> None:
        """``optimizer: keep``: the source's AdamW moments replace the fresh ones (this run's own betas, eps
        and weight decay kept); then the start is printed and logged (init_from.announce)."""
        what = "weights"
        if start.init.optimizer == "keep":
            state, position = source_optimizer(start)
            fresh = self._make_optimizer()
            settings = [{k: v for k, v in g.items() if k != "params"} for g in fresh.param_groups]
            try:
                self.parallel.load_optimizer_state(self.model, fresh, state)
            except (ValueError, KeyError) as e:
                raise ConfigError(f"{start.where}.optimizer", f"keep: the AdamW state of {start.folder} does not fit "
                                  f"this run's parameter groups ({e}); use optimizer: reset") from None
            for g, kept in zip(fresh.param_groups, settings):
                g.update(kept)
            self.optimizer = fresh
            what = f"weights and AdamW state (the source's schedule position: {position})"
        announce(start, what, self.step, self.log)

    def _train_step(self, mix: Mixture, sched: ScheduleConfig, sched_total: int) -> None:
        self.lr = lr_at(self.sched_base + self.stage_step, sched_total, sched)
        np_batch = mix.batch(self.data_base + self.stage_step, self.cfg.batch_size, self.rank, self.world)
        n_loss = int((np_batch["labels"] != IGNORE_INDEX).sum())
        dist = _dist()
        if dist:
            t = torch.tensor([n_loss], dtype=torch.int64, device=self.device)
            dist.all_reduce(t)
            n_loss = int(t.item())
        # grads are averaged over ranks by DDP / FSDP, so scale by world to get the global token mean
        scale = self.world / max(n_loss, 1)
        batch = {k: torch.from_numpy(v).to(self.device, non_blocking=True) for k, v in np_batch.items()}
        # a plan's data may hand a short batch (a fine-tune epoch's last): only the rows it holds are split
        n_micro = -(-len(np_batch["input_ids"]) // self.micro)
        micro = [{k: v[m * self.micro:(m + 1) * self.micro] for k, v in batch.items()} for m in range(n_micro)]
        res = self.train_step(micro, lambda mb: self.train_module.loss(mb, scale, 1.0 / n_micro), self.lr)
        if not res.applied:
            self._nonfinite_step(mix, float(res.loss) / max(n_loss, 1), float(res.grad_norm))
            return
        # the global token-mean CE of this step, accumulated without a host sync
        ce = res.loss.double().cpu() if self.device.type == "cpu" else res.loss.double()
        self._acc_loss = self._acc_loss + ce / max(n_loss, 1)
        self._advance(mix, trained=True)

    def _advance(self, mix: Mixture, trained: bool) -> None:
        """Move the position one step on: counters, tokens (a skipped batch counts as read, not trained)."""
        step_tokens = self.cfg.batch_size * mix.seq_len
        self.step += 1
        self.stage_step += 1
        self.tokens += step_tokens
        self.pt_tokens += self.plan.step_pt_tokens(self.stage_index, self.stage_step - 1)
        self._acc["steps"] += int(trained)
        self._acc["tokens"] += step_tokens

    def _nonfinite_step(self, mix: Mixture, loss: float, norm: float) -> None:
        """Apply the ``nonfinite`` policy to the step about to be taken, whose loss or gradient norm is not
        finite (its update was not applied): TrainingError (``stop``, or the limit reached), or the batch
        skipped, or (``rewind``) the stage's newest checkpoint reloaded and every batch since it skipped.
        Deterministic: a resume replays the same steps and meets the same batch."""
        policy, step, batch = self.cfg.nonfinite, self.step + 1, self.data_base + self.stage_step
        where = (f"stage {self.stage.name!r}, step {step} (step {self.stage_step + 1} of the stage), batch {batch} "
                 f"of the stage's data (samples {batch * self.cfg.batch_size}-{(batch + 1) * self.cfg.batch_size - 1})")
        row = {"event": "nonfinite", "step": step, "stage": self.stage.name, "batch": batch, "loss": loss,
               "grad_norm": norm, "action": policy, "count": self.nonfinite + 1}
        if policy == "stop" or self.nonfinite >= self.cfg.nonfinite_limit:
            self.log({**row, "action": "stop"})
            last = checkpoint.resumable_checkpoints(self.out_dir, upto=self.step)
            why = "nonfinite: stop" if policy == "stop" else \
                f"number {self.nonfinite + 1}, over nonfinite_limit {self.cfg.nonfinite_limit}"
            raise TrainingError(
                f"non-finite loss or gradient (loss {loss}, gradient norm {norm}) at {where} ({why}); stopped before applying it: "
                + (f"{last[0]} stays the last good checkpoint" if last else "no checkpoint was written yet")
                + "; set nonfinite: skip or rewind (or a larger nonfinite_limit) and rerun to go on past it")
        if policy == "rewind":
            self._rewind(where)
            row["rewound_to"] = self.step
            row["skipped"] = step - self.step
            while self.step < step:
                self._advance(mix, trained=False)
        else:
            self._advance(mix, trained=False)
        self.nonfinite = row["count"]  # after a rewind too: the checkpoint holds the count of its own time
        self.log(row)

    def _rewind(self, where: str) -> None:
        """Reload the newest intact checkpoint written in the current stage before this step (collective)."""
        stage = self.stage_index
        ckpt = checkpoint.resume(self, upto=self.step)
        if ckpt is None or self.stage_index != stage:
            raise TrainingError(f"non-finite loss or gradient at {where}: nonfinite: rewind found no checkpoint of stage "
                                f"{self.cfg.stages[stage].name!r} to rewind to (newest: {ckpt}); "
                                "use nonfinite: skip, or checkpoint more often")

    # -- logging -------------------------------------------------------------
    def log(self, row: dict[str, Any]) -> None:
        """Send a metrics row through the callbacks in two phases: every ``on_log`` adds its values, then
        every ``write_log`` gets the finished row, read-only (metrics.jsonl, TensorBoard, W&B, progress bar)."""
        for cb in self.callbacks:
            cb.on_log(self, row)
        final = MappingProxyType(row)  # a writer that tried to change it would change what the others see
        for cb in self.callbacks:
            cb.write_log(self, final)

    def _emit_train_row(self) -> None:
        if self._acc["steps"] == 0:
            return
        loss = self._acc_loss.item() / self._acc["steps"]
        now = time.perf_counter()
        dt = max(now - self._t_last, 1e-9)
        row = {"event": "train", "step": self.step, "stage": self.stage.name, "tokens": self.tokens,
               "pt_tokens": self.pt_tokens, "lr": self.lr, "loss": loss,
               "tokens_per_s": self._acc["tokens"] / dt}  # global: every rank's tokens
        if self.peak_flops:  # model FLOPs over the whole job's peak (train/flops.py)
            from .flops import flops_per_token

            fpt = flops_per_token(self.model_desc, self.plan.mixtures[self.stage_index].seq_len)
            row["mfu"] = row["tokens_per_s"] * fpt / (self.world * self.peak_flops)
        self._acc = {"steps": 0, "tokens": 0}
        self._acc_loss = torch.zeros((), dtype=torch.float64)
        self._t_last = now
        self.last_train = row
        self.log(row)


def cuda_rng_state(device: torch.device) -> torch.Tensor | None:
    """The CUDA RNG state a checkpoint keeps: that of the GPU the run trains on (None off CUDA).

    Only that GPU's: reading every visible GPU's initializes CUDA for a CPU run, and a state per GPU of
    the writing node cannot be put back where fewer are visible (a DCP resume onto another world size).
    Like the torch RNG, rank 0's is kept and every rank resumes from it (the ranks are seeded alike)."""
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def restore_cuda_rng(saved: torch.Tensor | list[torch.Tensor] | None, device: torch.device) -> None:
    """Put :func:`cuda_rng_state`'s ``saved`` back onto ``device`` (nothing off CUDA, or when the checkpoint
    was written by a CPU run: the run's seed stands). A list is what checkpoints held before, one state per
    GPU visible to rank 0; its first is rank 0's own GPU's."""
    if isinstance(saved, (list, tuple)):
        saved = saved[0] if saved else None
    if saved is not None and device.type == "cuda":
        torch.cuda.set_rng_state(saved, device)


def train(cfg: TrainConfig | dict, out_dir: str | Path, datasets: Mapping[str, str | Path],
          tokenizer_dir: str | Path | None = None, callbacks: Sequence[Callback] = (),
          callback_configs: Mapping[str, dict] | None = None, keep_state_at: Sequence[int] = ()) -> dict[str, Any]:
    """Train (or resume, or return at once if DONE) the run in ``out_dir``; returns a summary dict.

    ``datasets`` maps dataset name -> folder with ``train/`` (and ``val/``)
    shard sets; ``tokenizer_dir`` (tokenizer.json + HF files) fixes the vocab
    size and is copied into every checkpoint. Under ``torchrun`` (or for
    ``parallel: fsdp``) the process group is created here if needed (gloo on
    CPU, NCCL on CUDA; :func:`.distributed.process_group`). ``keep_state_at``: steps whose checkpoints keep
    their training state whatever ``keep_optimizer_state`` says (branch points, :mod:`.branch`).
    """
    if isinstance(cfg, dict):
        cfg = C.from_dict(TrainConfig, cfg)
    else:
        C.validate(cfg)
    from .distributed import process_group

    with process_group(cfg.device, one_rank=cfg.parallel == "fsdp"):
        return Trainer(cfg, out_dir, datasets, tokenizer_dir, callbacks, callback_configs=callback_configs,
                       keep_state_at=keep_state_at).run()
