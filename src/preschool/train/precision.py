"""Which autocast dtype a run trains in, and whether this CPU has bf16 matrix units.

``precision``: ``fp32`` (no autocast), ``bf16`` (autocast to bfloat16 on the run's
device; weights, optimizer state and the loss stay fp32), or ``auto`` (bf16 on
CUDA, fp32 on CPU, so CPU results are identical across machines).

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


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device`` (None: plain fp32).

    Warns (once per call) when bf16 is asked for on a CPU without native bf16
    matmuls, where it is emulated and slower than fp32.
    """
    if precision == "fp32" or (precision == "auto" and device.type != "cuda"):
        return None
    if device.type == "cpu" and cpu_bf16_capability() is None:
        warnings.warn("precision: bf16 on a CPU without amx_bf16 or avx512_bf16: bf16 matmuls are emulated "
                      "and usually slower than fp32 here (use precision: fp32)", stacklevel=2)
    return torch.bfloat16
