"""Model families: the Hugging Face decoder architectures the trainer builds, trains, shards and resumes.

A family is one HF ``model_type`` (``qwen2``, ``llama``, ``olmo2``, ``gpt_neox``, ``gpt2``), built through
``AutoModelForCausalLM`` from a config made here, on this machine (no hub access, no remote code). Each
is a :class:`Family` row registered in ``FAMILIES`` (here) by one module of this package
named after it (or a plug-in's ``families`` module), found by the registry's discovery.

A preset (``train/presets/``) gives a trunk in the *canonical* fields, the Llama names
(``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``,
``intermediate_size``, ``rope_theta``, ``max_position_embeddings``, ``rms_norm_eps``, ``head_dim``).
A family turns them into its own HF config (:meth:`Family.hf_kwargs`: GPT-2's ``n_embd``, ``n_layer``
...), and back from a saved config (:meth:`Family.shape_from_hf`, for a model started from a folder).
Where a family cannot take a preset's shape as it is, :meth:`Family.adapt_preset` sizes it the same
way every time, so the parameter count stays close to the preset's:

- no grouped-query attention (``gpt_neox``, ``gpt2``): as many KV heads as query heads;
- a two-matrix GELU MLP instead of SwiGLU's three (``gpt_neox``, ``gpt2``): ``intermediate_size``
  1.5 x the preset's, the same MLP weights per layer (the compartment tiers' rule read backwards);
- a head size other than hidden / heads (the ``l2t-*`` presets) is refused in one line where the
  family has no ``head_dim`` (``gpt_neox``, ``gpt2``).

``overrides`` are literal: they set the family's field after the preset was adapted. They may use the
canonical names (those the family has) or the family's own HF config fields; a family field that only
renames a canonical one (GPT-2's ``n_embd``) is refused naming the canonical name.

What a family says about the trainer's speed settings (the trainer asks, and refuses in one line what a
family cannot do): ``liger_patch`` (Liger-Kernel's patch function for ``kernels: liger``; None: ``auto``
resolves to ``off`` and ``liger`` is a ConfigError), ``blocks_attr`` (where the decoder blocks are, for
``compile: blocks``, activation checkpointing and FSDP's per-block sharding). The fused loss needs only
the base model's final hidden state and the output embedding, which every family here has.

Everything but :meth:`Family.config_class` is arithmetic: ``preschool plan`` describes any family's
model without importing torch or transformers.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ...errors import ConfigError
from ...registry import Registry

# architectures by HF model_type: this package (one module each) and a plug-in's `families`
FAMILIES = Registry("model family", packages=("preschool.train.families",), plugin_module="families")

# the fields presets and overrides speak (Llama's names); a family maps them onto its own
CANONICAL = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
             "rope_theta", "max_position_embeddings", "rms_norm_eps", "attention_dropout", "hidden_act", "head_dim")


class Family:
    """One HF decoder architecture (class attributes say its shape rules; module docstring)."""

    model_type: str = ""
    summary: str = ""
    # SwiGLU (gate, up, down: 3 d x ffn matrices) or a two-matrix MLP (up, down)
    gated_mlp: bool = True
    gqa: bool = True  # fewer KV heads than query heads
    free_head_dim: bool = True  # a head size other than hidden / heads (head_dim)
    qkv_bias: bool = False
    out_bias: bool = False  # the attention output projection's bias
    mlp_bias: bool = False
    layer_norm: bool = False  # LayerNorm (gain and bias) instead of RMSNorm (gain)
    qk_norm: bool = False  # RMSNorm over the whole query and key projections (OLMo 2)
    post_norms: bool = False  # norms after attention and MLP instead of before (OLMo 2): same count
    learned_positions: bool = False  # a position embedding table (GPT-2) instead of RoPE
    blocks_attr: str = "layers"  # the base model's list of decoder blocks
    # the projections that write into the residual stream (what scaled init scales down)
    residual_outputs: tuple[str, ...] = ("o_proj.weight", "down_proj.weight")
    liger_patch: str | None = None  # liger_kernel.transformers.<this>(model=...) for kernels: liger
    # canonical field -> this family's HF config field
    renames: Mapping[str, str] = {}
    # the family's own fields that only rename a canonical one (refused as overrides, naming it)
    aliases: Mapping[str, str] = {}
    # HF config settings every model of the family gets
    fixed: Mapping[str, Any] = {}

    # -- fields ------------------------------------------------------------------------------------
    def canonical_fields(self) -> frozenset[str]:
        """The canonical fields this family has (an override of another is refused)."""
        out = set(CANONICAL)
        if not self.free_head_dim:
            out.discard("head_dim")
        if self.learned_positions:
            out.discard("rope_theta")
        return frozenset(out)

    def config_class(self):
        """The HF config class (imports transformers)."""
        from transformers import CONFIG_MAPPING

        return CONFIG_MAPPING[self.model_type]

    def known_fields(self) -> set[str]:
        """Every field an override may set: the canonical ones this family has and its HF config's own."""
        own = set(self.config_class()().to_dict())
        return (own | self.canonical_fields()) - set(self.renames.values()) - set(self.aliases)

    def check_override(self, key: str) -> None:
        """ConfigError naming ``overrides.<key>`` when an override of that name means nothing here."""
        if key in self.aliases or key in self.renames.values():
            canon = self.aliases.get(key) or next(c for c, n in self.renames.items() if n == key)
            raise ConfigError(f"overrides.{key}", f"{self.model_type} calls {canon!r} this; set overrides.{canon}")
        if key in CANONICAL and key not in self.canonical_fields():
            what = "RoPE (it learns position embeddings)" if key == "rope_theta" else \
                "a head size other than hidden_size / num_attention_heads"
            raise ConfigError(f"overrides.{key}", f"{self.model_type} has no {what}")

    # -- shapes ------------------------------------------------------------------------------------
    def adapt_preset(self, shape: dict[str, Any], preset: str) -> dict[str, Any]:
        """A preset's canonical shape as this family builds it (module docstring: the rules)."""
        shape = dict(shape)
        d, h = shape["hidden_size"], shape["num_attention_heads"]
        hd = shape.get("head_dim")
        if hd is not None and not self.free_head_dim:
            if hd * h != d:
                raise ConfigError("preset", f"{preset} has {h} heads of {hd} (query width {h * hd}, not the hidden size "
                                  f"{d}), which {self.model_type} cannot build; choose another preset")
            shape.pop("head_dim")
        if not self.gqa:
            shape["num_key_value_heads"] = h
        if not self.gated_mlp:
            shape["intermediate_size"] = 3 * shape["intermediate_size"] // 2
        return shape

    def check_shape(self, shape: dict[str, Any], named: Callable[..., str]) -> None:
        """ConfigError (``named``: the override that set it) for a shape this family cannot build."""
        if not self.gqa and shape["num_key_value_heads"] != shape["num_attention_heads"]:
            raise ConfigError(named("num_key_value_heads"), f"{self.model_type} has no grouped-query attention: "
                              f"KV heads must equal the {shape['num_attention_heads']} attention heads")
        if not self.free_head_dim and shape.get("head_dim") not in (None, shape["hidden_size"] // shape["num_attention_heads"]):
            raise ConfigError(named("head_dim"), f"{self.model_type} has no head size of its own (hidden_size / heads)")

    def hf_kwargs(self, shape: dict[str, Any]) -> dict[str, Any]:
        """This family's HF config fields for a canonical ``shape`` (``rope_theta`` into ``rope_parameters``)."""
        out = dict(self.fixed)
        shape = dict(shape)
        theta = shape.pop("rope_theta", None)
        if not self.gqa:
            shape.pop("num_key_value_heads", None)
        if not self.free_head_dim:
            shape.pop("head_dim", None)
        if not self.learned_positions:
            out["rope_parameters"] = {**self.rope_defaults(), "rope_theta": float(10000.0 if theta is None else theta)}
        for k, v in shape.items():
            out[self.renames.get(k, k)] = v
        return out

    def rope_defaults(self) -> dict[str, Any]:
        """The ``rope_parameters`` every model of the family gets besides its theta."""
        return {"rope_type": "default"}

    def shape_from_hf(self, hf: Mapping[str, Any]) -> dict[str, Any]:
        """The canonical shape of a saved HF config (``config.json`` as a mapping): what describe() counts."""
        back = {v: k for k, v in self.renames.items()}
        shape = {back.get(k, k): v for k, v in hf.items() if back.get(k, k) in CANONICAL}
        if not self.gqa or shape.get("num_key_value_heads") is None:
            shape["num_key_value_heads"] = shape["num_attention_heads"]
        if shape.get("intermediate_size") is None:  # GPT-2's n_inner: null means 4 d
            shape["intermediate_size"] = 4 * shape["hidden_size"]
        rope = hf.get("rope_parameters") or {}
        if "rope_theta" not in shape and not self.learned_positions:
            shape["rope_theta"] = float(rope.get("rope_theta", hf.get("rope_theta", 10000.0)))
        return shape

    # -- parameter counts (describe(); tests check them against the HF models) ----------------------
    def layer_params(self, shape: Mapping[str, Any]) -> int:
        """Parameters of one decoder block."""
        d, ffn = shape["hidden_size"], shape["intermediate_size"]
        hd = shape.get("head_dim") or d // shape["num_attention_heads"]
        q, kv = shape["num_attention_heads"] * hd, shape["num_key_value_heads"] * hd
        attn = 2 * d * q + 2 * d * kv + (q + 2 * kv if self.qkv_bias else 0) + (d if self.out_bias else 0)
        mlp = (3 if self.gated_mlp else 2) * d * ffn + ((ffn * (2 if self.gated_mlp else 1) + d) if self.mlp_bias else 0)
        norms = 2 * self.norm_params(d) + ((q + kv) if self.qk_norm else 0)
        return attn + mlp + norms

    def norm_params(self, d: int) -> int:
        """Parameters of one norm over ``d`` features."""
        return 2 * d if self.layer_norm else d

    def position_params(self, shape: Mapping[str, Any]) -> int:
        """Parameters of a learned position table (0 with RoPE)."""
        return shape["max_position_embeddings"] * shape["hidden_size"] if self.learned_positions else 0

    # -- the built model -----------------------------------------------------------------------------
    def blocks(self, model) -> list:
        """The decoder blocks of a model of this family."""
        return list(getattr(model.base_model, self.blocks_attr))

    def position_table(self, model):
        """The learned position embedding's weight (None with RoPE): an embedding, not a matmul weight."""
        return model.base_model.wpe.weight if self.learned_positions else None


def get_family(name: str, field: str = "family") -> Family:
    """The registered :class:`Family` called ``name`` (ConfigError naming ``field``)."""
    return FAMILIES.get(name, field).cls


def family_of_model(model) -> Family | None:
    """The registered family of an HF model (its ``config.model_type``), or None."""
    kind = getattr(getattr(model, "config", None), "model_type", None)
    return FAMILIES[kind] if isinstance(kind, str) and kind in FAMILIES else None


def decoder_blocks(model, field: str = "model") -> list:
    """The decoder blocks of an HF causal LM: its family's (``Family.blocks_attr``), else the base model's
    ``layers`` (a model of a family not registered here); ConfigError naming ``field`` when it has neither."""
    fam = family_of_model(model)
    if fam is not None:
        return fam.blocks(model)
    layers = getattr(getattr(model, "base_model", None), "layers", None)
    if layers is None:
        raise ConfigError(field, f"{type(model).__name__} has no decoder blocks the trainer knows (base_model.layers)")
    return list(layers)
