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
share one compiled graph. ``auto`` (:func:`resolve_compile`): on a CPU, ``blocks``
when the run is long enough for the steps compiling saves to pay for the compiling
itself, else off; off elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
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
    """``off``, ``model``, ``blocks`` or ``auto`` for a ``compile`` setting (``true`` means ``model``)."""
    if value is True:
        return "model"
    if value is False:
        return "off"
    return value


# compile: auto on a CPU. Compiling the decoder blocks (Inductor, cold cache, the blocks' training graphs and
# the validation shapes) took 25-28 s on the 2-core Intel Xeon (family 6 model 167; shared machine, load
# ~3.5) and gives 1.06-1.14x in steady state (tiny-1m 1.12-1.14x per CPU second at seq 128, small-6m
# 1.07x); eager training runs at about 150 GFLOP/s on 2 cores (tiny-1m 123, small-6m 190). Compiling pays
# when the run's model FLOPs / CPU_EAGER_FLOPS x (1 - 1/CPU_COMPILE_GAIN) exceeds CPU_COMPILE_S: from
# about 6e13 FLOPs (tiny-1m: ~9M tokens; small-6m: ~1.6M). Conservative on purpose (a compile that does
# not pay costs more than a missed one saves). Decided from the config alone, never from a timing, so a
# run and its resume (on any machine) decide alike and a CPU's results stay deterministic.
CPU_COMPILE_S = 30.0
CPU_COMPILE_GAIN = 1.08
CPU_EAGER_FLOPS = 150e9


def cpu_compile_pays_from() -> float:
    """The run FLOPs from which ``compile: auto`` compiles on a CPU (constants above)."""
    return CPU_COMPILE_S * CPU_EAGER_FLOPS / (1 - 1 / CPU_COMPILE_GAIN)


def resolve_compile(value: bool | str, device: torch.device, run_flops: float | None) -> tuple[str, str]:
    """(``off`` | ``model`` | ``blocks``, why) for a run's ``compile`` setting on ``device``; ``run_flops``: the
    run's model FLOPs (None: a given model without a shape summary). Only ``auto`` decides: on a CPU with a
    C++ compiler (Inductor's CPU code is C++), ``blocks`` when :func:`cpu_compile_pays_from` is reached."""
    mode = compile_mode(value)
    if mode != "auto":
        return mode, f"compile: {value}"
    if device.type != "cpu":
        return "off", f"compile: auto is off on {device.type} (not measured there; compile: blocks to ask for it)"
    if run_flops is None:
        return "off", "compile: auto is off for a given model (no shape to count its FLOPs)"
    cxx = os.environ.get("CXX") or next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), None)
    if not cxx or not shutil.which(cxx):
        return "off", "compile: auto is off: no C++ compiler on PATH for Inductor's CPU code"
    pays = cpu_compile_pays_from()
    saved = run_flops / CPU_EAGER_FLOPS * (1 - 1 / CPU_COMPILE_GAIN)
    if run_flops < pays:
        return "off", (f"compile: auto is off: this run's {run_flops:.2g} model FLOPs would save ~{saved:.0f} s of "
                       f"~{run_flops / CPU_EAGER_FLOPS:.0f} s against ~{CPU_COMPILE_S:.0f} s of compiling "
                       f"(it pays from {pays:.2g} FLOPs)")
    return "blocks", (f"compile: auto compiles the blocks: this run's {run_flops:.2g} model FLOPs save ~{saved:.0f} s "
                      f"against ~{CPU_COMPILE_S:.0f} s of compiling")
