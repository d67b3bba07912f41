"""Typo (L2T, character level): correct randomly substituted characters.

Reference code: positions are alphanumeric characters (digits included);
``max(1, round(#alnum * U(0.03, 0.08)))`` of them get a random a-z letter,
upper-cased when the original is upper case. A replacement may equal the
original (a no-op, unchecked, as in the reference). The paper's Table 5 says
U(0.01, 0.08); set ``low: 0.01`` for that. Completion: the original chunk.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from ...config import check
from ..base import L2T_TASKS, Pair, Skip, Task, TaskConfig, py_round, sample_positions


@dataclass
class TypoConfig(TaskConfig):
    low: float = 0.03
    high: float = 0.08

    def validate(self) -> None:
        super().validate()
        check(0.0 <= self.low <= self.high <= 1.0, "low", f"need 0 <= low <= high <= 1, got {self.low}, {self.high}")


@L2T_TASKS.register("typo", config=TypoConfig)
class Typo(Task):
    """Fix character typos (Yamaguchi et al. 2026, Typo / typo_correction)."""

    reference_name = "typo_correction"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        text = chunk.text
        alnum = [i for i, c in enumerate(text) if c.isalnum()]
        if not alnum:
            raise Skip("no_alnum")
        rate = rng.uniform(self.cfg.low, self.cfg.high)
        k = max(1, py_round(len(alnum) * rate))
        chars = list(text)
        pos = sample_positions(rng, len(alnum), k)
        letters = rng.integers(0, 26, size=len(pos))
        for p, l in zip(pos, letters):
            i = alnum[int(p)]
            new = string.ascii_lowercase[int(l)]
            chars[i] = new.upper() if chars[i].isupper() else new
        return Pair("".join(chars), text, {"n_typos": len(pos)})
