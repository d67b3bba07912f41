"""Plug-ins: packages that extend the core through its registries instead of being imported by it.

A plug-in module (listed in ``PLUGINS``) registers its parts when imported;
the core calls :func:`load_plugins` before it looks anything up, so
dependencies point down: ``evals`` loads a compartments checkpoint without
importing ``compartments``. Extension points: derived dataset kinds
(``data.derived.DATASET_KINDS``), callbacks an arm names
(``train.callbacks.registry.CALLBACKS``), report sections
(``analysis.sections.SECTIONS``) and the checkpoint-loader hook
(:func:`register_checkpoint_hook`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

PLUGINS: tuple[str, ...] = ("preschool.compartments.plugin",)

_loaded = False
_checkpoint_hooks: list[Callable[[Any, Path], Any]] = []


def load_plugins() -> None:
    """Import every plug-in module once (each registers its parts on import)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in PLUGINS:
        importlib.import_module(name)


def register_checkpoint_hook(fn: Callable[[Any, Path], Any]) -> Callable[[Any, Path], Any]:
    """``fn(model, checkpoint_dir) -> model`` runs on every model the evaluators load (after ``from_pretrained``),
    e.g. to re-attach weights that live outside the HF architecture. Must return the model unchanged when the
    checkpoint is not its kind."""
    if fn not in _checkpoint_hooks:
        _checkpoint_hooks.append(fn)
    return fn


def checkpoint_hooks() -> list[Callable[[Any, Path], Any]]:
    load_plugins()
    return list(_checkpoint_hooks)
