"""Device names -> ``torch.device``: the one rule shared by the trainer and the evaluators; and the
machine's memory, which sizes are checked against before they are allocated; and the CPUs a process may
use, which a cluster job's torch threads are set from (:func:`rank_threads`).

``auto`` is CUDA when available (the process's ``LOCAL_RANK`` GPU under
torchrun), else CPU; ``cuda`` without an index also means the ``LOCAL_RANK``
GPU; asking for CUDA on a machine without it is a ``ConfigError`` naming the field.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .errors import ConfigError


#: what Slurm sets in a job (and its steps) that was given GPUs: a count, or the GPUs' indices
_SLURM_GPU_VARS = ("SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS")


def slurm_gpus() -> str | None:
    """The GPU allocation of the Slurm job this process runs in, as Slurm's variables say it
    (``SLURM_GPUS_ON_NODE=2``), or None outside a job or in a job given no GPU."""
    if not os.environ.get("SLURM_JOB_ID"):
        return None
    given = [f"{v}={os.environ[v]}" for v in _SLURM_GPU_VARS if os.environ.get(v, "").strip() not in ("", "0")]
    return ", ".join(given) or None


def resolve_device(name: str, field: str = "device"):
    """The torch device of a device name: ``auto`` (CUDA when torch sees it, else the CPU; but never the
    CPU in a Slurm job given GPUs, :func:`slurm_gpus`), ``cpu``, ``cuda`` (this rank's, ``LOCAL_RANK``),
    ``cuda:N``... A name that cannot be had is a ConfigError on ``field``."""
    import torch

    local = int(os.environ.get("LOCAL_RANK", 0))
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local)
        given = slurm_gpus()
        if given is not None:
            # a job given GPUs that trains on the CPU runs for days and ends COMPLETED: refuse it here, at once
            why = ("a CPU-only build of torch" if torch.version.cuda is None
                   else f"torch built for CUDA {torch.version.cuda} cannot use this node's driver")
            raise ConfigError(field, f"auto: this Slurm job was given GPUs ({given}, CUDA_VISIBLE_DEVICES="
                              f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}) but torch {torch.__version__} sees no "
                              f"CUDA device ({why}); refusing to train on the CPU: fix the job's environment, or "
                              "set device: cpu to train on the CPU anyway")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(field, f"{name!r} requested but CUDA is not available")
    if name == "cuda":
        return torch.device("cuda", local)
    try:
        return torch.device(name)
    except RuntimeError as e:
        raise ConfigError(field, f"not a device name: {name!r} ({e})") from None


def use_device(name: str, field: str = "device"):
    """:func:`resolve_device`, made this process's current CUDA device when it is one: Triton kernels
    (Liger-Kernel's fused loss among them) launch on the current device, not on their tensors', so a run
    on ``cuda:1`` whose current device stayed cuda:0 would hand them memory of another GPU."""
    import torch

    dev = resolve_device(name, field)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return dev


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


def check_memory(need: float, have: int | None, field: str, what: str, fix: str,
                 where: str = "on this machine") -> None:
    """ConfigError on ``field`` when ``need`` bytes (``what`` would need them) exceed ``have``, the bytes
    available ``where`` (None: unknown, nothing is checked): the one check of every size against the memory
    there is, made before anything of that size is allocated."""
    if have is not None and need > have:
        raise ConfigError(field, f"{what} would need about {need / 2**30:,.1f} GB of memory, more than the "
                          f"{have / 2**30:,.1f} GB available {where}; {fix}")


def free_disk(path: str | Path) -> int | None:
    """Bytes free on the file system that holds ``path`` (or would: its nearest folder that exists); None when
    it cannot say."""
    p = Path(path).absolute()
    for q in (p, *p.parents):
        if q.exists():
            try:
                return shutil.disk_usage(q).free
            except OSError:
                return None
    return None


def check_disk(need: float, path: str | Path, field: str, what: str, fix: str) -> None:
    """ConfigError on ``field`` when ``need`` bytes (``what`` writes at least that much) exceed the disk free
    at ``path``: a budget typed with a few digits too many stops before it builds for hours and fills the disk."""
    have = free_disk(path)
    if have is not None and need > have:
        raise ConfigError(field, f"{what} would write at least {need / 2**30:,.1f} GB, more than the "
                          f"{have / 2**30:,.1f} GB free at {path}; {fix}")


def check_row_memory(seq_len: int, processes: int, field: str) -> None:
    """ConfigError on ``field`` when building rows of ``seq_len`` + 1 tokens in ``processes`` processes
    would need more memory than the machine has available (:data:`ROW_BYTES_PER_TOKEN` per token), so a
    mistyped length stops in one line instead of growing until the machine swaps or kills it."""
    check_memory((seq_len + 1) * max(1, processes) * ROW_BYTES_PER_TOKEN, available_memory(), field,
                 f"{seq_len:,} tokens per row x {processes} process(es)",
                 "give a shorter sequence length (or fewer workers)")


#: tensors of a parameter's size that training holds: weights, gradients and AdamW's two moments (in fp32, the
#: 4P + 4P + 8P bytes of ``preschool plan``, docs/scale.md)
TRAIN_COPIES = 4
#: bytes one parameter holds while the model is built: fp32 weights, on the host, before any move or sharding
BUILD_BYTES_PER_PARAM = 4


def cuda_free_memory(device) -> int | None:
    """Bytes free on the CUDA ``device`` now (None when CUDA cannot say)."""
    import torch

    try:
        return int(torch.cuda.mem_get_info(device)[0])
    except (RuntimeError, AssertionError, ValueError):
        return None


def _model_floor(params: int, shards: int, param_bytes: int) -> tuple[float, int]:
    """(bytes one rank holds for a model of ``params`` parameters before any activation, ranks on this node):
    :func:`check_model_memory`'s floor."""
    per_rank = max(BUILD_BYTES_PER_PARAM * params, TRAIN_COPIES * param_bytes * params / max(1, shards))
    return per_rank, max(1, int(os.environ.get("LOCAL_WORLD_SIZE", 1)))


#: the share of ``preschool plan``'s activation estimate the trainer refuses on: its CPU formula is within
#: 25 % of measured runs, its CUDA ones unmeasured, so only what surely does not fit is refused
ACTIVATION_FLOOR = 0.5


def check_step_memory(params: int, activations: float, device, shards: int, param_bytes: int, field: str,
                      what: str) -> None:
    """ConfigError on ``field`` (``batch_size`` or ``micro_batch_size``) when the model's floor
    (:func:`check_model_memory`) plus :data:`ACTIVATION_FLOOR` of ``activations``, the bytes one micro-batch's
    forward and backward hold per rank as ``preschool plan`` estimates them, exceed the memory there is:
    a batch size typed with a few digits too many stops here, not after minutes of loading its rows.
    ``what`` says the micro-batch (rows x tokens)."""
    per_rank, ranks = _model_floor(params, shards, param_bytes)
    act = ACTIVATION_FLOOR * activations
    need = f"{what}: at least {act / 2**30:,.1f} GB of activations on top of the model's {per_rank / 2**30:,.1f} GB"
    fix = ("give a smaller micro_batch_size (the step accumulates gradients over micro-batches; "
           "activation_checkpointing: blocks holds less; preschool plan shows the largest that fits)")
    if getattr(device, "type", str(device)) != "cuda":
        check_memory((per_rank + act) * ranks, available_memory(), field,
                     need + (f" x {ranks} processes" if ranks > 1 else ""), fix)
    else:
        check_memory(per_rank + act, cuda_free_memory(device), field, need, fix, f"on {device}")


def check_model_memory(params: int, device, shards: int = 1, param_bytes: int = 4, field: str = "model",
                       shape: str = "") -> None:
    """ConfigError on ``field`` when training a model of ``params`` parameters on ``device`` would need more
    memory than it has available, checked before the model is built (a shape typed with a few digits too
    many was allocated until the kernel killed the process).

    The model is built in fp32 on the host (:data:`BUILD_BYTES_PER_PARAM`), then trained on ``device``
    with its weights, gradients and AdamW moments (:data:`TRAIN_COPIES` x ``param_bytes``: 4 for fp32, 2
    for ``pure_bf16``), of which each of ``shards`` FSDP ranks holds its share, after holding the whole
    fp32 model once. The host is shared by the node's ranks (``LOCAL_WORLD_SIZE``); a CUDA device is its
    rank's own. Activations come on top: this is the floor below which no batch size helps
    (:func:`check_step_memory` adds a micro-batch's).
    """
    train_bytes = TRAIN_COPIES * param_bytes
    per_rank, ranks = _model_floor(params, shards, param_bytes)
    model = f"a model of {params:,} parameters{f' ({shape})' if shape else ''}"
    trained = f"x {train_bytes} bytes (weights, gradients, AdamW's two moments)" + (
        f" / {shards} FSDP shards" if shards > 1 else "")
    procs = f" x {ranks} processes" if ranks > 1 else ""
    fix = "give a smaller model (preschool plan estimates its memory without building it)"
    if getattr(device, "type", str(device)) != "cuda":
        check_memory(per_rank * ranks, available_memory(), field, f"{model} {trained}{procs}", fix)
        return
    check_memory(BUILD_BYTES_PER_PARAM * params * ranks, available_memory(), field,
                 f"{model} x {BUILD_BYTES_PER_PARAM} bytes (fp32 weights, built on the host){procs}", fix)
    check_memory(per_rank, cuda_free_memory(device), field, f"{model} {trained}", fix, f"on {device}")


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
