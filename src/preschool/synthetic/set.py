"""Set: random inputs, a separator, then the distinct inputs in first-seen order.

Follows Wu, Li & Liang 2022 ("Insights into Pre-training via Simpler Synthetic
Tasks", felixzli/synthetic_pretraining) in the decoder-only, one-instance-per-
document form of verify-ppt (``preprocessing/src/tokenize_set_v2.py``):

- values are drawn uniformly from ``[1, vocab)``; the separator is ``vocab``
  (default 999, so every symbol has <= 3 digits);
- phase 1 draws values while ``len(inputs) + len(unique)`` stays <= length - 1
  (a new value costs 2 symbols, a repeat 1);
- phase 2 appends repeats of already-seen values (uniform) until the input and
  unique lists together hold ``length - 1`` symbols, leaving ``unique`` as is;
- document = inputs, separator, unique: exactly ``length`` symbols.

verify-ppt trains on every token (``answer_only_loss=False``, default);
``answer_only_loss=True`` puts loss on the unique list only. Departure: the
reference draws from one ``RandomState(0)`` stream; here each document is a
pure function of (seed, index).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import check
from .base import (GENERATORS, GENERATOR_PRESETS, Generator, GeneratorConfig, GeneratorPreset, Item, check_digits,
                   spans_mask)


@dataclass
class SetConfig(GeneratorConfig):
    length: int = 2048  # symbols per document
    vocab: int = 999  # values in [1, vocab); separator = vocab
    answer_only_loss: bool = False
    max_digits: int = 3

    def validate(self) -> None:
        super().validate()
        check(self.vocab >= 2, "vocab", f"must be >= 2 (one value plus the separator), got {self.vocab}")
        check(self.length >= 3, "length", f"must be >= 3 to hold one instance (value, separator, value), got {self.length}")
        check_digits(self, self.vocab + 1, "vocab")


def first_seen_unique(values: np.ndarray) -> np.ndarray:
    """Distinct values in order of first occurrence."""
    _, first = np.unique(values, return_index=True)
    return values[np.sort(first)]


@GENERATORS.register("set", config=SetConfig)
class SetTask(Generator):
    """Set task (Wu et al. 2022; verify-ppt v2): inputs, separator, first-seen distinct inputs."""

    cfg: SetConfig

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab + 1

    def item(self, index: int) -> Item:
        c = self.cfg
        rng = self.rng(index)
        budget = c.length - 1  # inputs + unique, the separator takes the last slot
        # Phase 1, vectorised: cost of each draw is 2 if new else 1; keep the
        # longest prefix whose running cost fits.
        draws = rng.integers(1, c.vocab, budget)
        _, first = np.unique(draws, return_index=True)
        is_new = np.zeros(budget, bool)
        is_new[first] = True
        cost = np.cumsum(1 + is_new)
        n_in = int(np.searchsorted(cost, budget, side="right"))
        inputs = draws[:n_in]
        unique = draws[np.sort(first[first < n_in])]
        # Phase 2: pad the inputs with repeats of seen values (unique unchanged).
        pad = budget - n_in - len(unique)
        if pad > 0:
            inputs = np.concatenate([inputs, unique[rng.integers(0, len(unique), pad)]])
        out = np.concatenate([inputs, [c.vocab], unique]).astype(np.int64)
        spans = [(len(inputs) + 1, c.length)]
        mask = spans_mask(c.length, spans) if c.answer_only_loss else None
        return Item(out, mask, {"n_inputs": len(inputs), "n_unique": len(unique), "answer_spans": spans})

    def symbol_name(self, s: int) -> str:
        return "|" if s == self.cfg.vocab else str(int(s))

    def check(self, item: Item) -> None:
        c = self.cfg
        s = item.symbols
        assert len(s) == c.length, f"length {len(s)} != {c.length}"
        seps = np.flatnonzero(s == c.vocab)
        assert len(seps) == 1, f"expected one separator, found {len(seps)}"
        inputs, unique = s[: seps[0]], s[seps[0] + 1:]
        assert len(inputs) >= 1 and inputs.min() >= 1
        assert np.array_equal(unique, first_seen_unique(inputs)), "unique list != first-seen distinct inputs"
        assert item.meta["answer_spans"] == [(seps[0] + 1, c.length)]


GENERATOR_PRESETS.register("set_verify_ppt")(GeneratorPreset(
    "set", {"length": 2048, "vocab": 999},
    "verify-ppt v2 Set (values 1..998, separator 999, 2048 ids)"))
