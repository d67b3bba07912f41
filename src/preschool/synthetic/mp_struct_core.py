"""MP-Struct Core: X-bar-like trees with movement/agreement dependencies and head markers.

Follows Mita et al. 2026 ("Language Acquisition Device in LLMs", osekilab/LAD-PPT,
``src/mp_struct_core.py`` at commit 9bee317) as ported by verify-ppt
(``preprocessing/src/tokenize_mpstruct_core.py``):

- 5 bracket types (``k_struct=1`` + ``k_dep=4``): type t opens with symbol t and
  closes with t + 5. Type 0 is the structural constituent bracket, 1 = MOVE,
  2 / 3 = AGREE variant A / B, 4 = SELECT (a local pair);
- head markers ("functional landmarks"): HEAD_CP = 10, HEAD_TP = 11,
  HEAD_VP = 12; LEAF = 13 is in the vocabulary (14 symbols);
- one sentence = CP[Spec-CP, C head, TP[Spec-TP, T head, VP[shuffled V head,
  subject slot, argument]]], with movement (p = 0.5) leaving an empty Spec-TP,
  a MOVE-close in the VP subject slot and the subject DP under Spec-CP: 37
  symbols without movement, 41 with;
- ``use_complex_args`` (default False, as in LAD-PPT and verify-ppt): each VP
  draws 0, 1 or 2 arguments (intransitive / transitive / ditransitive), each a
  bracket around a local pair (8 symbols), and the V head, the subject slot and
  all the arguments are shuffled together (a uniform order of 2 + n elements),
  as the reference does. The spec only says "0-2 arguments are drawn"; the
  reference draws one uniform r and takes 0 if r < 0.33, 1 if r < 0.66, else 2,
  so ``complex_arg_probs`` defaults to (0.33, 0.33, 0.34) (set (1/3, 1/3, 1/3)
  for the uniform reading). Sentences are then 29 / 37 / 45 symbols without
  movement and 33 / 41 / 49 with; ``meta["arg_counts"]`` counts the sentences
  with 0, 1, 2 arguments. With the option off no extra random draw is made,
  so documents are byte-identical to those made before the option existed;
- sentences are concatenated until ``length`` symbols and the stream is cut
  there (the last sentence is usually truncated), as the reference does.

``markers`` selects the ablation: ``heads`` (the paper, distinct HEAD_* per
projection = LAD-PPT ``use_head_diversity=True``), ``none`` (no head symbols
at all: 34 / 38 symbols per sentence = ``use_head_diversity=False``, which
emits no head tokens) or ``uniform`` (every head is the same LEAF symbol 13;
our own ablation, no reference flag). Departures:
the reference seeds one ``random.Random(42)`` for the whole stream; here each
document is a pure function of (seed, index), and every document starts at a
sentence boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Literal

import numpy as np

from ..config import check
from .base import GENERATORS, GENERATOR_PRESETS, Generator, GeneratorConfig, GeneratorPreset, Item

STRUCT, MOVE, AGREE_A, AGREE_B, SELECT = 0, 1, 2, 3, 4
N_TYPES = 5
HEAD_CP, HEAD_TP, HEAD_VP, LEAF = 10, 11, 12, 13
_NAMES = {HEAD_CP: "C", HEAD_TP: "T", HEAD_VP: "V", LEAF: "H"}
_TYPE_NAMES = ["", "mv", "agA", "agB", "sel"]
_PERMS = list(permutations(range(3)))
_ORDERS = {n: list(permutations(range(n))) for n in (2, 3, 4)}  # VP orders of 2 + n_args elements
ARG_LEN = 8  # one argument: a structural bracket around a local pair


@dataclass
class MPStructCoreConfig(GeneratorConfig):
    length: int = 2048  # symbols per document
    p_move: float = 0.5
    markers: Literal["heads", "uniform", "none"] = "heads"  # heads / none = LAD-PPT use_head_diversity True / False; uniform: ours
    max_digits: int = 3
    use_complex_args: bool = False  # VP draws 0-2 arguments (LAD-PPT use_complex_args); off = exactly one
    complex_arg_probs: tuple[float, float, float] = (0.33, 0.33, 0.34)  # P(0, 1, 2 args) when on; reference thresholds

    def validate(self) -> None:
        super().validate()
        check(0.0 <= self.p_move <= 1.0, "p_move", f"must be in [0, 1], got {self.p_move}")
        p = tuple(self.complex_arg_probs)
        check(len(p) == 3 and all(x >= 0.0 for x in p) and abs(sum(p) - 1.0) < 1e-6, "complex_arg_probs",
              f"must be 3 non-negative probabilities of 0, 1, 2 arguments summing to 1, got {p}")
        check(self.length >= 1, "length", f"must be >= 1, got {self.length}")


def _close(t: int) -> int:
    return t + N_TYPES


@GENERATORS.register("mp_struct_core", config=MPStructCoreConfig)
class MPStructCore(Generator):
    """MP-Struct Core sentences (Mita et al. 2026; verify-ppt port), cut to ``length`` symbols."""

    cfg: MPStructCoreConfig

    @property
    def vocab_size(self) -> int:
        return 14

    def _head(self, h: int) -> list[int]:
        m = self.cfg.markers
        return [] if m == "none" else [LEAF] if m == "uniform" else [h]

    def sentence(self, move: bool, agree: int, perm: tuple[int, ...]) -> list[int]:
        """One tree; ``agree`` is AGREE_A or AGREE_B.

        ``perm`` orders the VP's parts: 0 = V head, 1 = subject slot, 2.. = the
        arguments, so ``len(perm) - 2`` is the number of arguments (1 by default).
        """
        o, c = STRUCT, _close(STRUCT)
        local_pair = [o, SELECT, c, o, _close(SELECT), c]
        v_head = [o, *self._head(HEAD_VP), c]
        subj_slot = [o, _close(MOVE), c] if move else [o, c]
        arg = [o, *local_pair, c]
        parts = (v_head, subj_slot, *[arg] * (len(perm) - 2))
        vp = [o, *(x for i in perm for x in parts[i]), c]
        t_head = [o, *self._head(HEAD_TP), _close(agree), c]
        dp = [o, agree, *local_pair, c]
        tp = [o, *([o, c] if move else dp), *t_head, *vp, c]
        c_head = [o, *self._head(HEAD_CP), *([MOVE] if move else []), c]
        spec_cp = [o, *dp, c] if move else [o, c]
        return [o, *spec_cp, *c_head, *tp, c]

    def sentence_length(self, move: bool, n_args: int = 1) -> int:
        return (41 if move else 37) + ARG_LEN * (n_args - 1) - (3 if self.cfg.markers == "none" else 0)

    def item(self, index: int) -> Item:
        c = self.cfg
        rng = self.rng(index)
        fewest = 0 if c.use_complex_args else 1
        n_max = c.length // self.sentence_length(False, fewest) + 2  # enough sentences to pass length
        move = (rng.random(n_max) < c.p_move).tolist()
        agree = rng.integers(AGREE_A, AGREE_B + 1, n_max).tolist()
        if c.use_complex_args:  # draws only when on: the default stream is unchanged
            cuts = np.cumsum(c.complex_arg_probs)[:2]  # reference: r < 0.33 -> 0, r < 0.66 -> 1, else 2
            n_args = np.searchsorted(cuts, rng.random(n_max), side="right").tolist()
            perm = rng.integers(0, [len(_ORDERS[2 + k]) for k in n_args]).tolist()
        else:
            n_args = [1] * n_max
            perm = rng.integers(0, len(_PERMS), n_max).tolist()
        out: list[int] = []
        n = 0
        while len(out) < c.length:
            out.extend(self.sentence(move[n], agree[n], _ORDERS[2 + n_args[n]][perm[n]]))
            n += 1
        meta = {"sentences": n, "moves": int(sum(move[:n])), "truncated_last": len(out) > c.length}
        if c.use_complex_args:
            meta["arg_counts"] = [n_args[:n].count(k) for k in range(3)]
        return Item(np.asarray(out[: c.length], np.int64), None, meta)

    def symbol_name(self, s: int) -> str:
        if s in _NAMES:
            return _NAMES[s]
        return f"[{_TYPE_NAMES[s]}" if s < N_TYPES else f"]{_TYPE_NAMES[s - N_TYPES]}"

    def check(self, item: Item) -> None:
        c = self.cfg
        s = item.symbols.tolist()
        assert len(s) == c.length, f"length {len(s)} != {c.length}"
        assert min(s) >= 0 and max(s) < self.vocab_size
        if c.markers == "none":
            assert not set(s) & {HEAD_CP, HEAD_TP, HEAD_VP, LEAF}
        # Split into sentences at structural depth 0 and check each complete one.
        start, depth, n_full = 0, 0, 0
        full_args = [0, 0, 0]
        for i, x in enumerate(s):
            if x == STRUCT:
                depth += 1
            elif x == _close(STRUCT):
                depth -= 1
                assert depth >= 0, f"position {i}: structural bracket closes below depth 0"
                if depth == 0:
                    full_args[self._check_sentence(s[start: i + 1], start)] += 1
                    n_full += 1
                    start = i + 1
            else:
                assert depth > 0, f"position {i}: symbol outside a constituent"
        assert n_full + (start < len(s)) == item.meta["sentences"]
        if c.use_complex_args:
            counts = item.meta["arg_counts"]
            assert sum(counts) == item.meta["sentences"], "arg_counts must count every sentence"
            assert all(a <= b for a, b in zip(full_args, counts)), f"arg counts {full_args} vs meta {counts}"

    def _check_sentence(self, t: list[int], at: int) -> int:
        """Check one complete tree; returns its number of VP arguments."""
        where = f"sentence at {at}"
        move = MOVE in t
        n_args = t.count(SELECT) - 1  # the subject DP holds one local pair, each argument one
        if self.cfg.use_complex_args:
            assert n_args in (0, 1, 2) and self.cfg.complex_arg_probs[n_args] > 0, f"{where}: {n_args} arguments"
        else:
            assert n_args == 1, f"{where}: {n_args} arguments without use_complex_args"
        assert len(t) == self.sentence_length(move, n_args), f"{where}: length {len(t)}"
        m = self.cfg.markers
        heads = [HEAD_CP, HEAD_TP, HEAD_VP]
        if m == "heads":
            assert [x for x in t if x in heads] == heads, f"{where}: head markers out of order"
        elif m == "uniform":
            assert t.count(LEAF) == 3 and not set(t) & set(heads), f"{where}: uniform heads"
        # Each dependency opens before it closes, once per sentence (SELECT once per local pair).
        for typ, n in ((MOVE, int(move)), (SELECT, 1 + n_args)):
            assert t.count(typ) == n == t.count(_close(typ)), f"{where}: type {typ} count"
        ag = [x for x in (AGREE_A, AGREE_B) if x in t]
        assert len(ag) == 1 and t.count(ag[0]) == 1 and t.count(_close(ag[0])) == 1, f"{where}: agreement"
        for typ in (MOVE, ag[0]):
            if typ in t:
                assert t.index(typ) < t.index(_close(typ)), f"{where}: type {typ} closes before it opens"
        # The VP (third child of TP, itself third child of CP) holds exactly the V head, the
        # subject slot and n_args arguments (a bracket around a local pair each), in some order.
        cp = _parse(t)
        assert len(cp) == 3 and isinstance(cp[2], list) and len(cp[2]) == 3, f"{where}: CP / TP shape"
        vp = cp[2][2]
        assert isinstance(vp, list), f"{where}: VP is not a constituent"
        want = [self._head(HEAD_VP), [_close(MOVE)] if move else [], *[[[SELECT], [_close(SELECT)]]] * n_args]
        assert sorted(map(repr, vp)) == sorted(map(repr, want)), f"{where}: VP {vp}"
        return n_args


def _parse(t: list[int]) -> list:
    """A balanced tree as nested lists: each structural bracket a list, other symbols ints."""
    stack: list[list] = [[]]
    for x in t:
        if x == STRUCT:
            stack.append([])
        elif x == _close(STRUCT):
            node = stack.pop()
            stack[-1].append(node)
        else:
            stack[-1].append(x)
    return stack[0][0]


GENERATOR_PRESETS.register("mpstruct_core_verify_ppt")(GeneratorPreset(
    "mp_struct_core", {"length": 2048, "markers": "heads"},
    "verify-ppt MP-Struct Core (2048 ids, head markers)"))
GENERATOR_PRESETS.register("mpstruct_core_lad1024")(GeneratorPreset(
    "mp_struct_core", {"length": 1024, "markers": "heads"},
    "LAD-PPT defaults (1024 ids per line)"))
