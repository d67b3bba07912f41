"""The L2T task contract: a chunk of sentences in, one (prompt, completion) pair out.

Yamaguchi, Mi & Aletras (ACL 2026, "Enhancing Linguistic Competence of Language
Models through Pre-training with Language Learning Tasks"; code gucci-j/l2t)
turn raw documents into (prompt, completion) pairs with 14 tasks. Each task here
is a config dataclass (subclass of :class:`TaskConfig`) + a subclass of
:class:`Task` registered in ``L2T_TASKS``; ``L2T_TASKS.build("space")`` gives one.

A task sees one :class:`Chunk` (a list of sentences from one document), a
``numpy.random.Generator`` (owned by the caller, which derives it from
``(seed, document index)``) and a :class:`Context` (the previous document's
sentences, the Random task's word pool). It returns a :class:`Pair`, or raises
:class:`Skip` naming why the chunk gives no sample (counted, never fatal).

Eligibility (which tasks a document can draw) is declared by class attributes:
``min_sentences`` (sentences in the *document*) and ``needs_prev`` (a previous
document exists to take distractors from), following the reference's candidate
lists (spec section 1.0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np

from ..config import check
from ..registry import Registry

L2T_TASKS = Registry("l2t task", packages=("preschool.l2t.tasks",), plugin_module="l2t_tasks")

# Mask strings shared by Masked Char, Masked Word and Last (reference code's list;
# the paper's Table 5 prints the sixth as guillemets, the code uses "<<>>").
MASKS: tuple[str, ...] = ("[MASK]", "___", "@@@", "###", "+++", "<<>>", "(())", "$$$")


@dataclass
class TaskConfig:
    min_num_words: int = 20  # released scripts; the reference code's default is 5

    def validate(self) -> None:
        check(self.min_num_words >= 0, "min_num_words", f"must be >= 0, got {self.min_num_words}")


@dataclass
class Chunk:
    """Consecutive sentences of one document (the unit a task transforms)."""

    sentences: list[str]

    @property
    def text(self) -> str:
        # Reference: sentences are re-joined with one space (no original newlines).
        return " ".join(self.sentences)

    def n_words(self) -> int:
        return sum(len(s.split()) for s in self.sentences)


@dataclass
class Context:
    """What a task may use besides its chunk."""

    prev_sentences: Sequence[str] | None = None  # previous document (distractor source)
    word_pool: Sequence[str] = ()  # replacement words for the Random task
    stopwords: frozenset[str] = frozenset()


@dataclass
class Pair:
    prompt: str
    completion: str
    meta: dict = field(default_factory=dict)


class Skip(Exception):
    """A chunk gives no sample; ``reason`` is a short counter key (e.g. ``short_chunk``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Task:
    """Base class; ``make`` must be a pure function of (chunk, rng state, context)."""

    registry_name: ClassVar[str] = "?"
    min_sentences: ClassVar[int] = 1  # sentences the document needs for this task to be a candidate
    needs_prev: ClassVar[bool] = False  # needs a previous document (distractors)
    fine_chunks: ClassVar[bool] = False  # Fill Middle: about half-size chunks
    reference_name: ClassVar[str] = ""  # the task's name in gucci-j/l2t

    def __init__(self, cfg: TaskConfig):
        self.cfg = cfg

    def eligible(self, n_sentences: int, has_prev: bool) -> bool:
        return n_sentences >= self.min_sentences and (has_prev or not self.needs_prev)

    def require_words(self, chunk: Chunk) -> None:
        if chunk.n_words() < self.cfg.min_num_words:
            raise Skip("short_chunk")

    def make(self, chunk: Chunk, rng: np.random.Generator, ctx: Context) -> Pair:
        raise NotImplementedError


def pick(rng: np.random.Generator, options: Sequence):
    """One uniformly drawn element (numpy-only so streams stay reproducible)."""
    return options[int(rng.integers(len(options)))]


def sample_positions(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """``k`` distinct positions out of ``range(n)``, in draw order."""
    if k <= 0 or n <= 0:
        return np.zeros(0, np.int64)
    return rng.choice(n, size=min(k, n), replace=False)


def py_round(x: float) -> int:
    """Python's round (half to even), as the reference computes its counts."""
    return int(round(x))
