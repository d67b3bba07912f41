"""Char Count (L2T, character level): how many characters does the chunk have?

Prompt: the chunk with a counting instruction (one of 20 paraphrases, ours)
before or after it; completion: ``len(chunk)`` in code points, spaces and
punctuation included (reference code).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base import L2T_TASKS, Pair, Task, TaskConfig, pick
from ..format import count_instructions, with_instruction


@dataclass
class CharCountConfig(TaskConfig):
    instruction: bool = True  # the reference always instructs the two counting tasks


@L2T_TASKS.register("char_count", config=CharCountConfig)
class CharCount(Task):
    """Count the characters of a chunk (Yamaguchi et al. 2026, Char Count)."""

    reference_name = "char_count"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        text = chunk.text
        prompt = with_instruction(text, pick(rng, count_instructions("characters")), rng) if self.cfg.instruction else text
        return Pair(prompt, str(len(text)))
