"""DEPO k-hop: a shuffled edge list of a cycle of multi-token words, then k-hop queries.

Follows the "reasoning depth" task of Allen-Zhu's Physics of Language Models
Part 4.1 (Canon layers) as used by "Lasting Effects of Abstract Pretraining
Beyond Perplexity" (config ``DEPO_n10_k4_m4``: 10 nodes, k <= 4, 4 queries);
reference re-implementation: Thiggel/SyntheticPretraining ``Depo/depo.py``.

Symbols (A = ``alphabet``, K = ``max_hops``):

- ``0..A-1`` word letters, ``A..2A-1`` the same letters marking a word's last
  token (so word boundaries parse);
- ``2A`` EDGE (before each edge), ``2A+1`` ANSWER, ``2A+2 .. 2A+1+K`` the query
  token Q_k that encodes the hop count k, ``2A+2+K`` PAD.

Document: n distinct words (``word_len_min..word_len_max`` letters)
arranged in one directed cycle; every edge ``EDGE u v`` listed in random
order; then the queries ``Q_k w ANSWER target`` where target is the word k
steps after w along the cycle (k uniform in ``1..max_hops``, or fixed with
``hops``); PAD to ``length``. Loss only on the target words.

Sampling follows the reference's training generator by default:

- ``n_nodes_dist: inverse_sqrt``: n is drawn per document from ``3..n_nodes``
  with weight ``1 / (n + sqrt(n_nodes))`` (its ``sample_n_with_inverse_sqrt_bias``),
  so small graphs are more frequent; ``fixed`` always uses ``n_nodes`` (the
  reference's evaluation mode; our generator before);
- ``distinct_sources: true``: the query words are ``min(n, n_queries)``
  distinct nodes drawn without replacement; ``false`` draws ``n_queries``
  sources with replacement (our generator before).

Departures: no BOS inside the item (the packer's EOS separates documents);
the reference also trains the one position after each answer, we train the
answer only (the spec asks for answer-only loss).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..config import check
from .base import (GENERATORS, GENERATOR_PRESETS, Generator, GeneratorConfig, GeneratorPreset, Item, check_digits,
                   spans_mask)


@dataclass
class DepoConfig(GeneratorConfig):
    n_nodes: int = 10
    max_hops: int = 4
    n_queries: int = 4
    alphabet: int = 8
    word_len_min: int = 2
    word_len_max: int = 3
    hops: list[int] = field(default_factory=list)  # fixed hop counts to cycle through (eval); [] = uniform 1..max_hops
    n_nodes_dist: Literal["inverse_sqrt", "fixed"] = "inverse_sqrt"  # n per document: reference bias / always n_nodes
    distinct_sources: bool = True  # query sources without replacement, min(n, n_queries) of them (reference)
    length: int = 128  # symbols per document (padded)
    max_digits: int = 3

    def validate(self) -> None:
        super().validate()
        check(self.n_nodes >= 2, "n_nodes", f"must be >= 2, got {self.n_nodes}")
        check(self.n_nodes_dist in ("inverse_sqrt", "fixed"), "n_nodes_dist",
              f"must be 'inverse_sqrt' or 'fixed', got {self.n_nodes_dist!r}")
        check(self.n_nodes_dist == "fixed" or self.n_nodes >= 3, "n_nodes",
              f"n_nodes_dist=inverse_sqrt draws n from 3..n_nodes, so n_nodes must be >= 3, got {self.n_nodes}")
        check(self.max_hops >= 1, "max_hops", f"must be >= 1, got {self.max_hops}")
        check(self.n_queries >= 1, "n_queries", f"must be >= 1, got {self.n_queries}")
        check(self.alphabet >= 2, "alphabet", f"must be >= 2, got {self.alphabet}")
        check(1 <= self.word_len_min <= self.word_len_max, "word_len_min",
              f"must be in [1, word_len_max={self.word_len_max}], got {self.word_len_min}")
        n_words = sum(self.alphabet ** n for n in range(self.word_len_min, self.word_len_max + 1))
        check(n_words >= self.n_nodes, "n_nodes",
              f"only {n_words} distinct words exist for alphabet={self.alphabet} and word lengths "
              f"{self.word_len_min}..{self.word_len_max}, need {self.n_nodes}")
        for i, k in enumerate(self.hops):
            check(1 <= k <= self.max_hops, f"hops[{i}]", f"must be in [1, max_hops={self.max_hops}], got {k}")
        check(self.length >= self.max_instance_length, "length",
              f"must be >= {self.max_instance_length} to hold one instance (n_nodes * (1 + 2 * word_len_max) "
              f"+ n_queries * (2 + 2 * word_len_max)), got {self.length}")
        check_digits(self, 2 * self.alphabet + 3 + self.max_hops, "alphabet")

    @property
    def max_instance_length(self) -> int:
        w = self.word_len_max
        return self.n_nodes * (1 + 2 * w) + self.n_queries * (2 + 2 * w)

    def node_count_probs(self) -> tuple[np.ndarray, np.ndarray]:
        """Possible node counts and their probabilities (one value under ``fixed``)."""
        if self.n_nodes_dist == "fixed":
            return np.array([self.n_nodes]), np.array([1.0])
        ns = np.arange(3, self.n_nodes + 1)
        w = 1.0 / (ns + np.sqrt(self.n_nodes))
        return ns, w / w.sum()


@GENERATORS.register("depo", config=DepoConfig)
class Depo(Generator):
    """DEPO k-hop (Physics of LMs 4.1; Beyond Perplexity): cycle edges, then queries Q_k w -> k-th successor."""

    cfg: DepoConfig

    @property
    def vocab_size(self) -> int:
        return 2 * self.cfg.alphabet + 3 + self.cfg.max_hops

    @property
    def edge(self) -> int:
        return 2 * self.cfg.alphabet

    @property
    def answer(self) -> int:
        return 2 * self.cfg.alphabet + 1

    def query(self, k: int) -> int:
        return 2 * self.cfg.alphabet + 1 + k

    @property
    def pad(self) -> int:
        return 2 * self.cfg.alphabet + 2 + self.cfg.max_hops

    def words(self, rng: np.random.Generator, n: int) -> list[tuple[int, ...]]:
        """``n`` distinct words; candidates drawn in vectors, duplicates skipped."""
        c = self.cfg
        seen: set[tuple[int, ...]] = set()
        out: list[tuple[int, ...]] = []
        while len(out) < n:
            m = 2 * n
            lens = rng.integers(c.word_len_min, c.word_len_max + 1, m).tolist()
            letters = rng.integers(0, c.alphabet, (m, c.word_len_max)).tolist()
            for size, row in zip(lens, letters):
                w = tuple(row[:size])
                if w not in seen:
                    seen.add(w)
                    out.append(w)
                    if len(out) == n:
                        break
        return out

    def _enc(self, w: tuple[int, ...]) -> list[int]:
        return [*w[:-1], w[-1] + self.cfg.alphabet]

    def item(self, index: int) -> Item:
        c = self.cfg
        rng = self.rng(index)
        ns, probs = c.node_count_probs()
        n = int(ns[0]) if len(ns) == 1 else int(rng.choice(ns, p=probs))
        words = self.words(rng, n)  # cycle order: words[i] -> words[(i + 1) % n]
        out: list[int] = []
        enc = [self._enc(w) for w in words]
        for i in rng.permutation(n).tolist():
            out += [self.edge, *enc[i], *enc[(i + 1) % n]]
        spans, queries = [], []
        if c.distinct_sources:
            srcs = rng.choice(n, min(n, c.n_queries), replace=False).tolist()
            ks = rng.integers(1, c.max_hops + 1, len(srcs)).tolist()
        else:  # draw order of our earlier generator, so its documents are unchanged
            ks = rng.integers(1, c.max_hops + 1, c.n_queries).tolist()
            srcs = rng.integers(0, n, c.n_queries).tolist()
        for q in range(len(srcs)):
            k = c.hops[q % len(c.hops)] if c.hops else ks[q]
            src = srcs[q]
            dst = (src + k) % n
            out += [self.query(k), *enc[src], self.answer]
            a = len(out)
            out += enc[dst]
            spans.append((a, len(out)))
            queries.append({"k": k, "source": src, "target": dst})
        doc = np.full(c.length, self.pad, np.int64)
        doc[: len(out)] = out
        return Item(doc, spans_mask(c.length, spans), {"answer_spans": spans, "queries": queries, "n_nodes": n})

    def symbol_name(self, s: int) -> str:
        A = self.cfg.alphabet
        s = int(s)
        if s < A:
            return chr(ord("a") + s) if A <= 26 else f"a{s}"
        if s < 2 * A:
            return (chr(ord("a") + s - A) if A <= 26 else f"a{s - A}") + "."
        if s == self.edge:
            return "E"
        if s == self.answer:
            return "=>"
        if s == self.pad:
            return "_"
        return f"Q{s - 2 * A - 1}"

    def parse_words(self, seq: list[int], i: int) -> tuple[tuple[int, ...], int]:
        """Read one word starting at ``i``; returns (letters, index after it)."""
        A = self.cfg.alphabet
        w = []
        while True:
            x = seq[i]
            assert 0 <= x < 2 * A, f"position {i}: {x} is not a letter"
            i += 1
            if x >= A:
                w.append(x - A)
                return tuple(w), i
            w.append(x)

    def check(self, item: Item) -> None:
        c = self.cfg
        s = item.symbols.tolist()
        assert len(s) == c.length, f"length {len(s)} != {c.length}"
        n = int(item.meta.get("n_nodes", c.n_nodes))
        ns, _ = c.node_count_probs()
        assert n in ns.tolist(), f"{n} nodes is not a possible node count ({ns.tolist()})"
        succ: dict[tuple[int, ...], tuple[int, ...]] = {}
        i = 0
        for _ in range(n):
            assert s[i] == self.edge, f"position {i}: EDGE expected"
            u, i = self.parse_words(s, i + 1)
            v, i = self.parse_words(s, i)
            assert u not in succ, f"word {u} has two successors"
            succ[u] = v
        # one cycle through all nodes
        start = next(iter(succ))
        w, steps = start, 0
        while True:
            w = succ[w]
            steps += 1
            if w == start:
                break
            assert steps <= n
        assert steps == n, "edges do not form a single cycle"
        queries = item.meta["queries"]
        assert len(queries) == (min(n, c.n_queries) if c.distinct_sources else c.n_queries), "query count"
        if c.distinct_sources:
            assert len({q["source"] for q in queries}) == len(queries), "query sources repeat"
        spans = []
        for q in queries:
            k = s[i] - (2 * c.alphabet + 1)
            assert 1 <= k <= c.max_hops and k == q["k"], f"position {i}: bad query token"
            w, i = self.parse_words(s, i + 1)
            assert s[i] == self.answer, f"position {i}: ANSWER expected"
            target, j = self.parse_words(s, i + 1)
            for _ in range(k):
                w = succ[w]
            assert target == w, f"query at {i}: answer is not the {k}-th successor"
            spans.append((i + 1, j))
            i = j
        assert all(x == self.pad for x in s[i:]), "padding expected after the queries"
        assert [tuple(x) for x in item.meta["answer_spans"]] == spans


GENERATOR_PRESETS.register("depo_n10_k4_m4")(GeneratorPreset(
    "depo", {"n_nodes": 10, "max_hops": 4, "n_queries": 4, "length": 128},
    "Beyond Perplexity DEPO_n10_k4_m4 (<= 10 nodes, k <= 4, 4 queries)"))
