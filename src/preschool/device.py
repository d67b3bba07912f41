"""Device names -> ``torch.device``: the one rule shared by the trainer and the evaluators; and the
machine's memory, which sizes are checked against before they are allocated; and the CPUs a process may
use, which a cluster job's torch threads are set from (:func:`rank_threads`).

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


def allocated_cpus() -> tuple[int, str]:
    """The CPUs this process may use and where that number comes from.

    The fewer of the affinity mask (``os.sched_getaffinity``: what a confining
    Slurm, task/affinity or cgroups, binds the task to) and Slurm's
    ``SLURM_CPUS_PER_TASK`` (what the job was given, which a Slurm without CPU
    confinement, task/none, does not enforce: the mask is then the whole node).
    """
    mask = len(os.sched_getaffinity(0))
    given = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if given.isdigit() and 0 < int(given) < mask:
        return int(given), "SLURM_CPUS_PER_TASK"
    return mask, "affinity mask"


def rank_threads() -> int | None:
    """Set torch's intra-op threads to this process's CPU allocation divided among the node's ranks.

    The CPUs are :func:`allocated_cpus` (what Slurm's ``--cpus-per-task`` gave
    the node's task, shared by its torchrun processes, not the node's CPU count);
    ``LOCAL_WORLD_SIZE`` is the number of ranks on this node (1 outside torchrun).
    Ranks that each take every CPU oversubscribe the node (two ranks x two
    threads on two cores ran ~10x slower than one rank). Returns the count set,
    or None outside torchrun and Slurm (torch's default is kept).
    """
    local = os.environ.get("LOCAL_WORLD_SIZE")
    if not local and not os.environ.get("SLURM_CPUS_PER_TASK"):
        return None
    import torch

    cpus, source = allocated_cpus()
    ranks = max(1, int(local or 1))
    n = max(1, cpus // ranks)
    torch.set_num_threads(n)
    if os.environ.get("LOCAL_RANK", "0") == "0":  # once per node, in the job log
        print(f"[preschool] torch threads per rank: {n} ({cpus} CPUs ({source}) / {ranks} local ranks)", flush=True)
    return n
