"""``gpt2``: GPT-2 (LayerNorm, learned position embeddings, GELU MLP, biases, no GQA).

GPT-2's config names most fields its own way (``n_embd``, ``n_layer``, ``n_head``, ``n_inner``,
``n_positions``, ``layer_norm_epsilon``, ``activation_function``, ``attn_pdrop``); presets and
overrides use the canonical names. Dropout is off (``resid_pdrop``, ``embd_pdrop``, ``attn_pdrop``
0), as in every other family here; an override may turn it on. The position table has
``max_position_embeddings`` rows (the preset's), counted among the embedding parameters."""

from __future__ import annotations

from . import FAMILIES, Family


class GPT2(Family):
    """GPT-2: LayerNorm, learned position embeddings, GELU MLP, biases, no GQA, no RoPE."""

    model_type = "gpt2"
    gated_mlp = False
    gqa = False
    free_head_dim = False
    qkv_bias = True
    out_bias = True
    mlp_bias = True
    layer_norm = True
    learned_positions = True
    blocks_attr = "h"
    residual_outputs = ("attn.c_proj.weight", "mlp.c_proj.weight")
    renames = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
               "intermediate_size": "n_inner", "max_position_embeddings": "n_positions",
               "rms_norm_eps": "layer_norm_epsilon", "hidden_act": "activation_function",
               "attention_dropout": "attn_pdrop"}
    fixed = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}


FAMILIES.register("gpt2")(GPT2())
