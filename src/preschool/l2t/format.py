"""Turning a (prompt, completion) pair into one training string.

Reference (gucci-j/l2t): ``prompt + "\\n\\n" + prefix + " " + completion`` with the
answer prefix drawn uniformly per sample from seven strings (one is empty); the
space is left out when the prefix is empty or the completion already starts with
a space. ``answer_start`` (character offset of the completion) lets the packer
restrict the loss to the answer when asked.

Instructions exist only for the two counting tasks (Char Count, Token Type): a
paraphrase placed before or after the text (50/50) with ``\\n\\n``. The
paraphrases below are ours (the reference's are not reused): 20 templates with a
slot for what is counted, so every count type gets 20 phrasings.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .base import pick

ANSWER_PREFIXES: tuple[str, ...] = ("Answer:", "Response:", "A:", "(A)", "A)", "A.", "")

_COUNT_TEMPLATES: tuple[str, ...] = (
    "How many {x} are in this text?",
    "Count the {x} in the passage.",
    "What is the number of {x} in the text?",
    "Give the total number of {x} in this passage.",
    "Report how many {x} the text contains.",
    "Tell me the count of {x} in the passage.",
    "Find the number of {x} that appear in the text.",
    "Determine how many {x} this passage has.",
    "Count every one of the {x} in the following text and give the number.",
    "How many {x} does the passage contain?",
    "State the number of {x} found in the text.",
    "Work out the total count of {x} in this passage.",
    "Return the number of {x} in the text below.",
    "What is the total count of {x} in the passage?",
    "Please count the {x} in this text.",
    "Output only the number of {x} in the passage.",
    "Tally the {x} in the text and write the total.",
    "In this text, how many {x} are there?",
    "Compute how many {x} occur in the passage.",
    "Answer with the number of {x} in this text.",
)

COUNT_TARGETS: dict[str, str] = {
    "characters": "characters (letters, digits, spaces and punctuation)",
    "content_words": "content words (words that are not stopwords)",
    "stopwords": "stopwords",
    "digits": "digits",
    "punctuation": "punctuation marks",
}


@functools.lru_cache(maxsize=None)
def count_instructions(target: str) -> tuple[str, ...]:
    return tuple(t.format(x=COUNT_TARGETS[target]) for t in _COUNT_TEMPLATES)


def with_instruction(text: str, instruction: str, rng: np.random.Generator) -> str:
    """Instruction before or after the text (50/50), separated by a blank line."""
    return f"{instruction}\n\n{text}" if rng.random() < 0.5 else f"{text}\n\n{instruction}"


@dataclass
class Formatted:
    text: str
    answer_start: int  # character offset where the completion begins


def join(prompt: str, completion: str, rng: np.random.Generator | None, prefixes: tuple[str, ...] = ANSWER_PREFIXES) -> Formatted:
    """``prompt + "\\n\\n" + prefix [+ " "] + completion`` (prefix drawn with ``rng``)."""
    prefix = pick(rng, prefixes) if (rng is not None and prefixes) else ""
    sep = " " if prefix and not completion.startswith(" ") else ""
    head = f"{prompt}\n\n{prefix}{sep}"
    return Formatted(head + completion, len(head))
