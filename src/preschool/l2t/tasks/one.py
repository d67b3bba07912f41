"""One (L2T, discourse level): write the whole chunk from its first word.

Reference code: prompt is the chunk's first token (split on single spaces);
completion is the entire chunk, that first word included.
"""

from __future__ import annotations

from ..base import L2T_TASKS, Pair, Task, TaskConfig


@L2T_TASKS.register("one", config=TaskConfig)
class One(Task):
    """Generate a chunk from its first word (Yamaguchi et al. 2026, One / one_word_completion)."""

    reference_name = "one_word_completion"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        text = chunk.text
        return Pair(text.split(" ", 1)[0], text)
