import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATORS


def _gen(**kw):
    return GENERATORS.build("depo", {"n_nodes": 8, "max_hops": 4, "n_queries": 5, "length": 128, **kw})


def test_answers_are_k_successors_along_one_cycle():
    g = _gen()
    for it in g.items(0, 30):
        g.check(it)  # parses edges, verifies the single cycle and every k-hop answer
        for q in it.meta["queries"]:
            assert q["target"] == (q["source"] + q["k"]) % 8


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
        assert it.loss_mask.sum() >= 2 * 5  # each answer word has >= 2 tokens
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
    ({"alphabet": 2, "word_len_min": 1, "word_len_max": 1}, "n_nodes"), ({"alphabet": 600}, "alphabet")])
def test_bad_parameters(params, field):
    with pytest.raises(ConfigError) as e:
        _gen(**params)
    assert e.value.field == field
