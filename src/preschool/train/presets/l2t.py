"""The L2T code's Qwen2 shapes: ``l2t-500m`` and ``l2t-1b`` (query heads narrower than the hidden size)."""

from __future__ import annotations

from typing import Any

from ..model import MODEL_PRESETS
from . import trunk


@MODEL_PRESETS.register("l2t-500m")
def _l2t_500m() -> dict[str, Any]:
    """L2T 500M: 24 layers, d=1024, 24 heads of dim 42 (2 KV), FFN 4864, RoPE 1e6."""
    return trunk(1024, 24, 24, 2, 4864, rope_theta=1e6, head_dim=42, rms_norm_eps=1e-6)


@MODEL_PRESETS.register("l2t-1b")
def _l2t_1b() -> dict[str, Any]:
    """L2T 1B: 30 layers, d=1728, 32 heads of dim 54 (4 KV), FFN 4752, RoPE 1e6."""
    return trunk(1728, 30, 32, 4, 4752, rope_theta=1e6, head_dim=54, rms_norm_eps=1e-6)
