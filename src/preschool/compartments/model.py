"""Model options for compartment experiments, on plain HF Qwen2/Llama causal LMs.

Follows Howe & Wingate (vinhowe/compartmentalization ``src/model.py``,
``src/weights.py``; spec B.1), adapted to Hugging Face models built by
``preschool.train.model.build_model``:

- **Compartment embedding** (``attach_compartment_embedding``): a learned
  vector per compartment added to the token embedding at every position (the
  paper's ``use_compartment_embeddings``). In offset presentations the
  compartment is read from the ids themselves (``id // V``), so the model needs
  no extra input and any trainer/evaluator that feeds ``input_ids`` gets it. A
  TRANSLATION marker takes the compartment of the next non-marker token (so
  each half of a translation row carries its own compartment, as the paper sets
  per half); trailing markers take the previous one. It is a top-level module
  ``compartment_embedding`` (saved by ``save_pretrained`` as
  ``compartment_embedding.weight``) applied by a forward hook on the input
  embedding, and described in ``config.preschool_compartments``. A plain
  ``from_pretrained`` drops it; load such checkpoints with
  :func:`load_compartment_model`. Offset presentation only.
- **Untied input/output embeddings** (``untie_embeddings``; the paper sets
  ``weight_tying = false``; new models: ``ModelConfig(tie_embeddings=False)``).
- **Initialisation copy** (``copy_compartment_init``): copy compartment 0's
  embedding rows / LM-head rows / compartment vector into every other
  compartment (the paper's ``copy_compartment_*`` flags).
- **c=1 -> c>1 conversion** (``expand_to_compartments``): grow a trained model
  over V (or V+1 with a marker) to c*V+1 by copying its vocabulary block into
  every compartment, for fine-tuning on compartmented data (the paper's
  offset fine-tuning trajectory experiment).
"""

from __future__ import annotations

import contextlib
import weakref
from pathlib import Path
from typing import Iterable

import torch
from torch import nn

from ..data.tokenizer import refuse_custom_code
from ..errors import ConfigError, DataError
from ..seeds import COMPARTMENT_VECTORS
from .configs import COPY_PARTS, CompartmentModelConfig  # torch-free home of the config (the planner reads it)

CONFIG_KEY = "preschool_compartments"


def compartment_ids(input_ids: torch.Tensor, n_compartments: int, base_vocab: int) -> torch.Tensor:
    """Compartment of every position (offset presentation); markers take the next (else previous) compartment."""
    marker_id = n_compartments * base_vocab
    comp = torch.div(input_ids, base_vocab, rounding_mode="floor").clamp_(max=n_compartments - 1)
    marker = input_ids == marker_id
    if not bool(marker.any()):
        return comp
    T = input_ids.shape[-1]
    idx = torch.arange(T, device=input_ids.device).expand_as(input_ids)
    nxt = torch.where(marker, torch.full_like(idx, T), idx)
    nxt = torch.flip(torch.cummin(torch.flip(nxt, [-1]), dim=-1).values, [-1])
    prv = torch.where(marker, torch.full_like(idx, -1), idx)
    prv = torch.cummax(prv, dim=-1).values
    src = torch.where(nxt < T, nxt, prv.clamp(min=0))
    filled = torch.gather(comp, -1, src)
    all_marker = (nxt >= T) & (prv < 0)
    filled = torch.where(all_marker, torch.zeros_like(filled), filled)
    return torch.where(marker, filled, comp)


def compartment_info(model) -> dict | None:
    info = getattr(model.config, CONFIG_KEY, None)
    return dict(info) if info else None


def _hook(module, args, output):
    model = module._preschool_owner()
    if model is None or not getattr(model, "_compartment_embedding_on", True):
        return output
    info = model.config.preschool_compartments
    ids = args[0] if args else None
    if ids is None:
        return output
    comp = compartment_ids(ids, info["n_compartments"], info["base_vocab"])
    return output + model.compartment_embedding(comp).to(output.dtype)


def attach_compartment_embedding(model, n_compartments: int, base_vocab: int, init_std: float = 0.02,
                                 seed: int = 0) -> nn.Embedding:
    """Add a learned per-compartment vector to the token embeddings of ``model`` (in place)."""
    vocab = model.get_input_embeddings().weight.shape[0]
    if vocab != n_compartments * base_vocab + 1:
        raise ConfigError("compartment_embedding",
                          f"model vocabulary {vocab} != c*V+1 = {n_compartments * base_vocab + 1}: the compartment "
                          "embedding needs the offset presentation")
    d = model.get_input_embeddings().weight.shape[1]
    if getattr(model, "compartment_embedding", None) is None:
        emb = nn.Embedding(n_compartments, d)
        gen = torch.Generator(device="cpu").manual_seed(int(seed) + COMPARTMENT_VECTORS)
        with torch.no_grad():
            emb.weight.copy_(torch.randn((n_compartments, d), generator=gen) * init_std)
        dev = model.get_input_embeddings().weight
        model.compartment_embedding = emb.to(device=dev.device, dtype=dev.dtype)
    inp = model.get_input_embeddings()
    if getattr(inp, "_preschool_hook", None) is None:
        inp._preschool_owner = weakref.ref(model)
        inp._preschool_hook = inp.register_forward_hook(_hook)
    setattr(model.config, CONFIG_KEY, {"n_compartments": int(n_compartments), "base_vocab": int(base_vocab),
                                       "compartment_embedding": True})
    return model.compartment_embedding


@contextlib.contextmanager
def compartment_embedding_disabled(model):
    """Run ``model`` without the compartment vectors (e.g. the paper's contrastive path)."""
    old = getattr(model, "_compartment_embedding_on", True)
    model._compartment_embedding_on = False
    try:
        yield model
    finally:
        model._compartment_embedding_on = old


@torch.no_grad()
def untie_embeddings(model) -> None:
    """Give the LM head its own copy of the (tied) input embedding."""
    out = model.get_output_embeddings()
    inp = model.get_input_embeddings()
    if out is None:
        raise ConfigError("tie_embeddings", "model has no output embedding to untie")
    model.config.tie_word_embeddings = False
    if hasattr(model.config, "get_text_config"):
        model.config.get_text_config().tie_word_embeddings = False
    if out.weight is inp.weight or out.weight.data_ptr() == inp.weight.data_ptr():
        out.weight = nn.Parameter(inp.weight.detach().clone())


def is_tied(model) -> bool:
    out = model.get_output_embeddings()
    return out is not None and out.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


@torch.no_grad()
def copy_compartment_init(model, n_compartments: int, base_vocab: int, parts: Iterable[str] = COPY_PARTS) -> None:
    """Copy compartment 0's block (embeddings, LM head, compartment vector) into compartments 1..c-1."""
    V = base_vocab
    for p in parts:
        if p not in COPY_PARTS:
            raise ConfigError("copy_init", f"unknown part {p!r}; known: {list(COPY_PARTS)}")
    parts = set(parts)
    targets = []
    if "embeddings" in parts:
        targets.append(model.get_input_embeddings().weight)
    if "lm_head" in parts and not is_tied(model):
        targets.append(model.get_output_embeddings().weight)
    for w in targets:
        if w.shape[0] < n_compartments * V:
            raise DataError(f"weight has {w.shape[0]} rows, fewer than c*V = {n_compartments * V}")
        for i in range(1, n_compartments):
            w[i * V:(i + 1) * V] = w[:V]
    if "compartment_embeddings" in parts and getattr(model, "compartment_embedding", None) is not None:
        ce = model.compartment_embedding.weight
        ce[1:] = ce[0]


@torch.no_grad()
def expand_to_compartments(model, n_compartments: int, base_vocab: int, compartment_embedding: bool = True,
                           init_std: float = 0.02, seed: int = 0):
    """Turn a model over V (or V+1, last row a marker) into one over c*V+1, every block a copy of block 0.

    The marker row is the old marker row if there was one, else the mean of the
    base rows. Works for tied and untied heads; returns the model (modified in place).
    """
    V, c = base_vocab, n_compartments
    inp = model.get_input_embeddings().weight
    old = inp.shape[0]
    if old not in (V, V + 1):
        raise DataError(f"model vocabulary {old} is neither V={V} nor V+1: not a c=1 model over this vocabulary")
    tied = is_tied(model)
    blocks = [model.get_input_embeddings().weight.detach().clone()]
    if not tied:
        blocks.append(model.get_output_embeddings().weight.detach().clone())
    model.resize_token_embeddings(c * V + 1, mean_resizing=False)
    model.config.vocab_size = c * V + 1
    news = [model.get_input_embeddings().weight]
    if not tied:
        news.append(model.get_output_embeddings().weight)
    for w_old, w in zip(blocks, news):
        for i in range(c):
            w[i * V:(i + 1) * V] = w_old[:V]
        w[c * V] = w_old[V] if old == V + 1 else w_old[:V].mean(0)
    if tied:
        model.tie_weights()
    if compartment_embedding:
        attach_compartment_embedding(model, c, V, init_std=init_std, seed=seed)
        copy_compartment_init(model, c, V, ["compartment_embeddings"])
    else:
        setattr(model.config, CONFIG_KEY, {"n_compartments": c, "base_vocab": V, "compartment_embedding": False})
    return model


def apply_compartment_options(model, n_compartments: int, base_vocab: int, cfg: CompartmentModelConfig,
                              seed: int = 0):
    """Attach the compartment embedding and apply the init copies to a freshly built model."""
    if cfg.compartment_embedding:
        attach_compartment_embedding(model, n_compartments, base_vocab, cfg.init_std, seed)
    else:
        setattr(model.config, CONFIG_KEY, {"n_compartments": n_compartments, "base_vocab": base_vocab,
                                           "compartment_embedding": False})
    if cfg.copy_init:
        copy_compartment_init(model, n_compartments, base_vocab, cfg.copy_init)
    return model


def restore_compartments(model, path: str | Path | None = None):
    """Re-attach the compartment embedding described in ``model.config`` (after ``from_pretrained``),
    loading its weight from the checkpoint's safetensors at ``path`` when given."""
    info = compartment_info(model)
    if not info or not info.get("compartment_embedding"):
        return model
    attach_compartment_embedding(model, info["n_compartments"], info["base_vocab"])
    if path is not None:
        from safetensors import safe_open

        files = sorted(Path(path).glob("*.safetensors"))
        for f in files:
            with safe_open(str(f), framework="pt") as fh:
                if "compartment_embedding.weight" in fh.keys():
                    with torch.no_grad():
                        model.compartment_embedding.weight.copy_(fh.get_tensor("compartment_embedding.weight"))
                    return model
        raise DataError(f"{path}: checkpoint says it has a compartment embedding but no "
                        "compartment_embedding.weight in its safetensors")
    return model


def load_compartment_model(path: str | Path, **kwargs):
    """``AutoModelForCausalLM.from_pretrained`` plus the compartment embedding, if the checkpoint has one."""
    from transformers import AutoModelForCausalLM

    from ..train.checkpoint import quiet_hf_logging

    refuse_custom_code(path)

    with quiet_hf_logging():  # the extra key is expected; we load it ourselves below
        model = AutoModelForCausalLM.from_pretrained(str(path), trust_remote_code=False, **kwargs)
    return restore_compartments(model, path)
