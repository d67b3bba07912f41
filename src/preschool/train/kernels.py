"""Faster kernels inside the HF decoder: Liger's fused RMSNorm / SwiGLU on CUDA, and per-block compile.

``TrainConfig.kernels``:

- ``liger``: Liger-Kernel's Triton RMSNorm and SwiGLU kernels bound into the
  norm and MLP modules of *this model instance* (their ``forward`` methods);
  parameter names, shapes and checkpoints are unchanged, so a checkpoint loads
  anywhere without Liger. CUDA only, needs ``pip install 'preschool[gpu]'``.
  Liger's own ``apply_liger_kernel_to_qwen2(model=...)`` also rebinds
  attributes of transformers' modeling module (``Qwen2RMSNorm``, ``Qwen2MLP``,
  ``apply_rotary_pos_emb``), which would give every model built later in the
  process (the evaluator's copy, the next arm, a ladder rung) Triton modules;
  :func:`apply_liger` restores those attributes, so only the instance changes.
  Liger's RoPE is left out for the same reason: HF's attention looks the
  rotary function up in its module's globals at call time, so it cannot be
  swapped for one instance. (The loss kernel is ``fused_loss``.)
- ``auto``: ``liger`` on CUDA when Liger-Kernel imports and the model is not
  compiled; ``off`` otherwise. Under ``compile`` Inductor fuses the norms and
  the SwiGLU itself, and Liger's Triton calls would be opaque to it.
- ``off``: the HF modules as they are.

``TrainConfig.compile``: ``false``; ``true`` / ``model`` (torch.compile of the
whole forward, as before); ``blocks``: each decoder layer compiled on its own
(``nn.Module.compile``, in place, so state-dict names do not change). One
graph per block keeps a graph break (the HF mask code, a callback, a Liger
kernel Dynamo cannot trace) local to where it happens, and identical blocks
share one compiled graph.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator, Literal

import torch

from ..errors import ConfigError
from .families import decoder_blocks
from .loss import liger_available

Kernels = Literal["auto", "off", "liger"]


def resolve_kernels(mode: str, device: torch.device, compile: str = "off", family: str = "qwen2") -> str:
    """``liger`` or ``off`` for a run of a ``family`` model on ``device`` compiled as ``compile``
    (:func:`compile_mode`); an explicit ``liger`` that cannot run is a ConfigError. ``auto`` leaves compiled
    models to Inductor, and families without a Liger patch (``Family.liger_patch``) to HF's modules."""
    from .model import get_family

    patched = get_family(family).liger_patch is not None
    if mode == "liger":
        if not patched:
            raise ConfigError("kernels", f"'liger' has no patch here for the {family} family (Liger is bound into "
                              "qwen2 and llama models only); use 'off' or 'auto'")
        if device.type != "cuda":
            raise ConfigError("kernels", f"'liger' runs on CUDA only (device is {device.type}); use 'off' or 'auto'")
        if not liger_available():
            raise ConfigError("kernels", "'liger' needs Liger-Kernel: pip install 'preschool[gpu]'")
        return "liger"
    if mode == "auto":
        return "liger" if patched and device.type == "cuda" and compile == "off" and liger_available() else "off"
    return mode


def apply_liger(model) -> None:
    """Bind Liger's RMSNorm and SwiGLU kernels into an HF Qwen2 / Llama model instance, and nothing else.

    After the call every model of the family built later gets transformers' stock modules: the
    module-level names Liger's patch function rebinds are put back (:func:`attributes_restored`)."""
    from liger_kernel import transformers as lk

    from .families import family_of_model

    fam = family_of_model(model)
    family = model.config.model_type
    patch = getattr(lk, fam.liger_patch, None) if fam is not None and fam.liger_patch else None
    if patch is None:
        raise ConfigError("kernels", f"Liger-Kernel has no patch for model type {family!r} in this version")
    modeling = sys.modules[type(model).__module__]
    with attributes_restored(modeling, torch.nn.functional):
        patch(rope=False, rms_norm=True, swiglu=True, cross_entropy=False, fused_linear_cross_entropy=False,
              model=model)


@contextlib.contextmanager
def attributes_restored(*modules: Any) -> Iterator[None]:
    """Whatever the block rebinds, adds or deletes among the attributes of ``modules`` (and of the
    classes they define, e.g. a ``forward`` replaced on the class) is put back when it ends."""
    spaces = list(modules)
    for mod in modules:
        spaces += [v for v in vars(mod).values() if isinstance(v, type) and v.__module__ == mod.__name__]
    saved = [(ns, dict(vars(ns))) for ns in spaces]
    try:
        yield
    finally:
        for ns, before in saved:
            now = vars(ns)
            for name in [n for n in now if n not in before]:
                delattr(ns, name)
            for name, value in before.items():
                if name not in now or now[name] is not value:
                    setattr(ns, name, value)


def compile_blocks(model, backend: str = "inductor") -> int:
    """torch.compile each decoder layer in place with ``backend``; returns how many."""
    blocks = decoder_blocks(model, "compile")
    for b in blocks:
        b.compile(backend=backend)
    return len(blocks)


def compile_mode(value: bool | str) -> str:
    """``off``, ``model`` or ``blocks`` for a ``compile`` setting (``true`` means ``model``)."""
    if value is True:
        return "model"
    if value is False:
        return "off"
    return value
