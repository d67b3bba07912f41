"""Retrieval demand: recall or copy elements seen earlier, with separate knobs for distance,
distractors and the number of positions tracked at once.

New task (no paper defines it): the follow-up verify-ppt asks for, sweeping
"retrieval demand vs downstream gain". Each instance is

    context:  (n_tracked + n_distractors) two-symbol cells "P v" in random order
    gap:      ``gap_min..gap_max`` filler symbols (retrieval distance)
    query:    recall: QUERY k_1 .. k_m ANSWER v_1 .. v_m
              copy:   QUERY ANSWER v_1 .. v_m          (m = n_tracked)
    (loss on v_1 .. v_m only)

- ``mode="recall"`` (match): P is a key (all keys distinct); the query lists
  the m tracked keys in random order and the answer gives their values in
  the same order; distractor cells are key/value pairs never queried.
- ``mode="copy"``: P is MARK for the m tracked cells and NOMARK for the
  distractors; the answer copies the marked values in the order they were seen.

Knobs: ``n_tracked`` (positions held at once), ``n_distractors`` (cells
that look like targets but are not asked for), ``gap_min``/``gap_max``
(filler between the context and the query; meta records each answer's exact
distance in symbols back to its source value). Instances are concatenated
while they fit in ``length``; the rest is PAD.

Symbols: keys ``0..n_keys-1``, values ``n_keys..n_keys+n_values-1``, filler
``..+n_filler-1``, then QUERY, ANSWER, MARK, NOMARK, PAD.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config import check
from .base import (GENERATORS, GENERATOR_PRESETS, Generator, GeneratorConfig, GeneratorPreset, Item, check_digits,
                   spans_mask)


@dataclass
class RetrievalConfig(GeneratorConfig):
    mode: Literal["recall", "copy"] = "recall"
    n_tracked: int = 2  # values the model must hold and retrieve per instance
    n_distractors: int = 6  # context cells never asked for
    gap_min: int = 0  # filler symbols between context and query
    gap_max: int = 32
    n_keys: int = 64
    n_values: int = 64
    n_filler: int = 16
    length: int = 512  # symbols per document (padded)
    max_digits: int = 3

    def validate(self) -> None:
        super().validate()
        check(self.n_tracked >= 1, "n_tracked", f"must be >= 1, got {self.n_tracked}")
        check(self.n_distractors >= 0, "n_distractors", f"must be >= 0, got {self.n_distractors}")
        check(0 <= self.gap_min <= self.gap_max, "gap_min",
              f"must be in [0, gap_max={self.gap_max}], got {self.gap_min}")
        check(self.n_values >= 1, "n_values", f"must be >= 1, got {self.n_values}")
        check(self.n_filler >= 1, "n_filler", f"must be >= 1, got {self.n_filler}")
        if self.mode == "recall":
            check(self.n_keys >= self.n_tracked + self.n_distractors, "n_keys",
                  f"recall needs distinct keys for every cell: n_keys >= n_tracked + n_distractors = "
                  f"{self.n_tracked + self.n_distractors}, got {self.n_keys}")
        check(self.length >= self.max_instance_length, "length",
              f"must be >= {self.max_instance_length} to hold one instance, got {self.length}")
        check_digits(self, self.n_keys + self.n_values + self.n_filler + 5, "n_keys")

    @property
    def max_instance_length(self) -> int:
        m, d = self.n_tracked, self.n_distractors
        return 2 * (m + d) + self.gap_max + 2 + m * (2 if self.mode == "recall" else 1)


@GENERATORS.register("retrieval", config=RetrievalConfig)
class Retrieval(Generator):
    """Retrieval demand (new): recall/copy earlier values with knobs for distance, distractors, tracked positions."""

    cfg: RetrievalConfig

    @property
    def _special0(self) -> int:
        c = self.cfg
        return c.n_keys + c.n_values + c.n_filler

    @property
    def vocab_size(self) -> int:
        return self._special0 + 5

    QUERY, ANSWER, MARK, NOMARK, PAD = range(5)

    def sym(self, special: int) -> int:
        return self._special0 + special

    def item(self, index: int) -> Item:
        c = self.cfg
        rng = self.rng(index)
        m, d = c.n_tracked, c.n_distractors
        n = m + d
        # All randomness drawn up front, vectorised over the most instances that can fit.
        min_len = 2 * n + c.gap_min + 2 + m * (2 if c.mode == "recall" else 1)
        k = c.length // min_len + 1
        values = (c.n_keys + rng.integers(0, c.n_values, (k, n))).tolist()
        order = np.argsort(rng.random((k, n)), 1).tolist()  # cell order; cells 0..m-1 are tracked
        if c.mode == "recall":  # n distinct keys per instance
            keys = np.argsort(rng.random((k, c.n_keys)), 1)[:, :n].tolist()
            asked_all = np.argsort(rng.random((k, m)), 1).tolist()
        gaps = rng.integers(c.gap_min, c.gap_max + 1, k).tolist()
        filler = (c.n_keys + c.n_values + rng.integers(0, c.n_filler, (k, c.gap_max))).tolist()
        q, a_, mark, nomark = self.sym(self.QUERY), self.sym(self.ANSWER), self.sym(self.MARK), self.sym(self.NOMARK)
        out: list[int] = []
        spans, gap_used, dist = [], [], []
        j = 0
        while c.length - len(out) >= c.max_instance_length:
            ks = keys[j] if c.mode == "recall" else [mark] * m + [nomark] * d
            vs = values[j]
            pos = [0] * n
            for cell in order[j]:
                out += (ks[cell], vs[cell])
                pos[cell] = len(out) - 1
            out += filler[j][: gaps[j]]
            if c.mode == "recall":
                asked = asked_all[j]
                out += [q, *(ks[i] for i in asked), a_]
            else:
                asked = sorted(range(m), key=pos.__getitem__)  # in the order seen
                out += [q, a_]
            start = len(out)
            out += [vs[i] for i in asked]
            spans.append((start, start + m))
            gap_used.append(gaps[j])
            dist += [start + t - pos[i] for t, i in enumerate(asked)]
            j += 1
        doc = np.full(c.length, self.sym(self.PAD), np.int64)
        doc[: len(out)] = out
        return Item(doc, spans_mask(c.length, spans),
                    {"answer_spans": spans, "instances": len(spans), "gaps": gap_used, "distances": dist})

    def symbol_name(self, s: int) -> str:
        c = self.cfg
        s = int(s)
        if s < c.n_keys:
            return f"k{s}"
        if s < c.n_keys + c.n_values:
            return f"v{s - c.n_keys}"
        if s < self._special0:
            return "."
        return ["?", "=>", "*", "-", "_"][s - self._special0]

    def check(self, item: Item) -> None:
        c = self.cfg
        s = item.symbols.tolist()
        assert len(s) == c.length, f"length {len(s)} != {c.length}"
        sp = self._special0
        is_key = (lambda x: x < c.n_keys) if c.mode == "recall" else (lambda x: x in (sp + self.MARK, sp + self.NOMARK))
        is_val = lambda x: c.n_keys <= x < c.n_keys + c.n_values  # noqa: E731
        i, spans = 0, []
        n_cells = c.n_tracked + c.n_distractors
        for _ in range(item.meta["instances"]):
            cells = []
            for _ in range(n_cells):
                assert is_key(s[i]) and is_val(s[i + 1]), f"position {i}: context cell expected"
                cells.append((s[i], s[i + 1], i + 1))
                i += 2
            while c.n_keys + c.n_values <= s[i] < sp:
                i += 1  # filler
            assert s[i] == sp + self.QUERY, f"position {i}: QUERY expected"
            i += 1
            if c.mode == "recall":
                assert len({k for k, _, _ in cells}) == n_cells, "keys must be distinct"
                table = {k: v for k, v, _ in cells}
                asked = s[i: i + c.n_tracked]
                expect = [table[k] for k in asked]
                i += c.n_tracked
            else:
                expect = [v for k, v, _ in cells if k == sp + self.MARK]
                assert len(expect) == c.n_tracked
            assert s[i] == sp + self.ANSWER, f"position {i}: ANSWER expected"
            i += 1
            assert s[i: i + c.n_tracked] == expect, f"position {i}: answer != retrieved values"
            spans.append((i, i + c.n_tracked))
            i += c.n_tracked
        assert all(x == sp + self.PAD for x in s[i:]), "padding expected after the last instance"
        assert c.length - i < c.max_instance_length, "room for another instance was left as padding"
        assert [tuple(x) for x in item.meta["answer_spans"]] == spans


GENERATOR_PRESETS.register("retrieval_easy")(GeneratorPreset(
    "retrieval", {"n_tracked": 1, "n_distractors": 2, "gap_min": 0, "gap_max": 8},
    "recall 1 value, 2 distractors, short gaps"))
GENERATOR_PRESETS.register("retrieval_hard")(GeneratorPreset(
    "retrieval", {"n_tracked": 4, "n_distractors": 28, "gap_min": 64, "gap_max": 128, "length": 1024},
    "recall 4 values among 28 distractors after 64-128 filler"))
