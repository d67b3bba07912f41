"""Training FLOPs of our decoders, accelerator peak rates, and a measured matmul rate.

One formula serves the planner (``preschool plan``), the trainer's MFU in the
progress line and the throughput benchmark:

    FLOPs per trained token = 6 * N_matmul + 6 * L * d_attn * s

- ``N_matmul`` = the non-embedding parameters plus the output head (V x d): the
  weights every token multiplies by. The input embedding is a lookup and costs
  nothing; a tied head is counted once, as the matmul it is. Norm gains and
  biases are in the non-embedding count (a rounding error at any size).
- 6 = 2 (multiply + add) x 3 (forward, backward to activations, backward to
  weights) (Kaplan et al. 2020, sec. 2.1).
- The attention term: per layer, per token, Q K^T and A V each cost
  2 * d_attn * (keys seen) forward, 3x that for training; a causal token sees
  s/2 keys on average, so 6 * L * d_attn * s (d_attn = heads x head_dim).
  Same count as the spec's 21.0 GFLOP/token for verify-ppt 3B at s = 4096.

These are *model* FLOPs: activation checkpointing recomputes a forward (8 instead
of 6) but MFU is quoted against model FLOPs, as the papers do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..registry import Registry


def flops_per_token(desc: dict, seq_len: int) -> float:
    """Training FLOPs per token for a model summary from :func:`preschool.train.model.describe`."""
    n_matmul = desc["params_non_embedding"] + desc["vocab_size"] * desc["hidden_size"]
    d_attn = desc["heads"] * desc["head_dim"]
    return 6.0 * n_matmul + 6.0 * desc["layers"] * d_attn * seq_len


@dataclass(frozen=True)
class GPU:
    """One accelerator's dense bf16 tensor-core peak and memory, as its vendor datasheet prints them."""

    name: str
    bf16_flops: float  # dense (no sparsity), FLOP/s
    memory_bytes: int
    source: str
    # words that all appear in torch.cuda.get_device_name() (lower case) of this model; the row whose
    # words are the most specific match names the device (gpu_for_device_name)
    device_words: tuple[str, ...] = ()


GIB = 1 << 30

# accelerator rows by name (``plan --gpu``): one file per vendor in train/gpus/, or a plug-in's `gpus` module
GPUS = Registry("GPU", packages=("preschool.train.gpus",), plugin_module="gpus")


def gpu_for_device_name(name: str) -> GPU | None:
    """The table row for a ``torch.cuda.get_device_name()`` string (the row with the most of its
    ``device_words`` in it, all present), or None when no row knows it."""
    n = name.lower()
    rows = [g for g in (e.cls for e in GPUS) if g.device_words and all(w in n for w in g.device_words)]
    return max(rows, key=lambda g: len(g.device_words), default=None)


def device_peak_flops(device, amp_dtype) -> float | None:
    """The per-device peak an MFU is quoted against: the table's dense bf16 figure for a CUDA device it
    knows, when training in bf16; None otherwise (CPU peaks are measured: ``preschool plan --cpu``)."""
    import torch

    if getattr(device, "type", str(device)) != "cuda" or amp_dtype != torch.bfloat16:
        return None
    gpu = gpu_for_device_name(torch.cuda.get_device_name(device))
    return gpu.bf16_flops if gpu else None


def matmul_flops(device: str = "cpu", n: int = 1024, seconds: float = 0.3, dtype: str = "float32") -> float:
    """Measured square-matmul rate (FLOP/s) on ``device``: warm-up, then repeat for about ``seconds``."""
    return matmul_rate(device, n, n, n, seconds, dtype)


def matmul_rate(device: str, m: int, k: int, n: int, seconds: float = 0.3, dtype: str = "float32") -> float:
    """Measured rate (FLOP/s) of an (m, k) @ (k, n) matmul in ``dtype`` on ``device``."""
    import torch

    dt = getattr(torch, dtype)
    a = torch.randn(m, k, device=device, dtype=dt)
    b = torch.randn(k, n, device=device, dtype=dt)

    def sync() -> None:
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)

    a @ b
    sync()
    reps, t0 = 0, time.perf_counter()
    while True:
        a @ b
        reps += 1
        sync()
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return 2.0 * m * k * n * reps / elapsed


# square and transformer-like (tokens x d x 4d) shapes; the best of them is the peak
CPU_SHAPES = ((512, 512, 512), (768, 768, 768), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 768, 3072),
              (4096, 256, 768))
GPU_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 2048, 8192), (16384, 8192, 2048))


def peak_matmul_flops(device: str = "cpu", dtype: str = "float32", seconds: float = 0.3, sweeps: int = 3
                      ) -> tuple[float, tuple[int, int, int]]:
    """(best measured FLOP/s, its shape) over several matmul shapes, each measured once per sweep in
    ``sweeps`` interleaved sweeps: an MFU denominator for a machine without a datasheet figure.

    One fixed shape is not the peak: on an AMX CPU a 2048-square fp32 matmul ran below the 768-wide
    matmuls of the model itself, so MFU against it read 125 %. One sweep is not either: on an idle
    2-core Zen 3 a single 0.3 s sweep read 113 GFLOP/s where repeated sweeps reach ~155, and a low
    denominator inflates every MFU quoted against it. The fastest rate seen is the closest to the peak
    (noise only ever slows a matmul down)."""
    import torch

    shapes = GPU_SHAPES if torch.device(device).type == "cuda" else CPU_SHAPES
    best: dict[tuple[int, int, int], float] = {}
    for _ in range(max(1, sweeps)):
        for s in shapes:
            best[s] = max(best.get(s, 0.0), matmul_rate(device, *s, seconds=seconds, dtype=dtype))
    top = max(best, key=best.get)
    return best[top], top
