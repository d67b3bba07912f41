"""Offline text utilities for L2T: sentence splitting, chunking, stopwords, word pool.

Sentence splitting (``splitter``):

- ``blingfire`` (default): Bling Fire's ``text_to_sentences``, the splitter the
  reference uses. Its model ships inside the ``blingfire`` wheel (no download),
  it is a compiled finite-state machine (~10 MB/s per core) and it matches the
  reference's sentence boundaries exactly.
- ``rules``: our pure-Python rule-based splitter (no dependency): paragraph
  breaks, then ``.``/``!``/``?`` runs (with closing quotes/brackets) followed by
  whitespace and an upper-case letter, digit or opening quote, except after
  common abbreviations and initials. For environments without Bling Fire; its
  boundaries differ from the reference's on hard cases.

As in the reference, the splitter's output is split on newlines and empty lines
are dropped; we also strip each sentence (Bling Fire already trims them).

Stopwords: NLTK's English list (the reference loads it with ``nltk.corpus``;
here it is a constant, so nothing is downloaded). Random-word pool: the
reference samples 100k WordNet noun/verb/adjective lemmas at import time
(unseeded); we use the single-word, alphabetic, lower-case GCIDE dictionary
headwords shipped by the ``english-words`` package (``pool="gcide"``, default),
or the corpus's own vocabulary (``pool="corpus"``, :func:`corpus_pool`).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from typing import Iterable

from ..errors import ConfigError, MissingDependency

# NLTK 3.9 English stopword list (198 words), lower case.
STOPWORDS: frozenset[str] = frozenset("""
a about above after again against ain all am an and any are aren aren't as at be because been before being
below between both but by can couldn couldn't d did didn didn't do does doesn doesn't doing don don't down
during each few for from further had hadn hadn't has hasn hasn't have haven haven't having he he'd he'll he's
her here hers herself him himself his how i i'd i'll i'm i've if in into is isn isn't it it'd it'll it's its
itself just ll m ma me mightn mightn't more most mustn mustn't my myself needn needn't no nor not now o of off
on once only or other our ours ourselves out over own re s same shan shan't she she'd she'll she's should
should've shouldn shouldn't so some such t than that that'll the their theirs them themselves then there these
they they'd they'll they're they've this those through to too under until up ve very was wasn wasn't we we'd
we'll we're we've were weren weren't what when where which while who whom why will with won won't wouldn
wouldn't y you you'd you'll you're you've your yours yourself yourselves
""".split())

_ABBREV = frozenset("""
mr mrs ms dr prof sr jr st mt vs etc inc ltd co corp gen col capt lt sgt rev hon messrs mme mlle no nos vol
vols fig figs p pp ed eds approx dept est jan feb mar apr jun jul aug sep sept oct nov dec e.g i.e cf al
""".split())
_BOUNDARY = re.compile(r"([.!?]+[\"'\u201d\u2019)\]]*)(\s+)(?=[\"'\u201c\u2018(\[]?[A-Z0-9\u00C0-\u024F])")
_PARA = re.compile(r"\n\s*\n")


def split_rules(text: str) -> list[str]:
    """Rule-based sentence splitter (see module docstring); newline-free sentences."""
    out: list[str] = []
    for para in _PARA.split(text):
        para = " ".join(para.split())
        if not para:
            continue
        start = 0
        for m in _BOUNDARY.finditer(para):
            end = m.end(1)
            before = para[start:m.start(1)].rsplit(" ", 1)[-1]
            word = before.lower().lstrip("\"'(\u201c\u2018[")
            if m.group(1) == "." and (word in _ABBREV or (len(word) == 1 and word.isalpha())):
                continue  # "Mr. Smith", "J. Smith"
            out.append(para[start:end])
            start = m.end()
        if start < len(para):
            out.append(para[start:])
    return [s for s in (x.strip() for x in out) if s]


def split_blingfire(text: str) -> list[str]:
    try:
        import blingfire
    except ImportError:
        raise MissingDependency("blingfire", purpose="L2T sentence splitting (or use splitter: rules)") from None
    # Bling Fire's C side stops at NUL; replace it so the rest of the text is kept.
    out = blingfire.text_to_sentences(text.replace("\x00", " "))
    return [s for s in (x.strip() for x in out.split("\n")) if s]


SPLITTERS = {"blingfire": split_blingfire, "rules": split_rules}


def split_sentences(text: str, splitter: str = "blingfire") -> list[str]:
    try:
        fn = SPLITTERS[splitter]
    except KeyError:
        raise ConfigError("splitter", f"unknown splitter {splitter!r} (known: {sorted(SPLITTERS)})") from None
    return fn(text)


def estimate_tokens(text: str) -> int:
    """Approximate corpus-tokenizer count (~4/3 tokens per word, GPT-2-class BPE on English)."""
    return (4 * len(text.split()) + 2) // 3


def chunk_sentences(sentences: list[str], token_count: int, target: int = 512, fine: bool = False) -> list[list[str]]:
    """Reference "loose chunking": ``n = count // target + 1`` blocks of ``ceil(S/n)`` sentences.

    ``fine`` (Fill Middle): ``n = 2 * (count // target) + 1`` blocks.
    """
    if not sentences:
        return []
    n = 2 * (token_count // target) + 1 if fine else token_count // target + 1
    size = max(1, math.ceil(len(sentences) / n))
    return [sentences[i:i + size] for i in range(0, len(sentences), size)]


@functools.lru_cache(maxsize=4)
def word_pool(source: str = "gcide") -> tuple[str, ...]:
    """Sorted replacement-word pool from packaged data (no download)."""
    if source not in ("gcide", "web2"):
        raise ConfigError("word_pool", f"unknown packaged pool {source!r} (known: gcide, web2, corpus)")
    try:
        from english_words import get_english_words_set
    except ImportError:
        raise MissingDependency("english-words", purpose="the L2T Random task's word pool") from None
    words = get_english_words_set([source], lower=True, alpha=False)
    return tuple(sorted(w for w in words if w.isascii() and w.isalpha() and 2 <= len(w) <= 20))


def corpus_pool(texts: Iterable[str], min_count: int = 3, max_words: int = 100_000) -> tuple[str, ...]:
    """Pool from a corpus's own vocabulary: alphabetic lower-cased words seen ``min_count``+ times.

    The most frequent ``max_words`` are kept, returned sorted (ties broken by the word).
    """
    c: Counter[str] = Counter()
    for t in texts:
        c.update(w.lower() for w in t.split() if w.isalpha())
    words = sorted((w for w, n in c.items() if n >= min_count), key=lambda w: (-c[w], w))[:max_words]
    return tuple(sorted(words))


def chars_per_token(tok, texts, max_chars: int = 2_000_000) -> float:
    """Mean characters per token of ``tok`` on the first ``max_chars`` characters of ``texts``."""
    chars = toks = 0
    for t in texts:
        t = t[: max_chars - chars]
        chars += len(t)
        toks += len(tok.encode(t, add_special_tokens=False).ids)
        if chars >= max_chars:
            break
    return round(chars / toks, 4) if toks else 4.0
