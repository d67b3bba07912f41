"""Decoder-only LMs built from Hugging Face ``transformers`` configs, by preset name.

A model is a plain HF ``Qwen2ForCausalLM`` or ``LlamaForCausalLM``: checkpoints
written with ``save_pretrained`` (safetensors) load with nothing but
``AutoModelForCausalLM.from_pretrained``, so every HF tool (lm-eval, generate,
PEFT...) works on them.

Presets (``MODEL_PRESETS``, one trunk shape each, in ``train/presets.py`` or a plug-in) fix the
trunk shape; the vocabulary comes from the tokenizer at build time.

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

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from ..config import check
from ..errors import ConfigError
from ..registry import Registry

# shapes by name: train/presets/ (one module per family, looked up as a whole) and a plug-in's `presets`
MODEL_PRESETS = Registry("model preset", packages=("preschool.train.presets",), plugin_module="presets")

Family = Literal["qwen2", "llama"]


def _config_class(family: str):
    if family == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config
    if family == "llama":
        from transformers import LlamaConfig

        return LlamaConfig
    raise ConfigError("family", f"must be 'qwen2' or 'llama', got {family!r}")


# fields every supported family's HF config has (checked in tests against Qwen2Config and LlamaConfig):
# overrides among these are validated without importing transformers, so `preschool plan` of a paper
# config that sets, e.g., rms_norm_eps stays arithmetic only
COMMON_FIELDS = frozenset({
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "rope_theta", "max_position_embeddings", "rms_norm_eps", "attention_dropout", "hidden_act",
})


def _known_fields(family: str) -> set[str]:
    cls = _config_class(family)
    fields = set(cls().to_dict())
    fields.add("rope_theta")  # transformers >= 5 stores it inside rope_parameters; we accept the flat name
    return fields


@dataclass
class ModelConfig:
    """Which decoder to build: a named ``preset`` shape in a ``family``, plus HF config ``overrides``.

    ``overrides`` may set any field of the family's HF config (``hidden_size``,
    ``num_hidden_layers``, ``rope_theta``, ``max_position_embeddings``...);
    unknown names are a ConfigError naming ``overrides.<name>``.
    """

    preset: str = "micro"
    family: Family = "qwen2"
    tie_embeddings: bool = True
    init_std: float = 0.02
    # o_proj / down_proj ~ N(0, init_std / sqrt(2 * layers)) (Nanotron's scaled init; module docstring)
    scaled_init: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)
    # embedding rows = the vocabulary rounded up to a multiple of this (L2T: 128, tokenizer length 32,768)
    vocab_multiple: int = 1

    def validate(self) -> None:
        MODEL_PRESETS.get(self.preset, "preset")
        check(self.family in ("qwen2", "llama"), "family", f"must be 'qwen2' or 'llama', got {self.family!r}")
        check(self.init_std > 0, "init_std", f"must be > 0, got {self.init_std}")
        check(self.vocab_multiple >= 1, "vocab_multiple", f"must be >= 1, got {self.vocab_multiple}")
        # only overrides need the HF config's field list: importing it costs seconds (transformers), which
        # `preschool plan` on a laptop should not pay for a preset-only config
        known = COMMON_FIELDS if set(self.overrides) <= COMMON_FIELDS else _known_fields(self.family)
        for k in self.overrides:
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
    """The preset's shape with ``cfg.overrides`` applied and checked: what :func:`hf_config` builds from.

    Plain arithmetic (no transformers import), so the planner and logs can describe a model cheaply."""
    if vocab_size < 2:
        raise ConfigError("vocab_size", f"must be >= 2, got {vocab_size}")
    shape = MODEL_PRESETS.get(cfg.preset, "preset").cls()
    shape.update(cfg.overrides)

    def named(*keys: str) -> str:  # the override that makes the shape impossible (presets are consistent)
        return f"overrides.{next((k for k in keys if k in cfg.overrides), keys[-1])}"

    # every size the parameter count and the HF config are built from (a zero or negative one gave the
    # planner negative parameters and the trainer a transformers traceback)
    sizes = ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads", "num_key_value_heads")
    for k in sizes + tuple(k for k in ("head_dim", "max_position_embeddings") if shape.get(k) is not None):
        v = shape[k]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConfigError(f"overrides.{k}", f"must be a positive integer, got {v!r}")
    d, h = shape["hidden_size"], shape["num_attention_heads"]
    if d % h and not shape.get("head_dim"):
        raise ConfigError(named("num_attention_heads", "hidden_size"),
                          f"hidden_size {d} not divisible by {h} heads (set overrides.head_dim for another head size)")
    if h % shape["num_key_value_heads"]:
        raise ConfigError(named("num_key_value_heads", "num_attention_heads"),
                          f"{h} attention heads not divisible by {shape['num_key_value_heads']} KV heads")
    return shape


def hf_config(cfg: ModelConfig, vocab_size: int, special=None):
    """The HF ``PretrainedConfig`` for ``cfg`` at ``vocab_size``, with the tokenizer's BOS/EOS/PAD ids
    (``special``, a ``data.tokenizer.SpecialIds``; None: id 0 for all three, our BPE's ``<|endoftext|>``)."""
    shape = model_shape(cfg, vocab_size)
    theta = float(shape.pop("rope_theta", 10000.0))
    kwargs = dict(
        vocab_size=vocab_size,
        tie_word_embeddings=cfg.tie_embeddings,
        initializer_range=cfg.init_std,
        bos_token_id=0 if special is None else special.bos,
        eos_token_id=0 if special is None else special.eos,
        pad_token_id=0 if special is None else special.pad,
        use_cache=False,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        **shape,
    )
    hf = _config_class(cfg.family)(**kwargs)
    hf.use_cache = True  # for generation after training; the trainer passes use_cache=False
    return hf


# the projections that write into the residual stream: what scaled init scales down
RESIDUAL_OUTPUTS = ("o_proj.weight", "down_proj.weight")


def init_weights(model: torch.nn.Module, std: float, seed: int, scaled_layers: int | None = None) -> None:
    """Re-initialise every parameter from a private generator: normal(0, std) weights, zero biases, unit norms.

    ``scaled_layers = L`` draws :data:`RESIDUAL_OUTPUTS` from normal(0, std / sqrt(2 L)) (Nanotron's
    scaled init); the draw order is the same either way, so only those tensors differ."""
    import math

    import torch

    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    with torch.no_grad():
        for name, p in model.named_parameters():  # named_parameters dedups tied weights
            if name.endswith("bias"):
                p.zero_()
            elif "norm" in name:
                p.fill_(1.0)
            else:
                s = std / math.sqrt(2 * scaled_layers) if scaled_layers and name.endswith(RESIDUAL_OUTPUTS) else std
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
    init_weights(model, cfg.init_std, seed, hf.num_hidden_layers if cfg.scaled_init else None)
    if cfg.tie_embeddings:
        model.tie_weights()
    return model


def count_params(model: torch.nn.Module, embeddings: bool = True) -> int:
    """Unique parameter count; ``embeddings=False`` leaves out input embeddings and an untied head."""
    seen = set()
    total = 0
    emb_ids = set()
    if not embeddings:
        emb_ids.add(id(model.get_input_embeddings().weight))
        out = model.get_output_embeddings()
        if out is not None:
            emb_ids.add(id(out.weight))
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


def head_dim(hf) -> int:
    """Attention head size of an HF config (``head_dim`` when set, else hidden / heads)."""
    return int(getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads)


def layer_params(hf, family: str) -> int:
    """Parameters of one decoder block: Q/K/V/O (+ Qwen2's QKV biases), SwiGLU MLP, two RMSNorms."""
    d, ffn = hf.hidden_size, hf.intermediate_size
    q = hf.num_attention_heads * head_dim(hf)
    kv = hf.num_key_value_heads * head_dim(hf)
    bias = (q + 2 * kv) if family == "qwen2" else 0
    return 2 * d * q + 2 * d * kv + bias + 3 * d * ffn + 2 * d


def describe(cfg: ModelConfig, vocab_size: int) -> dict[str, Any]:
    """Shape summary for logs and the planner: HF config fields that matter plus exact parameter counts
    (arithmetic on the config; no model is built). ``params_embedding`` is the input embedding plus an
    untied head."""
    from types import SimpleNamespace

    # the shape dict, not an HF config object: the same numbers (tests/train/test_model.py checks every
    # preset against hf_config) without importing transformers
    hf = SimpleNamespace(**{"head_dim": None, **model_shape(cfg, vocab_size)})
    d, L, ffn = hf.hidden_size, hf.num_hidden_layers, hf.intermediate_size
    per_layer = layer_params(hf, cfg.family)
    emb = vocab_size * d * (1 if cfg.tie_embeddings else 2)
    return {"family": cfg.family, "preset": cfg.preset, "hidden_size": d, "layers": L, "ffn": ffn,
            "heads": hf.num_attention_heads, "kv_heads": hf.num_key_value_heads, "head_dim": head_dim(hf),
            "vocab_size": vocab_size, "params_per_layer": per_layer, "params_embedding": emb,
            "params_non_embedding": L * per_layer + d, "params_total": L * per_layer + d + emb,
            **{k: v for k, v in dataclasses.asdict(cfg).items() if k == "overrides" and v}}
