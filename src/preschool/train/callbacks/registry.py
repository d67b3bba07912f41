"""Callbacks an experiment YAML names per arm (``arms[i].callbacks: {name: {config}}``).

A registered entry is a factory ``factory(cfg, ctx) -> Callback`` with its config
dataclass, in its own file in ``train/callbacks/`` (the registry imports every
module there on first use) or in a plug-in's ``callbacks`` module
(``compartments/callbacks.py``: ``compartment_model``, ``infonce``). ``ctx`` (:class:`CallbackContext`) tells the
factory what the runner knows about the arm x seed being trained. A config may
define ``arms_needed() -> list[str]``: arms whose runs (same seed) must be
trained first (the runner checks they come earlier; ``preschool launch`` chains
their jobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...registry import Registry

CALLBACKS = Registry("callback", packages=("preschool.train.callbacks",), plugin_module="callbacks")


@dataclass
class CallbackContext:
    """What a callback factory may read: the arm x seed, its datasets, and other arms' run folders."""

    arm: str
    seed: int
    datasets: dict[str, Path]  # the names this arm reads -> dataset folders (what the trainer gets)
    stage_datasets: list[str]  # names its stages train on, in order
    data_dir: Path  # <out>/data
    run_dir_of: Callable[[str], Path] = field(repr=False, default=None)  # arm name -> run folder, same seed
    field: str = ""  # config path of this callback, for errors


def build_callbacks(specs: dict[str, dict], ctx: CallbackContext, field_prefix: str = "callbacks") -> list:
    """The callbacks of one arm x seed, in the order the YAML lists them."""
    out = []
    for name, params in specs.items():
        f = f"{field_prefix}.{name}"
        entry = CALLBACKS.get(name, f)
        cfg = CALLBACKS.build_config(name, params, f)
        ctx.field = f
        out.append(entry.cls(cfg, ctx))
    return out


def callback_configs(specs: dict[str, dict], field_prefix: str = "callbacks") -> dict:
    """``{name: validated config}`` (what validation needs before any data exists)."""
    return {name: CALLBACKS.build_config(name, params, f"{field_prefix}.{name}") for name, params in specs.items()}
