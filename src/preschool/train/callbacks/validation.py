"""Validation loss per source: token-mean CE on a fixed slice of each dataset's ``val/`` split.

Scored every ``eval_every`` steps (or, with ``eval_schedule: log``, at step 0
and the log-spaced steps of ``schedules.log_spaced_steps``) and at each stage end, on the first
``val_rows`` rows of each val set (the same rows every time, so curves are
comparable across steps and runs), honouring the shard ``loss_mask``: the
scorer and row selection of ``train/scoring.py``, shared with the ``heldout``
evaluator. Under DDP/FSDP the rows are split across ranks and the sums
all-reduced (under FSDP every rank runs the same number of forwards, a rank
short of rows scoring a stand-in batch it discards, since each forward is a
collective). Logged as
``{"event": "val", ..., "val/<source>": loss}``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ...data.shards import ShardSet
from ...errors import DataError
from ...layout import MANIFEST
from ..schedules import log_spaced_steps
from ..scoring import batch_nll, scored_rows
from .base import Callback


class ValidationCallback(Callback):
    """Per-source validation loss on fixed rows of each ``val/`` split."""

    def __init__(self):
        self.sets: dict[str, ShardSet] = {}
        self._done_step = -1
        self._log_steps: set[int] = set()

    def on_train_start(self, trainer) -> None:
        cfg = trainer.cfg
        if cfg.val is not None:
            for name in cfg.val:
                if name not in trainer.datasets:
                    raise DataError(f"val: unknown dataset {name!r} (known: {', '.join(sorted(trainer.datasets))})")
                self.sets[name] = ShardSet(Path(trainer.datasets[name]) / "val", verify=cfg.verify)
        else:
            names: list[str] = []
            for s in cfg.stages:
                for n in s.datasets:
                    if n not in names:
                        names.append(n)
            for n in names:
                p = Path(trainer.datasets[n]) / "val"
                if (p / MANIFEST).is_file():
                    self.sets[n] = ShardSet(p, verify=cfg.verify)

        for sset in self.sets.values():
            sset.check_vocab(trainer.vocab_size)
        if cfg.eval_schedule == "log":
            self._log_steps = log_spaced_steps(trainer.total_steps, cfg.evals_per_decade) | {trainer.total_steps}

    def evaluate(self, trainer) -> dict[str, float]:
        # torch is imported here, not at module level: the callbacks registry imports this module to find parts
        import torch

        with torch.no_grad():
            return self._evaluate(trainer, torch)

    def _evaluate(self, trainer, torch) -> dict[str, float]:
        model = trainer.model
        was_training = model.training
        model.eval()
        out: dict[str, float] = {}
        bs = trainer.micro
        for name, sset in self.sets.items():
            scored = scored_rows(len(sset), trainer.cfg.val_rows).tolist()
            rows = scored[trainer.rank::trainer.world]
            n_batches = math.ceil(len(rows) / bs)
            if trainer.parallel.sharded:  # as many forwards as the rank with the most rows
                n_batches = math.ceil(math.ceil(len(scored) / trainer.world) / bs)
            tot = torch.zeros(2, dtype=torch.float64, device=trainer.device)
            for b in range(n_batches):
                idx = rows[b * bs:(b + 1) * bs]
                stand_in = not idx
                idx = idx or scored[:1]
                arr = lambda a: torch.from_numpy(sset.rows(idx, a)).to(trainer.device)  # noqa: E731
                seg = arr("segments") if (trainer.cfg.attention_reset_between_docs
                                          and "segments" in sset.array_names) else None
                nll = torch.stack(batch_nll(model, arr("tokens"), arr("loss_mask") if sset.has_loss_mask else None,
                                            seg, trainer.amp_dtype))
                if not stand_in:
                    tot += nll
            trainer.all_reduce(tot)
            out[f"val/{name}"] = float(tot[0] / tot[1]) if tot[1] > 0 else float(np.nan)
        if was_training:
            model.train()
        return out

    def _run(self, trainer) -> None:
        if not self.sets or trainer.step == self._done_step:
            return
        self._done_step = trainer.step
        vals = self.evaluate(trainer)
        trainer.last_val = vals
        trainer.log({"event": "val", "step": trainer.step, "stage": trainer.stage.name, "tokens": trainer.tokens,
                     "pt_tokens": trainer.pt_tokens, **trainer.token_account(), **vals})

    def on_stage_start(self, trainer, stage) -> None:
        # the log schedule anchors every curve at the untrained loss; on_stage_start runs after every
        # callback's on_train_start, so plug-ins that change the model have done so
        if trainer.cfg.eval_schedule == "log" and trainer.step == 0:
            self._run(trainer)

    def on_step_end(self, trainer) -> None:
        if trainer.cfg.eval_schedule == "log":
            if trainer.step in self._log_steps:
                self._run(trainer)
            return
        ev = trainer.cfg.eval_every
        if ev and trainer.step % ev == 0 and trainer.stage_step < trainer.stage_steps[trainer.stage_index]:
            self._run(trainer)

    def on_stage_end(self, trainer, stage) -> None:
        self._run(trainer)
