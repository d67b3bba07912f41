"""Masked Char (L2T, character level): restore letters hidden behind a mask string.

Reference code: letters are characters with ``isalnum() and not isdigit()``;
``round(0.15 * #letters)`` of them (without replacement) are each replaced by
one mask string chosen per sample from the 8 masks. Completion: the original
chunk. A chunk without letters gives prompt == completion, as in the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...config import check
from ..base import L2T_TASKS, MASKS, Pair, Task, TaskConfig, pick, py_round, sample_positions


@dataclass
class MaskedCharConfig(TaskConfig):
    rate: float = 0.15

    def validate(self) -> None:
        super().validate()
        check(0.0 <= self.rate <= 1.0, "rate", f"must be in [0, 1], got {self.rate}")


@L2T_TASKS.register("masked_char", config=MaskedCharConfig)
class MaskedChar(Task):
    """Recover masked letters (Yamaguchi et al. 2026, Masked Char / char_identification)."""

    reference_name = "char_identification"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        text = chunk.text
        letters = [i for i, c in enumerate(text) if c.isalnum() and not c.isdigit()]
        mask = pick(rng, MASKS)
        chars = list(text)
        pos = sample_positions(rng, len(letters), py_round(self.cfg.rate * len(letters)))
        for p in pos:
            chars[letters[int(p)]] = mask
        return Pair("".join(chars), text, {"n_masked": len(pos), "mask": mask})
