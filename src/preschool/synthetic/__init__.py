"""Synthetic pre-pretraining generators. Importing this package registers them all."""

from .base import GENERATORS, PRESETS, Generator, GeneratorConfig, Item, render_text  # noqa: F401
# one module per generator, named after its registry name
from . import depo, mp_struct_core, nca, queue, retrieval, set, shuffle_dyck, stack  # noqa: F401
