"""Shuffle (L2T, word level): undo pairwise word swaps.

Reference code: k = ``max(round(#words * U(0.05, 0.10)), 1)`` *pairs* (capped
at ``#words // 2``); 2k distinct positions are swapped pairwise, so ~10-20% of
words move (the paper's "5-10% shuffled words" counts pairs). Prompt: swapped
words joined by spaces; completion: the original, whitespace normalised.
``count: words`` swaps round(rate/2 * #words) pairs instead (the paper's text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...config import check
from ..base import L2T_TASKS, Pair, Skip, Task, TaskConfig, py_round


@dataclass
class ShuffleConfig(TaskConfig):
    low: float = 0.05
    high: float = 0.10
    count: Literal["pairs", "words"] = "pairs"  # what the U(low, high) rate counts

    def validate(self) -> None:
        super().validate()
        check(0.0 <= self.low <= self.high <= 1.0, "low", f"need 0 <= low <= high <= 1, got {self.low}, {self.high}")


@L2T_TASKS.register("shuffle", config=ShuffleConfig)
class Shuffle(Task):
    """Restore word order after random pair swaps (Yamaguchi et al. 2026, Shuffle)."""

    reference_name = "shuffle"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        words = chunk.text.split()
        if len(words) < 2:
            raise Skip("too_few_words")
        rate = rng.uniform(self.cfg.low, self.cfg.high)
        if self.cfg.count == "words":
            rate /= 2
        k = min(max(py_round(len(words) * rate), 1), len(words) // 2)
        pos = rng.choice(len(words), size=2 * k, replace=False)
        out = list(words)
        for a, b in zip(pos[0::2], pos[1::2]):
            out[int(a)], out[int(b)] = out[int(b)], out[int(a)]
        return Pair(" ".join(out), " ".join(words), {"n_pairs": k})
