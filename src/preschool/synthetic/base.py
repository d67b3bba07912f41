"""The generator contract shared by every synthetic pre-pretraining task.

A generator turns ``(seed, index)`` into one :class:`Item`: a sequence of
integer *symbols* in ``[0, vocab_size)``, an optional per-symbol loss mask
(1 = the model is trained to predict this symbol; ``None`` = all symbols) and
a metadata dict. Items never share random state, so any worker count, any
order and any subset of indices gives identical bytes.

How symbols reach the model is a separate choice (``render``):

- ``text``: symbols written as space-separated decimal integers, with a
  trailing space, and tokenized by the run's natural-language tokenizer
  (verify-ppt's format).
- ``reserved``: symbol ``s`` becomes token id ``base_vocab + s`` in ids
  appended to the vocabulary (the procedural-pretraining format).

Adding a task: one file with a ``@dataclass`` config subclassing
:class:`GeneratorConfig` (validate() names bad fields), one subclass of
:class:`Generator` implementing ``vocab_size``, ``item`` and ``check``, and
``@GENERATORS.register("name", config=YourConfig)``; then import the module
in ``synthetic/__init__.py``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..config import check
from ..registry import Registry

GENERATORS = Registry("generator")
PRESETS: dict[str, tuple[str, dict]] = {}  # preset name -> (generator name, parameter overrides)


def register_preset(name: str, generator: str, description: str = "", **params: Any) -> None:
    """A named parameter set (e.g. the verify-ppt vs Hu et al. Dyck defaults)."""
    PRESETS[name] = (generator, {**params, "_description": description})


@dataclass
class GeneratorConfig:
    seed: int = 0

    def validate(self) -> None:
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")


@dataclass
class Item:
    symbols: np.ndarray  # int64, values in [0, vocab_size)
    loss_mask: np.ndarray | None = None  # uint8 per symbol, or None = loss on every symbol
    meta: dict = field(default_factory=dict)


class Generator:
    """Base class; subclasses are pure functions of (config, index)."""

    registry_name: ClassVar[str] = "?"

    def __init__(self, cfg: GeneratorConfig):
        self.cfg = cfg
        # Salt the stream with the task name so two tasks with seed 0 differ.
        self._salt = zlib.crc32(type(self).registry_name.encode())

    def rng(self, index: int) -> np.random.Generator:
        """Independent random stream for item ``index``."""
        return np.random.default_rng([self.cfg.seed, int(index), self._salt])

    @property
    def vocab_size(self) -> int:
        """Number of distinct symbols; items use ids in ``[0, vocab_size)``."""
        raise NotImplementedError

    @property
    def max_symbol_digits(self) -> int:
        return len(str(self.vocab_size - 1))

    def item(self, index: int) -> Item:
        raise NotImplementedError

    def check(self, item: Item) -> None:
        """Raise AssertionError if ``item`` breaks the task's invariants."""
        raise NotImplementedError

    def items(self, start: int, stop: int):
        for i in range(start, stop):
            yield self.item(i)


def render_text(symbols: np.ndarray) -> str:
    """verify-ppt format: space-separated integers with a trailing space."""
    return " ".join(map(str, symbols.tolist())) + " "
