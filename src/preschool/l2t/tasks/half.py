"""Half (L2T, discourse level): continue a chunk from its first half.

Reference code: whitespace words split at ``len // 2``; prompt: first half
joined by spaces; completion: a space + the second half (so the formatter adds
no space after the answer prefix).
"""

from __future__ import annotations

from ..base import L2T_TASKS, Pair, Skip, Task, TaskConfig


@L2T_TASKS.register("half", config=TaskConfig)
class Half(Task):
    """Complete the second half of a chunk (Yamaguchi et al. 2026, Half / half_completion)."""

    reference_name = "half_completion"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        words = chunk.text.split()
        if len(words) < 2:
            raise Skip("too_few_words")
        h = len(words) // 2
        return Pair(" ".join(words[:h]), " " + " ".join(words[h:]))
