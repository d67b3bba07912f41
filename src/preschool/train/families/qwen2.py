"""``qwen2``: Qwen2 (RMSNorm, SwiGLU, grouped-query attention with Q/K/V biases, RoPE), the default family."""

from __future__ import annotations

from . import FAMILIES, Family


class Qwen2(Family):
    """Qwen2: RMSNorm, SwiGLU, grouped-query attention with Q/K/V biases, RoPE (the default family)."""

    model_type = "qwen2"
    qkv_bias = True
    liger_patch = "apply_liger_kernel_to_qwen2"


FAMILIES.register("qwen2")(Qwen2())
