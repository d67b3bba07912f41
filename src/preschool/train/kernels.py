"""Faster kernels inside the HF decoder: Liger's fused RMSNorm / SwiGLU / RoPE on CUDA, and per-block compile.

``TrainConfig.kernels``:

- ``liger``: Liger-Kernel's Triton kernels patched into the model instance
  (``apply_liger_kernel_to_qwen2`` / ``_llama`` with ``model=``): fused RMSNorm,
  SwiGLU MLP and rotary embedding. The patch rebinds ``forward`` methods and
  the rotary function; parameter names, shapes and checkpoints are unchanged,
  so a checkpoint loads anywhere without Liger. CUDA only, needs
  ``pip install 'preschool[gpu]'``. (The loss kernel is ``fused_loss``.)
- ``auto``: ``liger`` on CUDA when Liger-Kernel imports, else ``off``.
- ``off``: the HF modules as they are.

``TrainConfig.compile``: ``false``; ``true`` / ``model`` (torch.compile of the
whole forward, as before); ``blocks``: each decoder layer compiled on its own
(``nn.Module.compile``, in place, so state-dict names do not change). One
graph per block keeps a graph break (the HF mask code, a callback, a Liger
kernel Dynamo cannot trace) local to where it happens, and identical blocks
share one compiled graph.
"""

from __future__ import annotations

from typing import Literal

import torch

from ..errors import ConfigError
from .loss import liger_available

Kernels = Literal["auto", "off", "liger"]


def resolve_kernels(mode: str, device: torch.device) -> str:
    """``liger`` or ``off`` for a run on ``device``; an explicit ``liger`` that cannot run is a ConfigError."""
    if mode == "liger":
        if device.type != "cuda":
            raise ConfigError("kernels", f"'liger' runs on CUDA only (device is {device.type}); use 'off' or 'auto'")
        if not liger_available():
            raise ConfigError("kernels", "'liger' needs Liger-Kernel: pip install 'preschool[gpu]'")
        return "liger"
    if mode == "auto":
        return "liger" if device.type == "cuda" and liger_available() else "off"
    return mode


def apply_liger(model) -> None:
    """Patch Liger's RMSNorm, SwiGLU and RoPE kernels into an HF Qwen2 / Llama model instance."""
    from liger_kernel import transformers as lk

    family = model.config.model_type
    patch = {"qwen2": getattr(lk, "apply_liger_kernel_to_qwen2", None),
             "llama": getattr(lk, "apply_liger_kernel_to_llama", None)}.get(family)
    if patch is None:
        raise ConfigError("kernels", f"Liger-Kernel has no patch for model type {family!r} in this version")
    patch(rope=True, rms_norm=True, swiglu=True, cross_entropy=False, fused_linear_cross_entropy=False, model=model)


def decoder_blocks(model) -> list[torch.nn.Module]:
    """The decoder layers of an HF causal LM (``model.model.layers``)."""
    base = getattr(model, "model", None)
    layers = getattr(base, "layers", None)
    if layers is None:
        raise ConfigError("compile", f"'blocks' needs an HF decoder with model.layers; {type(model).__name__} has none")
    return list(layers)


def compile_blocks(model) -> int:
    """torch.compile each decoder layer in place; returns how many."""
    blocks = decoder_blocks(model)
    for b in blocks:
        b.compile()
    return len(blocks)


def compile_mode(value: bool | str) -> str:
    """``off``, ``model`` or ``blocks`` for a ``compile`` setting (``true`` means ``model``)."""
    if value is True:
        return "model"
    if value is False:
        return "off"
    return value
