"""Learning-rate schedules as pure functions of (step, total_steps, config).

Four shapes, each with a linear warm-up and a floor ``min_lr_ratio * lr``:

- ``cosine``: warm-up, then cosine decay from ``lr`` to the floor at the last step.
- ``wsd`` (warmup-stable-decay, as verify-ppt / Nanotron): warm-up, hold ``lr``,
  then decay over the final ``wsd_decay`` fraction of steps to the floor,
  with a cosine (verify-ppt: ``lr_decay_style: cosine``) or linear ramp.
- ``constant``: warm-up, then ``lr`` (the compartmentalization recipe).
- ``linear``: warm-up, then a straight line from ``lr`` at the end of warm-up
  to the floor after the last step (HF ``get_linear_schedule_with_warmup``
  with ``min_lr_ratio: 0``; the QA fine-tuning recipe).

``warmup`` < 1 is a fraction of ``total_steps``; >= 1 is a number of steps.
``lr`` may be left unset (a training stage: the run's ``TrainConfig.lr``);
:meth:`ScheduleConfig.resolved` fills it in, and :func:`lr_at` refuses a
schedule without one.
``step`` counts optimizer updates from 0; the value returned is the LR used
for update ``step``, so update 0 gets ``lr / warmup_steps`` (never 0) when
there is a warm-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from ..config import check

ScheduleName = Literal["cosine", "wsd", "constant", "linear"]


@dataclass
class ScheduleConfig:
    """Schedule shape: ``name``, peak ``lr``, ``warmup`` (fraction or steps), ``min_lr_ratio``, WSD decay.

    A training stage's ``schedule:`` (train/configs.py); ``lr: null`` (the default) means the
    run's lr, filled in by :meth:`resolved`.
    """

    name: ScheduleName = "cosine"
    lr: float | None = None  # peak LR; None: the run's (TrainConfig.lr), see resolved()
    warmup: float = 0.0
    min_lr_ratio: float = 0.1
    wsd_decay: float = 0.1  # fraction of steps in the final decay (wsd only)
    wsd_decay_shape: Literal["cosine", "linear"] = "cosine"

    def validate(self) -> None:
        check(self.name in ("cosine", "wsd", "constant", "linear"), "name",
              f"must be cosine, wsd, constant or linear, got {self.name!r}")
        if self.lr is not None:
            check(self.lr > 0, "lr", f"must be > 0, got {self.lr}")
        check(self.warmup >= 0, "warmup", f"must be >= 0, got {self.warmup}")
        check(0.0 <= self.min_lr_ratio <= 1.0, "min_lr_ratio", f"must be in [0, 1], got {self.min_lr_ratio}")
        check(0.0 <= self.wsd_decay <= 1.0, "wsd_decay", f"must be in [0, 1], got {self.wsd_decay}")
        check(self.wsd_decay_shape in ("cosine", "linear"), "wsd_decay_shape",
              f"must be cosine or linear, got {self.wsd_decay_shape!r}")

    def resolved(self, default_lr: float) -> ScheduleConfig:
        """This schedule with ``lr`` set: its own, or ``default_lr`` (the run's) when unset."""
        return self if self.lr is not None else replace(self, lr=default_lr)


def warmup_steps(total_steps: int, warmup: float) -> int:
    """Warm-up length in steps: ``warmup`` is a fraction of ``total_steps`` if < 1, else a step count."""
    if warmup <= 0:
        return 0
    if warmup < 1:
        return int(round(warmup * total_steps))
    return int(warmup)


def lr_at(step: int, total_steps: int, cfg: ScheduleConfig) -> float:
    """LR of optimizer update ``step`` (0-based) in a schedule of ``total_steps`` updates.

    ``cfg.lr`` must be set (``cfg.resolved(run_lr)``); an unset one raises ``ValueError``.
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if cfg.lr is None:
        raise ValueError("schedule.lr is unset (null: the run's lr); pass cfg.resolved(run_lr) to lr_at")
    peak = cfg.lr
    floor = cfg.lr * cfg.min_lr_ratio
    w = warmup_steps(total_steps, cfg.warmup)
    if step < w:
        return peak * (step + 1) / w
    if cfg.name == "constant":
        return peak
    if cfg.name == "linear":
        return floor + (peak - floor) * max(0.0, (total_steps - step) / max(1, total_steps - w))
    if cfg.name == "cosine":
        span = max(1, total_steps - 1 - w)
        t = min(1.0, (step - w) / span)
        return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * t))
    # wsd: the decay window is the last wsd_decay * total steps (but never eats into warm-up)
    n_decay = min(int(round(cfg.wsd_decay * total_steps)), total_steps - w)
    start = total_steps - n_decay
    if n_decay <= 0 or step < start:
        return peak
    t = min(1.0, (step - start + 1) / n_decay)
    if cfg.wsd_decay_shape == "linear":
        return peak + (floor - peak) * t
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * t))


def log_spaced_steps(total: int, per_decade: int) -> set[int]:
    """Steps ``round(10 ** (k / per_decade))`` for k = 0, 1, ... up to ``total``: dense early, sparse late.

    The one log spacing of the project: log-scheduled checkpoints
    (``checkpoint_schedule: log``) and validation (``eval_schedule: log``) use it.
    """
    out, k = set(), 0
    while (s := int(round(10 ** (k / per_decade)))) <= total:
        out.add(s)
        k += 1
    return out
