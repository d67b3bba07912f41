"""Synthetic pre-pretraining generators, one per file (file stem = registry name).

``GENERATORS`` finds a generator by name in the module of that name (and
imports every module of this package when it lists them), so a new generator
is one new file. ``GENERATOR_PRESETS`` (named parameter sets, each a
:class:`GeneratorPreset` registered beside its generator) is a registry too.
"""

from .base import (GENERATOR_PRESETS, GENERATORS, Generator, GeneratorConfig, GeneratorPreset,  # noqa: F401
                   Item, render_text)
