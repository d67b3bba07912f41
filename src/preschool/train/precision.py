"""Which autocast dtype a run trains in, and whether this CPU has bf16 matrix units.

``precision``: ``fp32`` (no autocast), ``bf16`` (autocast to bfloat16 on the run's
device; weights, optimizer state and the loss stay fp32), ``auto`` (bf16 on
CUDA, fp32 on CPU, so CPU results are identical across machines), or
``pure_bf16`` (the model itself in bfloat16, so weights, gradients and AdamW
states are bf16 and no autocast runs: how a model loaded in bf16 trains under
the HF Trainer, as the L2T runs did; the loss is still reduced in fp32).

CPU bf16 pays off only where the CPU multiplies bf16 matrices natively: Intel AMX
(``amx_bf16``, Sapphire Rapids and later) or the AVX-512 BF16 dot-product
instructions (``avx512_bf16``, Cooper Lake, Zen 4). There a bf16 autocast matmul
runs several times faster than fp32 (docs/training.md, Throughput); elsewhere
oneDNN emulates bf16 and it is slower than fp32, so asking for it warns.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import torch

# /proc/cpuinfo flags that give native bf16 matrix multiplies, best first
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.lru_cache(maxsize=1)
def cpu_bf16_capability() -> str | None:
    """The best native bf16 matmul feature of this CPU (``amx_bf16`` / ``avx512_bf16``), or None.

    Read from ``/proc/cpuinfo`` (Linux); elsewhere None, i.e. not known to be native.
    """
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
            break
    return next((f for f in BF16_CPU_FLAGS if f in flags), None)


PURE_BF16 = "pure_bf16"


def _warn_emulated(precision: str, device: torch.device) -> None:
    if device.type == "cpu" and cpu_bf16_capability() is None:
        warnings.warn(f"precision: {precision} on a CPU without amx_bf16 or avx512_bf16: bf16 matmuls are "
                      "emulated and usually slower than fp32 here (use precision: fp32)", stacklevel=3)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device`` (None: no autocast).

    Warns (once per call) when bf16 is asked for on a CPU without native bf16
    matmuls, where it is emulated and slower than fp32.
    """
    if precision == "fp32" or (precision == "auto" and device.type != "cuda"):
        return None
    _warn_emulated(precision, device)
    return None if precision == PURE_BF16 else torch.bfloat16


def param_dtype(precision: str) -> torch.dtype:
    """The dtype the model's parameters (so its gradients and AdamW states) are kept in."""
    return torch.bfloat16 if precision == PURE_BF16 else torch.float32
