"""Supervised fine-tuning of a given model on (prompt, answer) token rows, through the staged trainer.

A fine-tune is a one-stage run of :class:`~.trainer.Trainer` on a model it is given (trained in place)
and on data that is no shard set: :class:`PairData` is the stage's data, :class:`PairPlan` its stage
plan (the data and the stopping rule). Everything else is the trainer's: the step (AdamW, clipping,
the non-finite guard), the LR schedule, ``metrics.jsonl``, checksummed atomic checkpoints and the
content-verified resume. A fine-tune stopped (``should_stop``) or killed mid-way and run again in the
same folder resumes from its newest intact checkpoint and ends with the weights of one never
interrupted; a finished one (``DONE``) is not trained again, its final weights are loaded.

Data and stopping rule: ``epochs`` passes over the rows, pass ``e`` in the order of the permutation
``numpy.random.default_rng([seed, e, salt])``, cut into batches of ``batch_size`` (a pass's last batch
holds what is left, so a pass is ``ceil(n / batch_size)`` steps). A row is ``prompt + answer``,
right-padded to its batch's longest row, with an attention mask over the padding; the loss is the
token mean of cross-entropy on the answer tokens of the whole batch. Dropout draws from
``torch.manual_seed(seed)`` (inside a forked RNG: the caller's random state is untouched). One
process: a fine-tune does not run under torchrun.

The run folder is the trainer's (docs/interfaces.md). Its ``config.yaml`` records, as the data
``pairs``, a fingerprint of the rows, the data order and the starting weights, so a folder is only
ever resumed by the same fine-tune of the same model.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import config as C
from ..config import check
from ..data.mixture import IGNORE_INDEX
from ..errors import ConfigError, DataError
from ..layout import checkpoint_dir, done_path, read_metrics
from .callbacks import Callback
from .configs import StageConfig, TrainConfig
from .schedules import ScheduleConfig
from .stages import StagePlan

DATA_NAME = "pairs"  # the stage's data, as config.yaml and meta.json name it
Pair = tuple[list[int], list[int]]  # (prompt ids, answer ids)


@dataclass
class FineTuneConfig:
    """How a fine-tune trains (the QA evaluator's ``epochs``, ``lr``, ... are these fields)."""

    epochs: int = 1
    lr: float = 5e-5
    batch_size: int = 8
    weight_decay: float = 0.0  # every matrix decays, embeddings included, as in the HF Trainer
    warmup_steps: int = 0
    schedule: str = "linear"  # linear decay to 0 after warmup | constant
    grad_clip: float = 1.0  # 0: off
    seed: int = 0  # data order and dropout
    checkpoint_every: int = 500  # steps between checkpoints (they never change the result)

    def validate(self) -> None:
        check(self.epochs >= 1, "epochs", f"must be >= 1, got {self.epochs}")
        check(self.lr > 0, "lr", f"must be > 0, got {self.lr}")
        check(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        check(self.warmup_steps >= 0, "warmup_steps", "must be >= 0")
        check(self.schedule in ("linear", "constant"), "schedule",
              f"must be 'linear' or 'constant', got {self.schedule!r}")
        check(self.grad_clip >= 0, "grad_clip", "must be >= 0 (0 = off)")
        check(self.seed >= 0, "seed", "must be >= 0")
        check(self.checkpoint_every >= 1, "checkpoint_every", f"must be >= 1, got {self.checkpoint_every}")


class PairData:
    """The rows of a fine-tune as a stage's data: ``batch(step, ...)`` per the module docstring.

    ``seq_len`` is the longest row (the trainer counts ``batch_size x seq_len`` tokens per step);
    ``steps`` is the stopping rule, ``epochs x ceil(len(rows) / batch_size)``."""

    def __init__(self, rows: Sequence[Pair], batch_size: int, epochs: int, seed: int, salt: int, pad_id: int):
        if not rows:
            raise DataError("no fine-tuning rows")
        self.rows = [(list(p), list(a)) for p, a in rows]
        if any(not a for _, a in self.rows):
            raise DataError("a fine-tuning row has no answer tokens (nothing to learn from)")
        self.batch_size, self.epochs, self.seed, self.salt, self.pad_id = batch_size, epochs, seed, salt, pad_id
        self.seq_len = max(len(p) + len(a) for p, a in self.rows)
        self.steps_per_epoch = math.ceil(len(self.rows) / batch_size)
        self.steps = self.steps_per_epoch * epochs
        self._orders: dict[int, np.ndarray] = {}

    def order(self, epoch: int) -> np.ndarray:
        """The row order of pass ``epoch``."""
        if epoch not in self._orders:
            self._orders[epoch] = np.random.default_rng([self.seed, epoch, self.salt]).permutation(len(self.rows))
        return self._orders[epoch]

    def fingerprint(self) -> str:
        """sha256 of what decides the batches: the rows, their order's seeds, batch size, passes, padding."""
        h = hashlib.sha256(json.dumps([self.seed, self.salt, self.epochs, self.batch_size, self.pad_id]).encode())
        for p, a in self.rows:
            h.update(json.dumps([p, a]).encode())
        return h.hexdigest()

    def batch(self, step: int, batch_size: int, rank: int = 0, world: int = 1) -> dict[str, np.ndarray]:
        """Global batch ``step``: ``input_ids`` and ``attention_mask`` [B, L] (L: the batch's longest row),
        ``labels`` (the next token where it is an answer token, else -100), ``loss_mask``, ``source``."""
        if world != 1 or batch_size != self.batch_size:
            raise ConfigError("batch_size", f"a fine-tune runs in one process with batch {self.batch_size}, "
                              f"asked for batch {batch_size} of world {world}")
        epoch, k = divmod(step, self.steps_per_epoch)
        batch = [self.rows[i] for i in self.order(epoch)[k * batch_size:(k + 1) * batch_size]]
        L = max(len(p) + len(a) for p, a in batch)
        ids = np.full((len(batch), L), self.pad_id, dtype=np.int64)
        att = np.zeros((len(batch), L), dtype=np.int64)
        labels = np.full((len(batch), L), IGNORE_INDEX, dtype=np.int64)
        for r, (p, a) in enumerate(batch):
            n = len(p) + len(a)
            ids[r, :n] = p + a
            att[r, :n] = 1
            labels[r, :n - 1] = ([IGNORE_INDEX] * len(p) + a)[1:]  # position t predicts token t + 1
        return {"input_ids": ids, "attention_mask": att, "labels": labels,
                "loss_mask": (labels != IGNORE_INDEX).astype(np.uint8), "source": np.zeros(len(batch), np.int64)}


class PairPlan(StagePlan):
    """The stage plan of a one-stage fine-tune over :class:`PairData` (no dataset folder is opened).
    ``data_sha256`` is what the run folder records for the data (the trainer checks it on resume)."""

    def __init__(self, cfg: TrainConfig, data: PairData, fingerprint: str):
        self.cfg = cfg
        self.mixtures = [data]  # type: ignore[list-item]  (the stage data's interface: batch, seq_len)
        self.continues_stream = [False]
        self.stream_base = [0]
        self.steps = [data.steps]
        self.pt_names: list[set[str]] = [set()]  # fine-tune rows are no pretraining tokens
        self.group_steps: dict[str, int] = {}
        self.total_steps = data.steps
        self.data_sha256 = {DATA_NAME: fingerprint}

    def source_tokens(self, i: int, steps: int) -> dict[str, int]:
        return {DATA_NAME: steps * self.step_tokens(i)}


class _SeedDropout(Callback):
    """Seeds torch's RNG (dropout) with the fine-tune's seed at the start of a fresh run; a resumed one
    continues the RNG state its checkpoint holds."""

    def __init__(self, seed: int):
        self.seed = seed

    def on_train_start(self, trainer) -> None:
        if trainer.resumed_from is None:
            import torch

            torch.manual_seed(self.seed)


def train_config(cfg: FineTuneConfig, data: PairData, device: str) -> TrainConfig:
    """The TrainConfig of a fine-tune: one stage over :data:`DATA_NAME`, the fine-tune's optimiser
    (AdamW with torch's default betas, every matrix decaying), fp32, no fused paths, a train row per step."""
    sched = ScheduleConfig(name=cfg.schedule, lr=cfg.lr, warmup=float(cfg.warmup_steps), min_lr_ratio=0.0)
    stage = StageConfig(name="finetune", data=DATA_NAME, tokens=data.steps * data.batch_size * data.seq_len,
                        schedule=sched, counts_as_pt=False)
    tcfg = TrainConfig(stages=[stage], seed=cfg.seed, batch_size=cfg.batch_size, lr=cfg.lr,
                       weight_decay=cfg.weight_decay, decay_embeddings=True, betas=(0.9, 0.999), eps=1e-8,
                       grad_clip=cfg.grad_clip, device=device, precision="fp32", compile=False, kernels="off",
                       fused_loss="off", cpu_heap="system", eval_every=0, val=[],
                       checkpoint_every=cfg.checkpoint_every,
                       # a batch whose loss or gradient is not finite is skipped, never applied, however many
                       nonfinite="skip", nonfinite_limit=max(1, data.steps), log_every=1, progress=False)
    C.validate(tcfg)
    return tcfg


def weights_sha256(model) -> str:
    """sha256 over a model's parameters and buffers (names, dtypes, shapes, bytes), in state-dict order."""
    import torch

    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def finetune(model, rows: Sequence[Pair], cfg: FineTuneConfig, out_dir: str | Path, *, pad_id: int, salt: int,
             callbacks: Sequence[Callback] = (), restart_stale: bool = False) -> dict[str, Any]:
    """Fine-tune ``model`` in place on ``rows`` in the run folder ``out_dir`` (resuming what is there).

    Returns the trainer's summary plus ``losses`` (each step's loss, from ``metrics.jsonl``: a skipped
    step's non-finite one included), ``total_steps`` and ``finished`` (False: stopped before the last
    step; rerun to go on). ``restart_stale``: a folder holding a run of other rows, weights or settings is deleted and
    the fine-tune starts over (for a scratch folder); otherwise that is a ConfigError.
    """
    import torch

    from .run_dir import check_run_dir
    from .trainer import Trainer

    device = next(model.parameters()).device
    data = PairData(rows, cfg.batch_size, cfg.epochs, cfg.seed, salt, pad_id)
    tcfg = train_config(cfg, data, str(device))
    fp = hashlib.sha256(f"{data.fingerprint()}:{weights_sha256(model)}".encode()).hexdigest()
    plan = PairPlan(tcfg, data, fp)
    out = Path(out_dir)
    if restart_stale:
        try:
            check_run_dir(tcfg, out, {}, None, plan.data_sha256)
        except ConfigError as e:
            print(f"[preschool] {out}: starting the fine-tune over ({e})", file=sys.stderr, flush=True)
            shutil.rmtree(out)
    was_done = done_path(out).is_file()
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        summary = Trainer(tcfg, out, {}, None, [_SeedDropout(cfg.seed), *callbacks], model=model, plan=plan).run()
    if was_done:  # the trainer returned the finished run's summary without building anything
        from .checkpoint import load_weights

        load_weights(model, checkpoint_dir(out, summary["steps"]))
    rows_out = [r for r in read_metrics(out) if r.get("event") in ("train", "nonfinite")]
    model.eval()
    return {**summary, "losses": [float(r["loss"]) for r in rows_out], "finished": done_path(out).is_file(),
            "total_steps": plan.total_steps}
