"""Checkpoint schedule: every ``checkpoint_every`` steps (or log-spaced), at every stage end, and on stop.

The trainer writes the checkpoint (HF model + tokenizer + meta.json +
trainer_state.pt, atomically); this callback only decides when. It runs last
among the callbacks, so a checkpoint captures every row logged for its step.
The log schedule (``checkpoint_schedule: log``) saves at steps
``round(10 ** (k / checkpoints_per_decade))``, the dense-early, sparse-late
spacing used for compartmentalization trajectories.
"""

from __future__ import annotations

from ..schedules import log_spaced_steps
from .base import Callback


class CheckpointCallback(Callback):
    """Decides when the trainer saves; never saves the same step twice."""

    def __init__(self):
        self._log_steps: set[int] = set()
        self.last_saved = -1

    def on_train_start(self, trainer) -> None:
        if trainer.cfg.checkpoint_schedule == "log":
            self._log_steps = log_spaced_steps(trainer.total_steps, trainer.cfg.checkpoints_per_decade)
        if trainer.resumed_from is not None:
            self.last_saved = trainer.step

    def _save(self, trainer) -> None:
        if trainer.step != self.last_saved:
            trainer.save_checkpoint()
            self.last_saved = trainer.step

    def on_step_end(self, trainer) -> None:
        if trainer.stage_step == trainer.stage_steps[trainer.stage_index]:
            return  # the stage-end checkpoint (after group bookkeeping) covers this step, stop or not
        if trainer.should_stop:
            self._save(trainer)
            return
        cfg = trainer.cfg
        due = (trainer.step in self._log_steps) if cfg.checkpoint_schedule == "log" else \
            (trainer.step % cfg.checkpoint_every == 0)
        if due:
            self._save(trainer)

    def on_stage_end(self, trainer, stage) -> None:
        self._save(trainer)
