"""Device names -> ``torch.device``: the one rule shared by the trainer and the evaluators; and the
machine's memory, which sizes are checked against before they are allocated.

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


#: bytes a data-building process holds per token of one row (a generated document's symbols, their rendering
#: and ids, the packer's row): about 90 measured on `generate stack`; 256 leaves room for text renders
ROW_BYTES_PER_TOKEN = 256


def available_memory() -> int | None:
    """Bytes of memory this machine has available now (Linux ``MemAvailable``; else free pages), None
    when the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_row_memory(seq_len: int, processes: int, field: str) -> None:
    """ConfigError on ``field`` when building rows of ``seq_len`` + 1 tokens in ``processes`` processes
    would need more memory than the machine has available (:data:`ROW_BYTES_PER_TOKEN` per token), so a
    mistyped length stops in one line instead of growing until the machine swaps or kills it."""
    need = (seq_len + 1) * max(1, processes) * ROW_BYTES_PER_TOKEN
    have = available_memory()
    if have is not None and need > have:
        raise ConfigError(field, f"{seq_len:,} tokens per row x {processes} process(es) would need about "
                          f"{need / 2**30:,.1f} GB of memory to build, more than the {have / 2**30:,.1f} GB "
                          "available on this machine; give a shorter sequence length (or fewer workers)")
