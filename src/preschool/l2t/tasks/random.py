"""Random (L2T, word level): spot and undo random word replacements.

Reference code: ``max(1, round(#words * U(0.05, 0.10)))`` word positions get a
random word from a pool, Capitalised when the original starts upper case and
lower-cased otherwise (attached punctuation is lost). Prompt: the words joined
by spaces; completion: the original with whitespace normalised.

Departure: the reference's pool is 100k random WordNet lemmas drawn at import
time (unseeded, needs NLTK data); ours is the packaged GCIDE headword list or
the corpus's own vocabulary (see ``l2t.text``), chosen in ``L2TConfig.word_pool``.
The paper's text says "random vocabulary tokens"; the code uses words.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...config import check
from ..base import L2T_TASKS, Pair, Skip, Task, TaskConfig, py_round, sample_positions


@dataclass
class RandomWordConfig(TaskConfig):
    low: float = 0.05
    high: float = 0.10

    def validate(self) -> None:
        super().validate()
        check(0.0 <= self.low <= self.high <= 1.0, "low", f"need 0 <= low <= high <= 1, got {self.low}, {self.high}")


@L2T_TASKS.register("random", config=RandomWordConfig)
class RandomWord(Task):
    """Undo random word replacements (Yamaguchi et al. 2026, Random)."""

    reference_name = "random"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        if not ctx.word_pool:
            raise Skip("empty_word_pool")
        words = chunk.text.split()
        if not words:
            raise Skip("no_words")
        k = max(1, py_round(len(words) * rng.uniform(self.cfg.low, self.cfg.high)))
        pos = sample_positions(rng, len(words), k)
        repl = rng.integers(0, len(ctx.word_pool), size=len(pos))
        out = list(words)
        for p, r in zip(pos, repl):
            w = ctx.word_pool[int(r)]
            out[int(p)] = w.capitalize() if words[int(p)][:1].isupper() else w.lower()
        return Pair(" ".join(out), " ".join(words), {"n_replaced": len(pos)})
