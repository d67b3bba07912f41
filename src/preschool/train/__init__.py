"""Model presets, LR schedules and the staged trainer (see docs/training.md).

Public names are imported lazily so ``preschool --help`` does not pay for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "train": "trainer", "Trainer": "trainer", "TrainConfig": "trainer", "StageConfig": "trainer",
    "ModelConfig": "model", "MODEL_PRESETS": "model", "build_model": "model", "resize_vocab": "model",
    "ScheduleConfig": "schedules", "lr_at": "schedules", "Callback": "callbacks.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
