"""``olmo2``: OLMo 2 (Llama's blocks with the norms after attention and MLP, and RMSNorm on queries and keys).

No Liger patch: Liger-Kernel's OLMo 2 patch has not been checked against this trainer on a GPU, so
``kernels: liger`` is refused for it and ``auto`` resolves to ``off``."""

from __future__ import annotations

from . import FAMILIES, Family


class Olmo2(Family):
    """OLMo 2: post-norm SwiGLU blocks, RMSNorm on queries and keys, grouped-query attention, RoPE."""

    model_type = "olmo2"
    qk_norm = True
    post_norms = True


FAMILIES.register("olmo2")(Olmo2())
