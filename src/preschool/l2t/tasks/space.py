"""Space (L2T, character level): put the spaces back into a chunk.

Prompt: the chunk with every ASCII space (U+0020) removed (other whitespace
survives, as in the reference); completion: the original chunk.
"""

from __future__ import annotations

from ..base import L2T_TASKS, Pair, Task, TaskConfig


@L2T_TASKS.register("space", config=TaskConfig)
class Space(Task):
    """Re-insert removed spaces (Yamaguchi et al. 2026, Space / space_insertion)."""

    reference_name = "space_insertion"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        text = chunk.text
        return Pair(text.replace(" ", ""), text)
