"""Reordering (L2T, sentence level): put shuffled sentences back in order.

Reference code: a full random permutation of the chunk's sentences (may be the
identity; unchecked) joined by spaces; completion: the original order.
"""

from __future__ import annotations

from ..base import L2T_TASKS, Pair, Task, TaskConfig


@L2T_TASKS.register("reordering", config=TaskConfig)
class Reordering(Task):
    """Restore sentence order (Yamaguchi et al. 2026, Reordering / sentence_reordering)."""

    reference_name = "sentence_reordering"
    min_sentences = 3

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        perm = rng.permutation(len(chunk.sentences))
        return Pair(" ".join(chunk.sentences[int(i)] for i in perm), chunk.text, {"perm": perm.tolist()})
