"""How parts are found: packages walked by the registries, and plug-ins.

Every registry that takes parts from files (generators, L2T tasks,
evaluators, dataset builders, derived dataset kinds, report sections,
callbacks; see :class:`preschool.registry.Registry`) imports on first use every module of its
own package (:func:`import_package`). A part is therefore one file in that
package and registers itself when imported; there is no list to edit.

Plug-ins are packages that extend the core without being imported by it, so
dependencies point down (``evals`` loads a compartments checkpoint without
importing ``compartments``). ``PLUGINS`` names them, in this one place. A
registry also imports, in each plug-in package, the module or sub-package
named after the kind of part it holds (``Registry.plugin_module``):
``synthetic`` (generators), ``l2t_tasks``, ``evals``, ``builders`` (dataset
builders), ``kinds`` (derived dataset kinds), ``sections`` (report sections),
``callbacks``. Only those
modules are imported, so a plug-in's heavy modules (torch) load when used.
What is not a registry part goes in the plug-in's ``plugin`` module,
imported by :func:`load_plugins`: today the checkpoint-loader hook
(:func:`register_checkpoint_hook`).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path
from typing import Any, Callable

PLUGINS: tuple[str, ...] = ("preschool.compartments",)

_loaded = False
_checkpoint_hooks: list[Callable[[Any, Path], Any]] = []


def import_package(name: str) -> None:
    """Import module ``name`` and, when it is a package, every module under it (recursively; names starting
    with ``_`` are skipped, so ``__main__`` and private helpers never run). Import errors propagate."""
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", None) or []):
        if not info.name.startswith("_"):
            import_package(f"{name}.{info.name}")


def _plugin_module(package: str, module: str) -> str | None:
    """``<package>.<module>`` when the plug-in has it, else None (only a missing module is skipped)."""
    full = f"{package}.{module}"
    return full if importlib.util.find_spec(full) is not None else None


def plugin_parts(module: str) -> None:
    """Import, in every plug-in package, the module or sub-package ``module`` (walked like a core package)."""
    for package in PLUGINS:
        full = _plugin_module(package, module)
        if full is not None:
            import_package(full)


def load_plugins() -> None:
    """Import every plug-in's ``plugin`` module once (what is not a registry part: the checkpoint hook)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for package in PLUGINS:
        full = _plugin_module(package, "plugin")
        if full is not None:
            importlib.import_module(full)


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
