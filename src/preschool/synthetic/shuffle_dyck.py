"""k-Shuffle Dyck: interleaved balanced brackets of k types, no nesting order.

Follows Hu et al. 2025 ("Between Circuits and Chomsky", michahu/pre-pretraining)
as re-run at scale by verify-ppt (gucci-j/verify-ppt-at-scale):

- opening bracket of type i is symbol i, its closer is symbol i + k;
- depth = total number of currently open brackets (all types together);
- start with ``min_depth`` random openers; then, until ``length`` symbols:
  open if depth == 0, close if depth >= max_depth, else open with ``p_open``;
- a close picks uniformly among the types that have an open bracket (any
  order: the shuffle of k Dyck-1 languages).

The reference code stops at exactly ``length`` symbols, so the word may end
with brackets still open (``close_at_end=False``, default, as the reference).
``close_at_end=True`` reserves room and closes everything, so every document
is a balanced word of exactly ``length`` symbols (our option; requires
``length >= 2 * max_depth``).

Presets: ``dyck_verify_ppt`` (k=64, p_open=0.50, length 2048) and
``dyck_hu2025`` (k=64, p_open=0.51, length 2048).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import check
from .base import GENERATORS, GENERATOR_PRESETS, Generator, GeneratorConfig, GeneratorPreset, Item, check_digits


@dataclass
class ShuffleDyckConfig(GeneratorConfig):
    k: int = 64
    length: int = 2048  # symbols per document
    min_depth: int = 1
    max_depth: int = 8
    p_open: float = 0.5
    close_at_end: bool = False
    max_digits: int = 3  # symbols must render in <= this many digits (2k-1 < 10^max_digits); 0 = no limit

    def validate(self) -> None:
        super().validate()
        check(self.k >= 1, "k", f"must be >= 1, got {self.k}")
        check(self.min_depth >= 1, "min_depth", f"must be >= 1, got {self.min_depth}")
        check(self.max_depth >= self.min_depth, "min_depth",
              f"min_depth {self.min_depth} > max_depth {self.max_depth}")
        check(0.0 < self.p_open < 1.0, "p_open", f"must be in (0, 1), got {self.p_open}")
        check(self.length >= self.min_depth, "length",
              f"must be >= min_depth ({self.min_depth}) to hold one instance, got {self.length}")
        if self.close_at_end:
            check(self.length >= 2 * self.max_depth and self.length % 2 == 0, "length",
                  f"close_at_end needs an even length >= 2*max_depth = {2 * self.max_depth}, got {self.length}")
        check_digits(self, 2 * self.k, "k")


@GENERATORS.register("shuffle_dyck", config=ShuffleDyckConfig)
class ShuffleDyck(Generator):
    """k-Shuffle Dyck words (Hu et al. 2025; verify-ppt), exactly ``length`` symbols each."""

    cfg: ShuffleDyckConfig

    @property
    def vocab_size(self) -> int:
        return 2 * self.cfg.k

    def item(self, index: int) -> Item:
        c = self.cfg
        rng = self.rng(index)
        # Draw all randomness up front in vectors (fast), consume sequentially
        # with plain Python ints (a numpy call per symbol would be ~20x slower).
        u = rng.random(c.length).tolist()
        pick = rng.random(c.length).tolist()
        k, p_open, max_depth, length = c.k, c.p_open, c.max_depth, c.length
        out = [0] * length
        open_count = [0] * k
        # Types with at least one open bracket, plus each one's slot in the list,
        # so a close picks uniformly among them in O(1) (swap-remove on empty).
        open_types: list[int] = []
        slot = [-1] * k
        depth = 0
        for n in range(length):
            if n < c.min_depth:
                op = True
            else:
                remaining = length - n
                if c.close_at_end and depth >= remaining:
                    op = False
                elif depth == 0:
                    op = True
                elif depth >= max_depth:
                    op = False
                else:
                    op = u[n] < p_open
                if op and c.close_at_end and depth + 1 > remaining - 1:
                    op = False
            if op:
                t = int(pick[n] * k)
                if open_count[t] == 0:
                    slot[t] = len(open_types)
                    open_types.append(t)
                open_count[t] += 1
                depth += 1
                out[n] = t
            else:
                # uniform over *types* with an open bracket, as the reference does
                t = open_types[int(pick[n] * len(open_types))]
                open_count[t] -= 1
                if open_count[t] == 0:
                    last = open_types.pop()
                    if last != t:
                        open_types[slot[t]] = last
                        slot[last] = slot[t]
                    slot[t] = -1
                depth -= 1
                out[n] = t + k
        return Item(np.asarray(out, np.int64), None, {"final_depth": depth, "k": k})

    def symbol_name(self, s: int) -> str:
        k = self.cfg.k
        return f"({s}" if s < k else f"){s - k}"

    def check(self, item: Item) -> None:
        c = self.cfg
        s = item.symbols
        assert len(s) == c.length, f"length {len(s)} != {c.length}"
        assert s.min() >= 0 and s.max() < 2 * c.k
        counts = np.zeros(c.k, np.int64)
        depth = 0
        for i, x in enumerate(s.tolist()):
            if x < c.k:
                counts[x] += 1
                depth += 1
            else:
                assert counts[x - c.k] > 0, f"position {i}: closes type {x - c.k} that is not open"
                counts[x - c.k] -= 1
                depth -= 1
            assert depth <= c.max_depth, f"position {i}: depth {depth} > max_depth {c.max_depth}"
            assert depth >= 0
        assert depth == item.meta["final_depth"]
        if c.close_at_end:
            assert depth == 0, "close_at_end: word must be balanced"


GENERATOR_PRESETS.register("dyck_verify_ppt")(GeneratorPreset(
    "shuffle_dyck", {"k": 64, "p_open": 0.50, "length": 2048},
    "verify-ppt v2 defaults"))
GENERATOR_PRESETS.register("dyck_hu2025")(GeneratorPreset(
    "shuffle_dyck", {"k": 64, "p_open": 0.51, "length": 2048},
    "Hu et al. 2025 defaults"))
