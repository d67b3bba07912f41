"""Decoder-only LMs built from Hugging Face ``transformers`` configs, by preset name and family.

A model is a plain HF causal LM of a registered family (``FAMILIES``, ``train/families/``: ``qwen2``,
``llama``, ``olmo2``, ``gpt_neox``, ``gpt2``) built through ``AutoModelForCausalLM``: checkpoints
written with ``save_pretrained`` (safetensors) load with nothing but
``AutoModelForCausalLM.from_pretrained``, so every HF tool (lm-eval, generate,
PEFT...) works on them.

Presets (``MODEL_PRESETS``, one trunk shape each, in ``train/presets/`` or a plug-in) fix the
trunk shape in the canonical (Llama) field names; the family adapts it to its own config
(``train/families/__init__.py``); the vocabulary comes from the tokenizer at build time.

Departure: init. HF initialises from global RNG state; we re-initialise every
weight from a private ``torch.Generator`` seeded by ``seed`` (normal(0,
init_std) for linear and embedding weights, zeros for biases, ones for norm
gains), so a model is a pure function of (config, vocab_size, seed) across
transformers versions and does not touch the caller's RNG. ``scaled_init``
draws the projections that write into the residual stream (attention
``o_proj``, MLP ``down_proj``) from normal(0, init_std / sqrt(2 L)) instead,
Nanotron's scaled initialisation (``scaling_method: NUM_LAYERS``), which the
verify-ppt configs train with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import check
from ..errors import ConfigError
from ..registry import Registry
from .families import FAMILIES, get_family  # noqa: F401  (FAMILIES re-exported beside MODEL_PRESETS)

# shapes by name: train/presets/ (one module per family, looked up as a whole) and a plug-in's `presets`
MODEL_PRESETS = Registry("model preset", packages=("preschool.train.presets",), plugin_module="presets")


# canonical fields every family has (train/families/): overrides among these are validated without importing
# transformers, so `preschool plan` of a paper config that sets, e.g., rms_norm_eps stays arithmetic only
COMMON_FIELDS = frozenset({
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "rope_theta", "max_position_embeddings", "rms_norm_eps", "attention_dropout", "hidden_act",
})


def _known_fields(name: str) -> set[str]:
    """Every override the family ``name`` takes (imports transformers for its HF config's fields)."""
    return get_family(name).known_fields()


@dataclass
class ModelConfig:
    """Which decoder to build: a named ``preset`` shape in a ``family``, plus HF config ``overrides``.

    ``overrides`` may set any field of the family's HF config (``hidden_size``,
    ``num_hidden_layers``, ``rope_theta``, ``max_position_embeddings``...);
    unknown names are a ConfigError naming ``overrides.<name>``.
    """

    preset: str = "micro"
    family: str = "qwen2"  # a registered family (train/families/): qwen2, llama, olmo2, gpt_neox, gpt2
    tie_embeddings: bool = True
    init_std: float = 0.02
    # o_proj / down_proj ~ N(0, init_std / sqrt(2 * layers)) (Nanotron's scaled init; module docstring)
    scaled_init: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    # embedding rows = the vocabulary rounded up to a multiple of this (L2T: 128, tokenizer length 32,768)
    vocab_multiple: int = 1

    def validate(self) -> None:
        MODEL_PRESETS.get(self.preset, "preset")
        fam = get_family(self.family)
        check(self.init_std > 0, "init_std", f"must be > 0, got {self.init_std}")
        check(self.vocab_multiple >= 1, "vocab_multiple", f"must be >= 1, got {self.vocab_multiple}")
        # only overrides need the HF config's field list: importing it costs seconds (transformers), which
        # `preschool plan` on a laptop should not pay for a preset-only config
        known = COMMON_FIELDS if set(self.overrides) <= COMMON_FIELDS else _known_fields(self.family)
        for k in self.overrides:
            fam.check_override(k)
            if k not in known:
                import difflib

                close = difflib.get_close_matches(k, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"overrides.{k}", f"not a field of the {self.family} HF config{hint}")
        for k in ("vocab_size", "tie_word_embeddings"):
            check(k not in self.overrides, f"overrides.{k}",
                  "set by the tokenizer / tie_embeddings, not by overrides")
        if self.overrides:  # a shape the trainer could not build fails here, before any data is prepared
            model_shape(self, 2)


def embedding_rows(cfg: ModelConfig, vocab_size: int) -> int:
    """The model's vocabulary for data over ``vocab_size`` ids: rounded up to ``cfg.vocab_multiple``."""
    return -(-vocab_size // cfg.vocab_multiple) * cfg.vocab_multiple


def model_shape(cfg: ModelConfig, vocab_size: int) -> dict[str, Any]:
    """The preset's shape as ``cfg.family`` builds it (``Family.adapt_preset``), ``cfg.overrides`` applied and
    checked, in the canonical field names: what :func:`hf_config` builds from.

    Plain arithmetic (no transformers import), so the planner and logs can describe a model cheaply."""
    if vocab_size < 2:
        raise ConfigError("vocab_size", f"must be >= 2, got {vocab_size}")
    fam = get_family(cfg.family)
    shape = fam.adapt_preset(MODEL_PRESETS.get(cfg.preset, "preset").cls(), cfg.preset)
    shape.update(cfg.overrides)

    def named(*keys: str) -> str:  # the override that makes the shape impossible (presets are consistent)
        return f"overrides.{next((k for k in keys if k in cfg.overrides), keys[-1])}"

    check_shape(shape, named)
    fam.check_shape(shape, named)
    return shape


def check_shape(shape: dict[str, Any], named) -> None:
    """ConfigError (``named(*keys)``: the field to blame) for sizes no family can build from."""
    # every size the parameter count and the HF config are built from (a zero or negative one gave the
    # planner negative parameters and the trainer a transformers traceback)
    sizes = ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads", "num_key_value_heads")
    for k in sizes + tuple(k for k in ("head_dim", "max_position_embeddings") if shape.get(k) is not None):
        v = shape[k]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConfigError(named(k), f"must be a positive integer, got {v!r}")
    d, h = shape["hidden_size"], shape["num_attention_heads"]
    if d % h and not shape.get("head_dim"):
        raise ConfigError(named("num_attention_heads", "hidden_size"),
                          f"hidden_size {d} not divisible by {h} heads (set overrides.head_dim for another head size)")
    if h % shape["num_key_value_heads"]:
        raise ConfigError(named("num_key_value_heads", "num_attention_heads"),
                          f"{h} attention heads not divisible by {shape['num_key_value_heads']} KV heads")


def hf_config(cfg: ModelConfig, vocab_size: int, special=None):
    """The HF ``PretrainedConfig`` for ``cfg`` at ``vocab_size``, with the tokenizer's BOS/EOS/PAD ids
    (``special``, a ``data.tokenizer.SpecialIds``; None: id 0 for all three, our BPE's ``<|endoftext|>``)."""
    fam = get_family(cfg.family)
    kwargs = dict(
        vocab_size=vocab_size,
        tie_word_embeddings=cfg.tie_embeddings,
        initializer_range=cfg.init_std,
        bos_token_id=0 if special is None else special.bos,
        eos_token_id=0 if special is None else special.eos,
        pad_token_id=0 if special is None else special.pad,
        use_cache=False,
        **fam.hf_kwargs(model_shape(cfg, vocab_size)),
    )
    hf = fam.config_class()(**kwargs)
    hf.use_cache = True  # for generation after training; the trainer passes use_cache=False
    return hf


def init_weights(model: torch.nn.Module, std: float, seed: int, scaled_layers: int | None = None,
                 residual_outputs: tuple[str, ...] = ("o_proj.weight", "down_proj.weight")) -> None:
    """Re-initialise every parameter from a private generator: normal(0, std) weights, zero biases, unit norms.

    A norm's parameters are those of a module whose class is a norm (``LayerNorm``, ``*RMSNorm``): its
    gain is 1 and its bias 0. ``scaled_layers = L`` draws the parameters named ``residual_outputs`` (the
    projections writing into the residual stream, the family's) from normal(0, std / sqrt(2 L)) (Nanotron's
    scaled init); the draw order is the same either way, so only those tensors differ."""
    import math

    import torch

    norms = {id(p) for m in model.modules() if "Norm" in type(m).__name__ for p in m.parameters(recurse=False)}
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    with torch.no_grad():
        for name, p in model.named_parameters():  # named_parameters dedups tied weights
            if name.endswith("bias"):
                p.zero_()
            elif id(p) in norms:
                p.fill_(1.0)
            else:
                s = std / math.sqrt(2 * scaled_layers) if scaled_layers and name.endswith(residual_outputs) else std
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32).mul_(s).to(p.dtype))


def build_model(cfg: ModelConfig, vocab_size: int, seed: int = 0, special=None):
    """A freshly initialised fp32 causal LM (``PreTrainedModel``) for ``cfg``; deterministic in ``seed``;
    ``special``: the tokenizer's ids (:func:`hf_config`)."""
    import torch
    from transformers import AutoModelForCausalLM

    hf = hf_config(cfg, vocab_size, special)
    # HF's own init draws from the global RNG; fork it so the caller's state is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = AutoModelForCausalLM.from_config(hf, attn_implementation="sdpa", dtype=torch.float32)
    init_weights(model, cfg.init_std, seed, hf.num_hidden_layers if cfg.scaled_init else None,
                 get_family(cfg.family).residual_outputs)
    if cfg.tie_embeddings:
        model.tie_weights()
    return model


def count_params(model: torch.nn.Module, embeddings: bool = True) -> int:
    """Unique parameter count; ``embeddings=False`` leaves out input embeddings, an untied head and a learned
    position table."""
    seen = set()
    total = 0
    emb_ids = set()
    if not embeddings:
        from .families import family_of_model

        emb_ids.add(id(model.get_input_embeddings().weight))
        out = model.get_output_embeddings()
        if out is not None:
            emb_ids.add(id(out.weight))
        fam = family_of_model(model)
        pos = fam.position_table(model) if fam is not None else None
        if pos is not None:
            emb_ids.add(id(pos))
    for p in model.parameters():
        if id(p) in seen or id(p) in emb_ids:
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def resize_vocab(model, new_size: int, std: float | None = None, seed: int = 0):
    """Grow or shrink the vocabulary to ``new_size`` rows, keeping existing rows; new rows ~ N(0, std).

    ``std`` defaults to the model's ``initializer_range``. Works for tied and
    untied heads; returns the model (modified in place).
    """
    import torch

    with torch.no_grad():
        old = model.get_input_embeddings().weight.shape[0]
        if new_size < 1:
            raise ConfigError("vocab_size", f"must be >= 1, got {new_size}")
        model.resize_token_embeddings(new_size, mean_resizing=False)
        if new_size > old:
            std = float(model.config.initializer_range if std is None else std)
            gen = torch.Generator(device="cpu").manual_seed(int(seed))
            emb = model.get_input_embeddings().weight
            emb[old:] = torch.randn((new_size - old, emb.shape[1]), generator=gen).mul_(std).to(emb)
            out = model.get_output_embeddings()
            if out is not None and out.weight is not emb:
                out.weight[old:] = torch.randn((new_size - old, emb.shape[1]), generator=gen).mul_(std).to(out.weight)
        model.config.vocab_size = new_size
        return model


def set_input_embeddings(model, how: str, seed: list[int], init_std: float,
                         reserved_ids: tuple[int, int] | None = None) -> None:
    """Overwrite the input embeddings in place (``embeddings_at_start`` of a stage).

    ``reinit``: every row ~ N(0, ``init_std``), drawn from ``seed`` (numpy seed entropy, so one
    stage's draw is a pure function of its key); with tied embeddings the LM head changes too.
    ``mean``: every row outside ``reserved_ids = [lo, hi)`` becomes the mean of the reserved rows.
    Works on FSDP-sharded weights (the whole matrix is assembled, changed, and written back).
    """
    import numpy as np
    import torch

    from .parallel import assign_full, full_tensor

    with torch.no_grad():
        param = model.get_input_embeddings().weight
        emb = full_tensor(param).clone()  # under FSDP each rank holds rows of it: work on the whole
        if how == "reinit":
            gen = torch.Generator(device="cpu").manual_seed(int(np.random.default_rng(seed).integers(2**62)))
            emb.copy_(torch.randn(emb.shape, generator=gen).mul_(init_std).to(emb))
        elif how == "mean":
            lo, hi = reserved_ids  # type: ignore[misc]
            keep = torch.zeros(emb.shape[0], dtype=torch.bool, device=emb.device)
            keep[lo:hi] = True
            emb[~keep] = emb[lo:hi].mean(dim=0)
        else:
            raise ValueError(f"embeddings: unknown setting {how!r} (reinit or mean)")
        assign_full(param, emb)


def describe(cfg: ModelConfig, vocab_size: int) -> dict[str, Any]:
    """Shape summary for logs and the planner: HF config fields that matter plus exact parameter counts
    (arithmetic on the config; no model is built). ``params_embedding`` is the input embedding plus an
    untied head (and a learned position table)."""
    return describe_shape(cfg.family, model_shape(cfg, vocab_size), vocab_size, cfg.tie_embeddings,
                          preset=cfg.preset, overrides=cfg.overrides)


def describe_shape(family_name: str, shape: dict[str, Any], vocab_size: int, tie: bool, preset: str,
                   overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`describe` of a canonical ``shape`` of family ``family_name`` (a preset's, or a saved model's)."""
    fam = get_family(family_name)
    d, L, ffn = shape["hidden_size"], shape["num_hidden_layers"], shape["intermediate_size"]
    hd = shape.get("head_dim") or d // shape["num_attention_heads"]
    per_layer = fam.layer_params(shape)
    emb = vocab_size * d * (1 if tie else 2) + fam.position_params(shape)
    body = L * per_layer + fam.norm_params(d)
    return {"family": family_name, "preset": preset, "hidden_size": d, "layers": L, "ffn": ffn,
            "heads": shape["num_attention_heads"], "kv_heads": shape["num_key_value_heads"], "head_dim": hd,
            "vocab_size": vocab_size, "params_per_layer": per_layer, "params_embedding": emb,
            "params_non_embedding": body, "params_total": body + emb, **({"overrides": overrides} if overrides else {})}
