"""The torch.distributed process group of a ``torchrun`` launch, created once per command.

``torchrun`` (one process per GPU, on one or many nodes) sets ``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK`` and the rendezvous address; :func:`process_group`
turns that into an initialised default process group (NCCL on CUDA, gloo on
CPU) for the duration of a block, and does nothing in a plain single process
(unless asked for a one-rank group: ``parallel: fsdp`` shards over a device
mesh even alone) or when a group already exists (the caller owns it then).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator


def is_initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


@contextlib.contextmanager
def process_group(device: str = "auto", field: str = "device", one_rank: bool = False) -> Iterator[bool]:
    """Create the default process group under torchrun (WORLD_SIZE > 1) for the block; yields whether
    this call created it (and so destroys it at the end). ``one_rank``: in a single process, make a
    one-rank group (an in-memory store: no address or port) instead of none."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if (world <= 1 and not one_rank) or is_initialized():
        yield False
        return
    import torch.distributed as dist

    from ..device import use_device

    dev = use_device(device, field)  # NCCL's communicator binds to the current device
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if world > 1:
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield True
    finally:
        dist.destroy_process_group()
