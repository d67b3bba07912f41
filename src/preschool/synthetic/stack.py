"""Stack: a push/pop program, a separator, then the final stack contents (answer-only loss).

Follows the STACK warm-up of "Procedural Pretraining" (Jiang, Shinnick et al.,
arXiv 2601.21725; zlshinnick/procedural-pretraining ``procedural_data/stack.py``)
used by "Lasting Effects of Abstract Pretraining Beyond Perplexity":

- symbols: 0 = POP, 1..V-1 pushable values, V = SEPARATOR, V+1 = PAD
  (``n_symbols = V``, default 100; the reference config);
- ``n_ops`` operations (default 64); at each step: push if the stack holds
  <= 1 item; otherwise push with p = 0.75 during the first two thirds of the
  steps and 0.25 in the last third; a push draws uniformly among values not
  on the stack (pop if none is free); the last step pops if > 1 item is held;
  an empty final stack gets one fresh value (no operation token);
- document = operations, SEPARATOR, final contents, PAD to ``length``
  (default ``2 * n_ops``); loss only on the contents (``loss_mask``).

``answer_order``: ``top_first`` (the reference generator) or
``bottom_first`` (the order drawn on the Beyond Perplexity site); the paper is
ambiguous, so it is configurable. :class:`~preschool.synthetic.queue.Queue`
reuses the schedule with FIFO pops (the paper's control).

Departure: the reference seeds each example with ``base_seed + index``; here
``default_rng([seed, index, salt])``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config import check
from .base import (GENERATORS, GENERATOR_PRESETS, Generator, GeneratorConfig, GeneratorPreset, Item, check_digits,
                   spans_mask)


@dataclass
class StackConfig(GeneratorConfig):
    n_symbols: int = 100  # V: POP = 0, values 1..V-1, SEP = V, PAD = V + 1
    n_ops: int = 64
    length: int = 128  # symbols per document (padded); must be >= 2 * n_ops
    answer_order: Literal["top_first", "bottom_first"] = "top_first"
    p_push_early: float = 0.75  # push probability in the first two thirds of the steps
    max_digits: int = 3

    def validate(self) -> None:
        super().validate()
        check(self.n_symbols >= 3, "n_symbols", f"must be >= 3 (POP plus two values), got {self.n_symbols}")
        check(self.n_ops >= 1, "n_ops", f"must be >= 1, got {self.n_ops}")
        check(0.0 <= self.p_push_early <= 1.0, "p_push_early", f"must be in [0, 1], got {self.p_push_early}")
        check(self.length >= 2 * self.n_ops, "length",
              f"must be >= 2 * n_ops = {2 * self.n_ops} to hold one instance (operations, separator, "
              f"contents), got {self.length}")
        check_digits(self, self.n_symbols + 2, "n_symbols")


def simulate(ops: list[int], fifo: bool) -> list[int]:
    """Reference simulation: final memory contents, next-out first (POP = 0)."""
    mem: list[int] = []
    for x in ops:
        if x == 0:
            assert mem, "pop from empty memory"
            mem.pop(0 if fifo else -1)
        else:
            mem.append(x)
    return mem if fifo else mem[::-1]


@GENERATORS.register("stack", config=StackConfig)
class Stack(Generator):
    """STACK (Procedural Pretraining / Beyond Perplexity): push/pop ops, separator, final stack; loss on the answer."""

    cfg: StackConfig
    fifo = False
    first_orders = ("top_first", "front_first")

    @property
    def vocab_size(self) -> int:
        return self.cfg.n_symbols + 2

    @property
    def sep(self) -> int:
        return self.cfg.n_symbols

    @property
    def pad(self) -> int:
        return self.cfg.n_symbols + 1

    def item(self, index: int) -> Item:
        c = self.cfg
        rng = self.rng(index)
        L, V = c.n_ops, c.n_symbols
        u = rng.random(L).tolist()
        cand = rng.integers(1, V, 4 * L + 16).tolist()  # push candidates, consumed by rejection
        ci = 0
        mem: list[int] = []
        held: set[int] = set()
        ops: list[int] = []
        split = (2 * L) // 3
        for t in range(L):
            if len(mem) <= 1:
                push = True
            elif t == L - 1:
                push = False
            else:
                push = u[t] < (c.p_push_early if t < split else 1.0 - c.p_push_early)
            if push and len(held) >= V - 1:
                push = False  # no free value: the step pops instead
            if push:
                while True:  # uniform over values not held (rejection from uniform draws)
                    if ci == len(cand):
                        cand = rng.integers(1, V, 4 * L + 16).tolist()
                        ci = 0
                    x = cand[ci]
                    ci += 1
                    if x not in held:
                        break
                mem.append(x)
                held.add(x)
                ops.append(x)
            else:
                held.discard(mem.pop(0 if self.fifo else -1))
                ops.append(0)
        fresh = False
        if not mem:  # cannot happen with the schedule above; kept from the reference
            mem.append(int(rng.integers(1, V)))
            fresh = True
        answer = mem if self.fifo else mem[::-1]  # next-out first
        if c.answer_order not in self.first_orders:
            answer = answer[::-1]
        start = L + 1
        spans = [(start, start + len(answer))]
        out = np.full(c.length, self.pad, np.int64)
        out[:L] = ops
        out[L] = self.sep
        out[start: start + len(answer)] = answer
        return Item(out, spans_mask(c.length, spans),
                    {"n_ops": L, "answer_len": len(answer), "answer_spans": spans, "fresh_fill": fresh})

    def symbol_name(self, s: int) -> str:
        return {0: "pop", self.sep: "|", self.pad: "_"}.get(int(s), str(int(s)))

    def check(self, item: Item) -> None:
        c = self.cfg
        s = item.symbols.tolist()
        L = c.n_ops
        assert len(s) == c.length, f"length {len(s)} != {c.length}"
        ops = s[:L]
        assert all(0 <= x < c.n_symbols for x in ops), "operation out of range"
        assert s[L] == self.sep, "separator missing after the operations"
        # distinct values in memory at every step
        mem: list[int] = []
        for x in ops:
            if x == 0:
                mem.pop(0 if self.fifo else -1)
            else:
                assert x not in mem, f"value {x} pushed while already held"
                mem.append(x)
        expect = simulate(ops, self.fifo) if not item.meta["fresh_fill"] else s[L + 1: L + 2]
        if c.answer_order not in self.first_orders:
            expect = expect[::-1]
        n = item.meta["answer_len"]
        assert s[L + 1: L + 1 + n] == expect, "answer != reference simulation"
        assert all(x == self.pad for x in s[L + 1 + n:]), "padding expected after the answer"
        assert item.meta["answer_spans"] == [(L + 1, L + 1 + n)]


GENERATOR_PRESETS.register("stack_procedural")(GeneratorPreset(
    "stack", {"n_symbols": 100, "n_ops": 64, "length": 128},
    "Procedural Pretraining STACK config (V=100, 64 ops, 128 per row)"))
