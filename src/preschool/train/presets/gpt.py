"""GPT-family presets: the verify-ppt Qwen2 table (``gpt-500m`` ... ``gpt-7b``), the SmolLM shapes (``gpt-125m``,
``smollm-360m``) and the GPU ladder bottom ``gpt-60m`` (sources in the package docstring)."""

from __future__ import annotations

from typing import Any

from ..model import MODEL_PRESETS
from . import trunk


@MODEL_PRESETS.register("gpt-60m")
def _gpt_60m() -> dict[str, Any]:
    """GPU ladder bottom: 12 layers, d=512, 8 heads of 64 (4 KV), FFN 1536 (~63M params at vocab 49k)."""
    return trunk(512, 12, 8, 4, 1536, max_positions=4096)


@MODEL_PRESETS.register("gpt-125m")
def _gpt_125m() -> dict[str, Any]:
    """SmolLM-135M shape: 30 layers, d=576, 9 heads (3 KV), FFN 1536."""
    return trunk(576, 30, 9, 3, 1536, max_positions=4096)


@MODEL_PRESETS.register("gpt-500m")
def _gpt_500m() -> dict[str, Any]:
    """verify-ppt 500M: 32 layers, d=1024, 16 heads (4 KV), FFN 2816, RoPE 50k."""
    return trunk(1024, 32, 16, 4, 2816, rope_theta=50000.0, max_positions=4096)


@MODEL_PRESETS.register("gpt-1b")
def _gpt_1b() -> dict[str, Any]:
    """verify-ppt 1B: 36 layers, d=1536, 12 heads (4 KV), FFN 4096, RoPE 50k."""
    return trunk(1536, 36, 12, 4, 4096, rope_theta=50000.0, max_positions=4096)


@MODEL_PRESETS.register("gpt-3b")
def _gpt_3b() -> dict[str, Any]:
    """verify-ppt 3B: 40 layers, d=2560, 20 heads (4 KV), FFN 6912, RoPE 50k."""
    return trunk(2560, 40, 20, 4, 6912, rope_theta=50000.0, max_positions=4096)


@MODEL_PRESETS.register("gpt-7b")
def _gpt_7b() -> dict[str, Any]:
    """verify-ppt 7B: 28 layers, d=3584, 28 heads (4 KV), FFN 18944, RoPE 50k, RMSNorm eps 1e-6."""
    return trunk(3584, 28, 28, 4, 18944, rope_theta=50000.0, max_positions=4096, rms_norm_eps=1e-6)


@MODEL_PRESETS.register("smollm-360m")
def _smollm_360m() -> dict[str, Any]:
    """SmolLM-360M shape (Beyond Perplexity's larger model): 32 layers, d=960, 15 heads (5 KV), FFN 2560."""
    return trunk(960, 32, 15, 5, 2560)
