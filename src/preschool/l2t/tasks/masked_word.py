"""Masked Word (L2T, word level): restore whitespace words hidden behind masks.

Reference code (``mlm``): ``round(0.15 * #words)`` word positions are sampled;
each gets its own mask string from the 8. Prompt: the words joined by single
spaces; completion: the original chunk verbatim (not whitespace-normalised).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...config import check
from ..base import L2T_TASKS, MASKS, Pair, Task, TaskConfig, py_round, sample_positions


@dataclass
class MaskedWordConfig(TaskConfig):
    rate: float = 0.15

    def validate(self) -> None:
        super().validate()
        check(0.0 <= self.rate <= 1.0, "rate", f"must be in [0, 1], got {self.rate}")


@L2T_TASKS.register("masked_word", config=MaskedWordConfig)
class MaskedWord(Task):
    """Fill in masked words (Yamaguchi et al. 2026, Masked Word / mlm)."""

    reference_name = "mlm"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        text = chunk.text
        words = text.split()
        pos = sample_positions(rng, len(words), py_round(self.cfg.rate * len(words)))
        masks = rng.integers(0, len(MASKS), size=len(pos))
        for p, m in zip(pos, masks):
            words[int(p)] = MASKS[int(m)]
        return Pair(" ".join(words), text, {"n_masked": len(pos)})
