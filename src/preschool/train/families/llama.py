"""``llama``: Llama (RMSNorm, SwiGLU, grouped-query attention without biases, RoPE)."""

from __future__ import annotations

from . import FAMILIES, Family


class Llama(Family):
    """Llama: RMSNorm, SwiGLU, grouped-query attention without biases, RoPE."""

    model_type = "llama"
    liger_patch = "apply_liger_kernel_to_llama"


FAMILIES.register("llama")(Llama())
