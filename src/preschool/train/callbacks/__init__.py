"""Trainer callbacks, one per file: validation, checkpointing, metrics log, progress bar."""

from .base import Callback

__all__ = ["Callback"]
