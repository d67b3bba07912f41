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
``@GENERATORS.register("name", config=YourConfig)``. The registry finds the
file itself (every module of ``synthetic/`` is imported on first use).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..config import check
from ..registry import Registry
from ..seeds import salt

GENERATORS = Registry("generator", packages=("preschool.synthetic",), plugin_module="synthetic")
# named parameter sets, each registered beside its generator: a plug-in's name clashing with a built-in one
# is refused, and an unknown name gets the closest ones (registry.Registry)
GENERATOR_PRESETS = Registry("generator preset", packages=("preschool.synthetic",), plugin_module="synthetic")


@dataclass(frozen=True)
class GeneratorPreset:
    """A named parameter set of one generator (e.g. the verify-ppt vs Hu et al. Dyck defaults):
    ``GENERATOR_PRESETS.register(name)(GeneratorPreset(generator, params, description))``."""

    generator: str  # the registered generator it configures
    params: dict[str, Any]  # its config's values (a dataset's own ``params`` go over them)
    description: str = ""


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
    """Base class; subclasses are pure functions of (config, index).

    Conventions every generator follows (the shared test checks them):

    - ``cfg.<length_field>`` symbols per item, exactly (tasks whose instances are
      shorter pad with a PAD symbol that carries no loss);
    - tasks with an answer put ``meta["answer_spans"] = [(start, stop), ...]``
      and set ``loss_mask`` to 1 exactly on those positions when loss is
      answer-only;
    - ``check(item)`` re-derives the answer with an independent reference
      computation and raises AssertionError on any mismatch.
    """

    registry_name: ClassVar[str] = "?"
    # Config field holding the number of symbols per item (None: not resizable).
    # ``write.exact_fill_length`` sets it so that documents fill a row exactly.
    length_field: ClassVar[str | None] = "length"

    def __init__(self, cfg: GeneratorConfig):
        self.cfg = cfg
        # Salt the stream with the task name so two tasks with seed 0 differ.
        self._salt = salt(type(self).registry_name)

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

    @property
    def length(self) -> int | None:
        """Symbols per item (``None`` when the task has no fixed length)."""
        return None if self.length_field is None else int(getattr(self.cfg, self.length_field))

    def symbol_name(self, s: int) -> str:
        """Human-readable name of symbol ``s`` (for ``--preview``); default the integer."""
        return str(int(s))

    def decode(self, symbols: np.ndarray) -> str:
        return " ".join(self.symbol_name(s) for s in np.asarray(symbols).tolist())


def spans_mask(length: int, spans: list[tuple[int, int]]) -> np.ndarray:
    """uint8 mask of ``length`` with 1 on every ``[start, stop)`` span."""
    m = np.zeros(length, np.uint8)
    for a, b in spans:
        m[a:b] = 1
    return m


def check_digits(cfg: Any, vocab_size: int, field: str) -> None:
    """Digit budget: the largest symbol must render in ``cfg.max_digits`` digits (0 = no limit).

    Text rendering (verify-ppt) relies on every symbol being a 1-3 digit
    integer, which a Llama-3-style tokenizer turns into exactly one token.
    ``field`` names the parameter that sets the vocabulary size.
    """
    md = int(getattr(cfg, "max_digits", 3))
    check(md >= 0, "max_digits", f"must be >= 0, got {md}")
    if md:
        check(vocab_size - 1 < 10 ** md, field,
              f"gives symbol {vocab_size - 1} ({len(str(vocab_size - 1))} digits), more than "
              f"max_digits={md}; lower {field} or set max_digits=0 and use render=reserved")


def render_text(symbols: np.ndarray) -> str:
    """verify-ppt format: space-separated integers with a trailing space."""
    return " ".join(map(str, symbols.tolist())) + " "
