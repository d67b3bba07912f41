"""``gpt_neox``: GPT-NeoX / Pythia (LayerNorm, parallel attention and GELU MLP, partial RoPE, biases).

Pythia's settings are the family's defaults (``use_parallel_residual``, RoPE on a quarter of each
head); there is no grouped-query attention and no head size of its own, and the MLP has two matrices,
so a preset is adapted as the package docstring says (MHA, ``intermediate_size`` x 1.5)."""

from __future__ import annotations

from . import FAMILIES, Family


class GPTNeoX(Family):
    """GPT-NeoX / Pythia: LayerNorm, parallel attention + GELU MLP, partial RoPE, biases, no GQA."""

    model_type = "gpt_neox"
    gated_mlp = False
    gqa = False
    free_head_dim = False
    qkv_bias = True
    out_bias = True
    mlp_bias = True
    layer_norm = True
    residual_outputs = ("attention.dense.weight", "mlp.dense_4h_to_h.weight")
    renames = {"rms_norm_eps": "layer_norm_eps"}


FAMILIES.register("gpt_neox")(GPTNeoX())
