import hashlib

import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATORS


def _gen(**kw):
    return GENERATORS.build("depo", {"n_nodes": 8, "max_hops": 4, "n_queries": 5, "length": 128, **kw})


def test_answers_are_k_successors_along_one_cycle():
    for g in (_gen(), _gen(n_nodes_dist="fixed", distinct_sources=False)):
        for it in g.items(0, 30):
            g.check(it)  # parses edges, verifies the single cycle and every k-hop answer
            for q in it.meta["queries"]:
                assert q["target"] == (q["source"] + q["k"]) % it.meta["n_nodes"]


def test_reference_sampling_is_the_default_node_count_and_distinct_sources():
    """Thiggel/SyntheticPretraining Depo: n from 3..N with weight 1/(n + sqrt(N)); distinct query words."""
    g = _gen(n_nodes=10, n_queries=4)
    items = list(g.items(0, 3000))
    ns = np.array([it.meta["n_nodes"] for it in items])
    expect = 1 / (np.arange(3, 11) + np.sqrt(10))
    expect /= expect.sum()
    freq = np.bincount(ns, minlength=11)[3:] / len(ns)
    assert np.abs(freq - expect).max() < 0.03  # 3000 draws: standard error < 0.008
    assert freq[0] > freq[-1]  # the bias favours small graphs
    for it in items[:200]:
        srcs = [q["source"] for q in it.meta["queries"]]
        assert len(srcs) == min(4, it.meta["n_nodes"]) == len(set(srcs))
    small = [it for it in items if it.meta["n_nodes"] == 3]
    assert small and all(len(it.meta["queries"]) == 3 for it in small)  # min(n, M) queries
    for it in items[:50]:
        g.check(it)
    # the old sampling often repeats a source among 5 queries on 8 nodes
    old = _gen(n_nodes_dist="fixed", distinct_sources=False)
    assert any(len({q["source"] for q in it.meta["queries"]}) < 5 for it in old.items(0, 20))
    assert {it.meta["n_nodes"] for it in old.items(0, 20)} == {8}


def test_old_sampling_options_reproduce_the_earlier_documents():
    g = _gen(n_nodes_dist="fixed", distinct_sources=False)
    h = hashlib.sha256()
    for it in g.items(0, 20):
        h.update(it.symbols.tobytes())
    # documents of the generator before the reference's sampling became the default
    assert h.hexdigest() == "c0156e75eaadb6be8acab4b7e4174988a39c30f7bf243f98fa26ecc25db1a428"


def test_hops_are_uniform_in_training_and_fixed_when_asked():
    g = _gen()
    ks = [q["k"] for it in g.items(0, 200) for q in it.meta["queries"]]
    counts = [ks.count(k) for k in range(1, 5)]
    assert min(counts) > 0.2 * len(ks)
    fixed = _gen(hops=[3])
    assert {q["k"] for it in fixed.items(0, 10) for q in it.meta["queries"]} == {3}


def test_edge_list_is_shuffled_and_words_are_multi_token():
    g = _gen(word_len_min=2, word_len_max=3)
    firsts = set()
    for it in g.items(0, 10):
        s = it.symbols.tolist()
        # first edge's source word differs between documents (random order, random words)
        firsts.add(tuple(s[1:4]))
        assert it.loss_mask.sum() >= 2 * len(it.meta["queries"])  # each answer word has >= 2 tokens
    assert len(firsts) > 5


def test_wrong_answer_is_caught():
    g = _gen()
    it = g.item(0)
    (a, b) = it.meta["answer_spans"][0]
    s = it.symbols
    s[a] = (s[a] + 1) % 8  # another letter, still a non-final letter
    with pytest.raises(AssertionError):
        g.check(it)


@pytest.mark.parametrize("params, field", [
    ({"length": 50}, "length"), ({"hops": [5]}, "hops[0]"), ({"word_len_min": 4, "word_len_max": 3}, "word_len_min"),
    ({"alphabet": 2, "word_len_min": 1, "word_len_max": 1}, "n_nodes"), ({"alphabet": 600}, "alphabet"),
    ({"n_nodes": 2}, "n_nodes"), ({"n_nodes_dist": "uniform"}, "n_nodes_dist")])
def test_bad_parameters(params, field):
    with pytest.raises(ConfigError) as e:
        _gen(**params)
    assert e.value.field == field
