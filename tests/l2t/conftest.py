import numpy as np
import pytest

from preschool.l2t.base import L2T_TASKS, Chunk, Context
from preschool.l2t.text import STOPWORDS

SENTS = ["The quick brown fox jumps over the lazy dog.", "It was 3 o'clock, and Mary left the house!",
         "Nobody saw her go."]
PREV = ["A storm came in from the west.", "The boats stayed in the harbour all day."]
POOL = ("apple", "river", "stone", "cloud")


@pytest.fixture(scope="session")
def run_task():
    """run_task(name, sentences=SENTS, seed=7, prev=PREV, **params) -> Pair (min_num_words 0 unless given)."""

    def run(name, sentences=None, seed=7, prev=PREV, pool=POOL, **params):
        params.setdefault("min_num_words", 0)
        task = L2T_TASKS.build(name, params)
        ctx = Context(prev_sentences=prev, word_pool=pool, stopwords=STOPWORDS)
        return task.make(Chunk(list(sentences or SENTS)), np.random.default_rng(seed), ctx)

    return run


@pytest.fixture
def sents():
    return list(SENTS)
