"""Synthetic pre-pretraining generators. Importing this package registers them all."""

from .base import GENERATORS, PRESETS, Generator, GeneratorConfig, Item, render_text  # noqa: F401
from . import dyck  # noqa: F401
