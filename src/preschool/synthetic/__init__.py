"""Synthetic pre-pretraining generators, one per file (file stem = registry name).

``GENERATORS`` finds a generator by name in the module of that name (and
imports every module of this package when it lists them), so a new generator
is one new file. ``PRESETS`` (named parameter sets, registered
beside their generators) is read through this package, which finds the
generators first.
"""

from typing import Any

from .base import GENERATORS, Generator, GeneratorConfig, Item, render_text  # noqa: F401


def __getattr__(name: str) -> Any:
    if name == "PRESETS":
        from . import base

        GENERATORS.discover()
        return base.PRESETS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
