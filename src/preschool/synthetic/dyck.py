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
from .base import GENERATORS, Generator, GeneratorConfig, Item, register_preset


@dataclass
class ShuffleDyckConfig(GeneratorConfig):
    k: int = 64
    length: int = 2048  # symbols per document
    min_depth: int = 1
    max_depth: int = 8
    p_open: float = 0.5
    close_at_end: bool = False
    max_digits: int = 3  # symbols must render in <= this many digits (2k-1 < 10^max_digits)

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
        check(2 * self.k - 1 < 10 ** self.max_digits, "k",
              f"k={self.k} gives symbol {2 * self.k - 1}, more than max_digits={self.max_digits} digits")


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
        # Draw all randomness up front in vectors (fast), consume sequentially.
        u = rng.random(c.length)
        pick = rng.random(c.length)
        out = np.empty(c.length, np.int64)
        open_count = np.zeros(c.k, np.int64)
        depth = 0
        n = 0
        for _ in range(c.min_depth):
            t = int(pick[n] * c.k)
            out[n] = t
            open_count[t] += 1
            depth += 1
            n += 1
        while n < c.length:
            remaining = c.length - n
            if c.close_at_end and depth >= remaining:
                must = "close"
            elif depth == 0:
                must = "open"
            elif depth >= c.max_depth:
                must = "close"
            else:
                must = "open" if u[n] < c.p_open else "close"
            if must == "open" and c.close_at_end and depth + 1 > remaining - 1:
                must = "close"
            if must == "open":
                t = int(pick[n] * c.k)
                open_count[t] += 1
                depth += 1
                out[n] = t
            else:
                # uniform over *types* with an open bracket, as the reference does
                types = np.flatnonzero(open_count)
                t = int(types[int(pick[n] * len(types))])
                open_count[t] -= 1
                depth -= 1
                out[n] = t + c.k
            n += 1
        return Item(out, None, {"final_depth": depth, "k": c.k})

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


register_preset("dyck_verify_ppt", "shuffle_dyck", "verify-ppt v2 defaults", k=64, p_open=0.50, length=2048)
register_preset("dyck_hu2025", "shuffle_dyck", "Hu et al. 2025 defaults", k=64, p_open=0.51, length=2048)
