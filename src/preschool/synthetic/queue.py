"""Queue: the Stack task with first-in-first-out pops (the Beyond Perplexity control).

"Lasting Effects of Abstract Pretraining Beyond Perplexity" (Shinnick et al.)
replaces the stack by a queue to keep the surface task while changing the
computation; no code is public. As the spec recommends, this reuses
:class:`~preschool.synthetic.stack.Stack` unchanged (schedule, distinct
values, vocabulary, separator, padding, answer-only loss) except that a pop
removes the *earliest* value and the answer lists the queue ``front_first``
(next out first; default) or ``back_first``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import GENERATORS, GENERATOR_PRESETS, GeneratorPreset
from .stack import Stack, StackConfig


@dataclass
class QueueConfig(StackConfig):
    answer_order: Literal["front_first", "back_first"] = "front_first"  # type: ignore[assignment]


@GENERATORS.register("queue", config=QueueConfig)
class Queue(Stack):
    """QUEUE control (Beyond Perplexity): Stack's push/pop schedule with FIFO pops; loss on the answer."""

    cfg: QueueConfig
    fifo = True


GENERATOR_PRESETS.register("queue_procedural")(GeneratorPreset(
    "queue", {"n_symbols": 100, "n_ops": 64, "length": 128},
    "Queue control matched to stack_procedural"))
