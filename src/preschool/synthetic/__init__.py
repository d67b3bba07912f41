"""Synthetic pre-pretraining generators. Importing this package registers them all."""

from .base import GENERATORS, PRESETS, Generator, GeneratorConfig, Item, render_text  # noqa: F401
from . import depo, dyck, mp_struct, nca, queue, retrieval, set_task, stack  # noqa: F401
