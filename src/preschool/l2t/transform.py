"""The L2T transform: one document (+ the previous one) -> formatted samples.

:class:`L2TTransform` is a pure function of ``(config, document index, text,
previous document's text)``: all randomness comes from
``numpy.random.default_rng([seed, index, salt])``, and the distractor source for
Last/Deletion is the previous document *in input order* (the reference uses the
last document its worker happened to process). So any worker count, any engine
(multiprocessing, ``datasets.map(num_proc=N)``, a datatrove step) and any shard
boundary gives the same samples, provided each document arrives with its
predecessor's text.

Per document (spec section 1.0, reference code behaviour):
1. split into sentences (``splitter``), drop empty lines;
2. draw ONE task uniformly among the configured tasks the document is eligible
   for (sentence count, previous document present);
3. chunk with "loose chunking" (``count // chunk_tokens + 1`` blocks of
   ``ceil(S/n)`` sentences; Fill Middle uses ``2 * (count // chunk_tokens) + 1``);
   ``count`` is an estimate of the corpus tokenizer's token count (the
   reference reads smollm-corpus's ``metadata.token_count``; ``estimate``:
   4/3 tokens per word), the run's own tokenizer count (``tokenizer``), or
   ``chars / chars_per_token`` (``chars``; the CLI measures chars_per_token of
   the run's tokenizer on the input, so chunks are sized in the run's tokens
   at the cost of no extra tokenization);
4. apply the task to every chunk; chunks under ``min_num_words`` are skipped;
5. join each pair as ``prompt\\n\\n<prefix> completion``.

Every skipped chunk or document is counted under ``<task>/<reason>``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..config import check, from_dict
from ..corpora.base import chunk_lines
from .base import L2T_TASKS, Chunk, Context, Skip, Task
from .format import ANSWER_PREFIXES, join
from .text import STOPWORDS, chunk_sentences, estimate_tokens, split_sentences, word_pool
from . import tasks as _tasks  # noqa: F401  (registers the 14 tasks)
from ..seeds import L2T_DOCUMENT

ALL_TASKS: tuple[str, ...] = (
    "char_count", "masked_char", "space", "typo",
    "last", "masked_word", "random", "shuffle", "token_type",
    "deletion", "reordering",
    "fill_middle", "half", "one",
)
_SALT = L2T_DOCUMENT


@dataclass
class L2TConfig:
    """What the transform does to each document."""

    tasks: list[str] = field(default_factory=lambda: list(ALL_TASKS))
    task_params: dict[str, dict] = field(default_factory=dict)  # per-task config overrides
    seed: int = 0
    min_num_words: int = 20
    chunk_tokens: int = 512
    count_tokens: Literal["estimate", "tokenizer", "chars"] = "estimate"
    chars_per_token: float = 4.0  # count_tokens "chars": tokens = ceil(chars / chars_per_token)
    splitter: Literal["blingfire", "rules"] = "blingfire"
    # A "sentence" longer than this (text without sentence ends) is cut at spaces, so one
    # pathological sentence cannot be copied into every chunk (Deletion/Last distractors).
    max_sentence_chars: int = 20_000
    word_pool: Literal["gcide", "web2", "corpus"] = "gcide"
    answer_prefixes: bool = True
    # Reference: a forced single task with no previous document uses the current one as distractor source.
    self_distractor_when_single: bool = True

    def validate(self) -> None:
        check(len(self.tasks) > 0, "tasks", "need at least one task")
        for i, t in enumerate(self.tasks):
            L2T_TASKS.get(t, f"tasks[{i}]")
        check(len(set(self.tasks)) == len(self.tasks), "tasks", "tasks listed twice")
        for t in self.task_params:
            L2T_TASKS.get(t, f"task_params.{t}")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        check(self.min_num_words >= 0, "min_num_words", f"must be >= 0, got {self.min_num_words}")
        check(self.chunk_tokens >= 1, "chunk_tokens", f"must be >= 1, got {self.chunk_tokens}")
        check(self.chars_per_token > 0, "chars_per_token", f"must be > 0, got {self.chars_per_token}")
        check(self.max_sentence_chars >= 100, "max_sentence_chars", f"must be >= 100, got {self.max_sentence_chars}")


@dataclass
class Sample:
    task: str
    text: str
    answer_start: int  # character offset of the completion in ``text``
    chunk: int  # chunk index within the document


@dataclass
class DocResult:
    index: int
    task: str | None
    samples: list[Sample]
    drops: Counter


class L2TTransform:
    """Callable ``(index, text, prev_text) -> DocResult``; picklable, holds no mutable state."""

    def __init__(self, cfg: L2TConfig | dict | None = None, pool: tuple[str, ...] | None = None, tokenizer=None):
        if not isinstance(cfg, L2TConfig):
            cfg = from_dict(L2TConfig, cfg or {})
        self.cfg = cfg
        self.tasks: dict[str, Task] = {}
        for name in cfg.tasks:
            params = {"min_num_words": cfg.min_num_words, **cfg.task_params.get(name, {})}
            self.tasks[name] = L2T_TASKS.build(name, params, f"task_params.{name}")
        if pool is None and "random" in self.tasks:
            if cfg.word_pool == "corpus":
                raise ValueError("word_pool 'corpus' needs pool=corpus_pool(texts) passed to L2TTransform")
            pool = word_pool(cfg.word_pool)
        self.pool = tuple(pool or ())
        self.tokenizer = tokenizer
        if cfg.count_tokens == "tokenizer" and tokenizer is None:
            raise ValueError("count_tokens 'tokenizer' needs a tokenizer passed to L2TTransform")
        self.prefixes = ANSWER_PREFIXES if cfg.answer_prefixes else ("",)

    def rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng([self.cfg.seed, int(index), _SALT])

    def sentences(self, text: str) -> list[str]:
        """The splitter's sentences, each over ``max_sentence_chars`` cut at sentence ends or spaces."""
        out = split_sentences(text, self.cfg.splitter)
        limit = self.cfg.max_sentence_chars
        if any(len(x) > limit for x in out):
            out = list(chunk_lines(out, "lines", limit, limit))
        return out

    def token_count(self, text: str) -> int:
        if self.cfg.count_tokens == "tokenizer":
            return len(self.tokenizer.encode(text, add_special_tokens=False).ids)
        if self.cfg.count_tokens == "chars":
            return math.ceil(len(text) / self.cfg.chars_per_token)
        return estimate_tokens(text)

    def __call__(self, index: int, text: str, prev_text: str | None = None, *,
                 sentences: list[str] | None = None, prev_sentences: list[str] | None = None) -> DocResult:
        """Samples of document ``index``; ``sentences``/``prev_sentences`` are optional caches."""
        drops: Counter = Counter()
        sents = sentences if sentences is not None else self.sentences(text)
        if not sents:
            drops["document/no_sentences"] += 1
            return DocResult(index, None, [], drops)
        has_prev = prev_text is not None
        single = len(self.tasks) == 1
        if not has_prev and single and self.cfg.self_distractor_when_single:
            prev_text, prev_sentences, has_prev = text, sents, True
        rng = self.rng(index)
        candidates = [n for n, t in self.tasks.items() if t.eligible(len(sents), has_prev)]
        if not candidates:
            drops["document/no_eligible_task"] += 1
            return DocResult(index, None, [], drops)
        name = candidates[int(rng.integers(len(candidates)))]
        task = self.tasks[name]
        if task.needs_prev and prev_sentences is None:
            prev_sentences = self.sentences(prev_text or "")
        ctx = Context(prev_sentences=prev_sentences, word_pool=self.pool, stopwords=STOPWORDS)
        blocks = chunk_sentences(sents, self.token_count(text), self.cfg.chunk_tokens, fine=task.fine_chunks)
        samples: list[Sample] = []
        for ci, block in enumerate(blocks):
            try:
                pair = task.make(Chunk(block), rng, ctx)
            except Skip as s:
                drops[f"{name}/{s.reason}"] += 1
                continue
            f = join(pair.prompt, pair.completion, rng, self.prefixes)
            samples.append(Sample(name, f.text, f.answer_start, ci))
        return DocResult(index, name, samples, drops)
