"""A recognizer for the storybook grammar: is this sentence one the grammar allows?

It is written independently of the generator (it parses, it does not
generate), so tests can check the generator against it and check that every
``sentence_bad`` of a minimal pair is rejected. It is a backtracking
recursive-descent parser over word positions; each rule returns every
position where it can end, with the features (number, gender) agreement
needs. The grammar it accepts (``[]`` optional, ``|`` alternatives)::

    S      -> [OPENER] NP[nom] VP[agree] "."  |  [OPENER] "there" BE[agree] DNP [PP] "."
            | DO[agree] NP[nom] VERB.base REST "?"  |  BE[agree] NP[nom] ["not"] ADJ "?"
            | "who" VP[sg] "?"  |  ("what"|"who") DO[agree] NP[nom] VERB.tr.base [ADJUNCT] "?"
            | "where" DO[agree] NP[nom] VERB.intr.base "?"
    NP     -> NAME | PRONOUN | DNP [MOD]            (MOD only on top-level NPs)
    DNP    -> DET ADJ{0,2} NOUN                      (DET agrees in number; a/an by sound)
    MOD    -> PREP NP[acc] | RELPREP(noun) NP[acc]   (PP, e.g. "the key to the cabinets")
            | "that" NP[nom] VERB.tr[agree RC subject]   (object relative, gap)
            | "that" VP[agree head]                      (subject relative)
    VP     -> VERB[agree] REST | DO[agree] "not" VERB.base REST | BE[agree] ["not"] ADJ
    REST   -> (intransitive | NP[acc] | REFLEXIVE[agree subject]) [ADJUNCT]
    ADJUNCT-> PREP NP[acc] [ADV] | ADV

Agreement: a present verb (``runs``/``run``), ``is/are``, ``was/were`` and
``does/do`` agree in number with their subject; ``did`` and past verbs do
not. A reflexive agrees in number and gender with the subject of its clause
(``c`` persons accept himself or herself). Selectional restrictions
("the ball sings") are the generator's business, not the checker's.
"""

from __future__ import annotations

import re
from functools import lru_cache

from . import lexicon as L

_NAMES = {n.lower(): g for n, g in L.NAMES.items()}
_NOUN_FORMS: dict[str, list[tuple[str, L.Noun]]] = {}
for _noun in L.NOUNS:
    _NOUN_FORMS.setdefault(_noun.sg, []).append(("sg", _noun))
    _NOUN_FORMS.setdefault(_noun.pl, []).append(("pl", _noun))
_VERB_FORMS: dict[str, list[tuple[str, L.Verb]]] = {}
for _verb in L.VERBS:
    for _form, _w in (("s3", _verb.s3), ("base", _verb.base), ("past", _verb.past)):
        _VERB_FORMS.setdefault(_w, []).append((_form, _verb))
_ADJ = set(L.ADJECTIVES)
_PREP = set(L.PREPOSITIONS)
_ADV = set(L.ADVERBS)
_DET_NUM = {**{d: "sg" for d in L.DET_SG}, "an": "sg", **{d: "pl" for d in L.DET_PL}, **{d: "*" for d in L.DET_ANY}}
_TOKEN = re.compile(r"[A-Za-z]+|[.,?]")


def tokenize(sentence: str) -> list[str]:
    """Lower-cased words and the punctuation marks , . ? as separate tokens."""
    return [t.lower() for t in _TOKEN.findall(sentence)]


def _num_ok(need: str, num: str) -> bool:
    return need == "*" or num == "*" or need == num


def _refl_ok(refl: str, num: str, gen: str) -> bool:
    rnum, rgen = L.REFLEXIVES[refl]
    if rnum != num:
        return False
    if rnum == "pl":
        return True
    return rgen == gen or (gen == "c" and rgen in "mf") or gen == "*"


class _Parser:
    def __init__(self, toks: list[str]):
        self.t = toks
        self.n = len(toks)

    def w(self, i: int) -> str:
        return self.t[i] if i < self.n else ""

    # ---- noun phrases: yield (end, num, gender)
    def dnp(self, i: int):
        det = self.w(i)
        if det not in _DET_NUM:
            return
        dnum = _DET_NUM[det]
        j = i + 1
        for n_adj in range(3):
            if n_adj and self.w(j - 1) not in _ADJ:
                break
            for num, noun in _NOUN_FORMS.get(self.w(j), ()):
                if not _num_ok(dnum, num):
                    continue
                if det in ("a", "an") and det != L.article_for(self.w(i + 1)):
                    continue
                yield j + 1, num, noun
            j += 1

    def np(self, i: int, case: str, top: bool):
        w = self.w(i)
        if w in _NAMES:
            yield i + 1, "sg", _NAMES[w]
        prons = L.PRONOUN_NOM if case == "nom" else L.PRONOUN_ACC
        if w in prons:
            num, gen = prons[w]
            yield i + 1, num, gen
        for j, num, noun in self.dnp(i):
            yield j, num, noun.gender
            if top:
                for k in self.modifier(j, num, noun):
                    yield k, num, noun.gender

    def modifier(self, i: int, num: str, noun: L.Noun):
        w = self.w(i)
        if w in _PREP or (noun.rel is not None and w == noun.rel):
            for k, _, _ in self.np(i + 1, "acc", False):
                yield k
        if w == "that":
            for k, rnum, _ in self.np(i + 1, "nom", False):  # object relative: "that the girls like"
                for form, verb in _VERB_FORMS.get(self.w(k), ()):
                    if verb.kind == "tr" and self.finite_ok(form, rnum):
                        yield k + 1
            yield from self.vp(i + 1, num, noun.gender, nested=True)  # subject relative: "that likes the cats"

    # ---- verb phrases: yield end
    @staticmethod
    def finite_ok(form: str, num: str) -> bool:
        return form == "past" or (form == "s3" and num == "sg") or (form == "base" and num == "pl")

    def vp(self, i: int, num: str, gen: str, nested: bool = False):
        w = self.w(i)
        for form, verb in _VERB_FORMS.get(w, ()):
            if self.finite_ok(form, num):
                yield from self.rest(i + 1, verb, num, gen, nested)
        if w in L.BE and _num_ok(L.BE[w][0], num):
            j = i + 2 if self.w(i + 1) == "not" else i + 1
            if self.w(j) in _ADJ:
                yield j + 1
        if w in L.DO and _num_ok(L.DO[w][0], num) and self.w(i + 1) == "not":
            for form, verb in _VERB_FORMS.get(self.w(i + 2), ()):
                if form == "base":
                    yield from self.rest(i + 3, verb, num, gen, nested)

    def rest(self, i: int, verb: L.Verb, num: str, gen: str, nested: bool):
        if verb.kind == "intr":
            ends = [i]
        else:
            ends = [k for k, _, _ in self.np(i, "acc", not nested)]
            w = self.w(i)
            if w in L.REFLEXIVES and _refl_ok(w, num, gen):
                ends.append(i + 1)
        for e in ends:
            yield from self.adjunct(e)

    def adjunct(self, i: int):
        yield i
        if self.w(i) in _ADV:
            yield i + 1
        if self.w(i) in _PREP:
            for k, _, _ in self.np(i + 1, "acc", False):
                yield k
                if self.w(k) in _ADV:
                    yield k + 1

    # ---- sentences
    def opener_ends(self) -> list[int]:
        ends = [0]
        for op in L.OPENERS:
            if tuple(self.t[: len(op)]) == op:
                ends.append(len(op))
        return ends

    def declarative(self, end: int) -> bool:
        for i in self.opener_ends():
            for j, num, gen in self.np(i, "nom", True):
                if end in self.vp(j, num, gen):
                    return True
            if self.w(i) == "there" and self.w(i + 1) in L.BE:
                bnum = L.BE[self.w(i + 1)][0]
                for j, num, noun in self.dnp(i + 2):
                    if num == bnum and (j == end or end in self.modifier(j, num, noun)):
                        return True
        return False

    def question(self, end: int) -> bool:
        w0 = self.w(0)
        if w0 in L.DO:
            for j, num, gen in self.np(1, "nom", True):
                if _num_ok(L.DO[w0][0], num):
                    for form, verb in _VERB_FORMS.get(self.w(j), ()):
                        if form == "base" and end in self.rest(j + 1, verb, num, gen, False):
                            return True
        if w0 in L.BE:
            for j, num, _ in self.np(1, "nom", True):
                if _num_ok(L.BE[w0][0], num):
                    k = j + 1 if self.w(j) == "not" else j
                    if self.w(k) in _ADJ and k + 1 == end:
                        return True
        if w0 == "who" and end in self.vp(1, "sg", "c"):
            return True
        if w0 in ("what", "who", "where") and self.w(1) in L.DO:
            for j, num, _ in self.np(2, "nom", True):
                if not _num_ok(L.DO[self.w(1)][0], num):
                    continue
                for form, verb in _VERB_FORMS.get(self.w(j), ()):
                    if form != "base":
                        continue
                    if w0 == "where" and verb.kind == "intr" and j + 1 == end:
                        return True
                    if w0 != "where" and verb.kind == "tr" and end in self.adjunct(j + 1):
                        return True
        return False


@lru_cache(maxsize=65536)
def is_grammatical(sentence: str) -> bool:
    """True iff ``sentence`` (one sentence, capitalised, ending in . or ?) is generated by the storybook grammar."""
    if not sentence or not sentence[0].isupper():
        return False
    toks = tokenize(sentence)
    if len(toks) < 3 or toks[-1] not in (".", "?") or "".join(ch for ch in sentence if not ch.isspace()) != \
            "".join(_TOKEN.findall(sentence)):
        return False  # stray characters the grammar never makes
    p = _Parser(toks[:-1])
    return p.declarative(p.n) if toks[-1] == "." else p.question(p.n)


def split_sentences(story: str) -> list[str]:
    """A story's sentences (the generator ends each with '.' or '?' followed by a space or the end)."""
    return [s for s in re.split(r"(?<=[.?])\s+", story.strip()) if s]
