import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from preschool.errors import ConfigError
from preschool.l2t.transform import ALL_TASKS, L2TConfig, L2TTransform
from preschool.config import from_dict

DOC = " ".join(f"Sentence {i} has a few words in it, about the river and the sea." for i in range(40))
PREV = "The old man walked slowly. He was tired of the road. Rain fell all day on the town."


@pytest.fixture(scope="module")
def tf():
    return L2TTransform({"min_num_words": 5, "chunk_tokens": 64})


def test_registry_has_all_14():
    from preschool.l2t.base import L2T_TASKS

    assert sorted(ALL_TASKS) == L2T_TASKS.names() and len(ALL_TASKS) == 14


def test_deterministic_and_seeded(tf):
    a, b = tf(5, DOC, PREV), tf(5, DOC, PREV)
    assert [s.text for s in a.samples] == [s.text for s in b.samples] and a.samples
    other = L2TTransform({"min_num_words": 5, "chunk_tokens": 64, "seed": 1})
    texts = {tuple(s.text for s in other(i, DOC, PREV).samples) for i in range(5)}
    assert texts != {tuple(s.text for s in tf(i, DOC, PREV).samples) for i in range(5)}


def test_one_task_per_document_all_chunks(tf):
    r = tf(3, DOC, PREV)
    assert {s.task for s in r.samples} == {r.task}
    assert len(r.samples) > 1


@pytest.mark.parametrize("n_sents,has_prev,expected", [
    (1, False, set(ALL_TASKS) - {"last", "deletion", "fill_middle", "reordering"}),  # 10
    (1, True, set(ALL_TASKS) - {"last", "deletion", "fill_middle", "reordering"}),
    (2, False, set(ALL_TASKS) - {"last", "deletion", "fill_middle", "reordering"}),
    (2, True, set(ALL_TASKS) - {"fill_middle", "reordering"}),  # 12
    (3, True, set(ALL_TASKS)),  # 14
    (3, False, set(ALL_TASKS) - {"last", "deletion"}),
])
def test_eligibility(tf, n_sents, has_prev, expected):
    doc = " ".join(["Word " * 12 + "end."] * n_sents)
    chosen = {tf(i, doc, PREV if has_prev else None).task for i in range(400)}
    assert chosen == expected


def test_empty_document_counted(tf):
    r = tf(0, "   \n\n  ", None)
    assert r.samples == [] and r.drops == {"document/no_sentences": 1}


def test_single_task_uses_itself_as_distractor():
    t = L2TTransform({"tasks": ["deletion"], "min_num_words": 5, "chunk_tokens": 64})
    r = t(0, DOC, None)
    assert r.task == "deletion" and r.samples
    t2 = L2TTransform({"tasks": ["deletion"], "min_num_words": 5, "self_distractor_when_single": False})
    assert t2(0, DOC, None).drops == {"document/no_eligible_task": 1}


def test_bad_config_names_field():
    with pytest.raises(ConfigError, match=r"tasks\[1\].*did you mean 'space'"):
        from_dict(L2TConfig, {"tasks": ["half", "spcae"]})
    with pytest.raises(ConfigError, match="task_params.typo.low"):
        L2TTransform({"task_params": {"typo": {"low": 0.5, "high": 0.1}}})


_unicode_docs = st.lists(st.text(min_size=0, max_size=120), min_size=1, max_size=6).map(lambda ps: "\n\n".join(ps))


@pytest.mark.parametrize("splitter", ["blingfire", "rules"])
def test_arbitrary_unicode_never_raises(splitter):
    tfs = L2TTransform({"min_num_words": 1, "chunk_tokens": 16, "splitter": splitter})

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_unicode_docs, st.one_of(st.none(), _unicode_docs), st.integers(0, 10**6))
    def check(doc, prev, index):
        r = tfs(index, doc, prev)
        assert r.samples or r.drops  # every document gives samples or a counted reason
        for s in r.samples:
            assert s.task == r.task
            assert "\n\n" in s.text and 0 < s.answer_start <= len(s.text)
        for key, n in r.drops.items():
            assert "/" in key and n > 0

    check()


def test_chunk_size_by_chars_per_token():
    doc = " ".join(f"Sentence {i} has a few words in it." for i in range(60))  # ~2100 chars
    few = L2TTransform({"tasks": ["one"], "min_num_words": 1, "count_tokens": "chars", "chars_per_token": 8.0,
                        "chunk_tokens": 128})
    many = L2TTransform({"tasks": ["one"], "min_num_words": 1, "count_tokens": "chars", "chars_per_token": 2.0,
                         "chunk_tokens": 128})
    n_few, n_many = len(few(0, doc).samples), len(many(0, doc).samples)
    assert n_few == len(doc) // 8 // 128 + 1 and n_many == -(-len(doc) // 2) // 128 + 1


@pytest.mark.parametrize("name", ALL_TASKS)
def test_every_task_on_arbitrary_chunks(name):
    """Each task alone: a Pair of strings or a counted Skip, never another exception."""
    import numpy as np

    from preschool.l2t.base import L2T_TASKS, Chunk, Context, Pair, Skip
    from preschool.l2t.text import STOPWORDS

    task = L2T_TASKS.build(name, {"min_num_words": 0})
    sent = st.text(min_size=1, max_size=60).map(str.strip).filter(bool)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(sent, min_size=1, max_size=5), st.lists(sent, max_size=3), st.integers(0, 2**32 - 1))
    def check(sents, prev, seed):
        ctx = Context(prev_sentences=prev, word_pool=("alpha", "beta"), stopwords=STOPWORDS)
        try:
            p = task.make(Chunk(sents), np.random.default_rng(seed), ctx)
        except Skip as s:
            assert s.reason
            return
        assert isinstance(p, Pair) and isinstance(p.prompt, str) and isinstance(p.completion, str)

    check()
