"""Device names -> ``torch.device``: the one rule shared by the trainer and the evaluators.

``auto`` is CUDA when available (the process's ``LOCAL_RANK`` GPU under
torchrun), else CPU; ``cuda`` without an index also means the ``LOCAL_RANK``
GPU; asking for CUDA on a machine without it is a ``ConfigError`` naming the field.
"""

from __future__ import annotations

import os

from .errors import ConfigError


def resolve_device(name: str, field: str = "device"):
    import torch

    local = int(os.environ.get("LOCAL_RANK", 0))
    if name == "auto":
        return torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(field, f"{name!r} requested but CUDA is not available")
    if name == "cuda":
        return torch.device("cuda", local)
    try:
        return torch.device(name)
    except RuntimeError as e:
        raise ConfigError(field, f"not a device name: {name!r} ({e})") from None
