"""Token Type (L2T, word level): count one kind of token in the chunk.

Reference code: one of four counts, uniformly: content words (whitespace tokens
that are fully alphanumeric and not stopwords), stopwords (lower-cased token in
the stopword list, no punctuation stripping), digit characters, ASCII
punctuation characters (``string.punctuation``). The paper describes stripping
punctuation first; ``strip_punctuation: true`` does that for the two word
counts. Prompt: chunk + matching instruction (20 paraphrases, ours) before or
after it; completion: the count.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from ..base import L2T_TASKS, Pair, Task, TaskConfig, pick
from ..format import count_instructions, with_instruction

KINDS = ("content_words", "stopwords", "digits", "punctuation")
_PUNCT = frozenset(string.punctuation)


@dataclass
class TokenTypeConfig(TaskConfig):
    strip_punctuation: bool = False  # paper's description; the reference code does not strip


def count_kind(text: str, kind: str, stopwords, strip: bool = False) -> int:
    if kind == "digits":
        return sum(c.isdigit() for c in text)
    if kind == "punctuation":
        return sum(c in _PUNCT for c in text)
    words = text.split()
    if strip:
        words = [w.strip(string.punctuation) for w in words]
        words = [w for w in words if w]
    if kind == "stopwords":
        return sum(w.lower() in stopwords for w in words)
    return sum(w.isalnum() and w.lower() not in stopwords for w in words)


@L2T_TASKS.register("token_type", config=TokenTypeConfig)
class TokenType(Task):
    """Count content words, stopwords, digits or punctuation (Yamaguchi et al. 2026, Token Type)."""

    reference_name = "token_type"

    def make(self, chunk, rng, ctx):
        self.require_words(chunk)
        text = chunk.text
        kind = pick(rng, KINDS)
        n = count_kind(text, kind, ctx.stopwords, self.cfg.strip_punctuation)
        prompt = with_instruction(text, pick(rng, count_instructions(kind)), rng)
        return Pair(prompt, str(n), {"kind": kind})
