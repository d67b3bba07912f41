"""Trainer callbacks, one per file: validation, checkpointing, metrics log, progress bar."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .base import Callback

if TYPE_CHECKING:  # pragma: no cover
    from ..configs import TrainConfig

__all__ = ["Callback", "with_builtins"]


def with_builtins(cfg: TrainConfig, callbacks: Sequence[Callback]) -> list[Callback]:
    """The callbacks a run with TrainConfig ``cfg`` calls, in order: the metrics log, the progress bar
    (``progress``), validation, W&B (``wandb``), then ``callbacks``, and the checkpoint schedule last,
    so a checkpoint holds every row logged for its step."""
    from .checkpoint import CheckpointCallback
    from .metrics import MetricsLogger
    from .progress import ProgressBar
    from .validation import ValidationCallback

    out: list[Callback] = [MetricsLogger()]
    if cfg.progress:
        out.append(ProgressBar())
    out.append(ValidationCallback())
    if cfg.wandb is not None:
        from .wandb import WandbLogger

        out.append(WandbLogger(cfg.wandb))
    return [*out, *callbacks, CheckpointCallback()]
