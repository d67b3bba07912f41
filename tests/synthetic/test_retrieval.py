import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATORS


def _gen(**kw):
    return GENERATORS.build("retrieval", {"length": 256, **kw})


@pytest.mark.parametrize("mode", ["recall", "copy"])
def test_answers_retrieve_the_tracked_values(mode):
    g = _gen(mode=mode, n_tracked=3, n_distractors=5, gap_min=2, gap_max=10)
    for it in g.items(0, 20):
        g.check(it)
        assert it.loss_mask.sum() == 3 * it.meta["instances"]


def test_gap_controls_retrieval_distance():
    near = _gen(n_tracked=1, n_distractors=2, gap_min=0, gap_max=0, length=512)
    far = _gen(n_tracked=1, n_distractors=2, gap_min=100, gap_max=100, length=512)
    dn = [d for it in near.items(0, 5) for d in it.meta["distances"]]
    df = [d for it in far.items(0, 5) for d in it.meta["distances"]]
    assert max(dn) < 100 <= min(df)
    assert set(it.meta["gaps"][0] for it in far.items(0, 5)) == {100}


def test_distances_are_measured_positions():
    g = _gen(n_tracked=2, n_distractors=4, gap_max=5)
    it = g.item(0)
    s = it.symbols
    (a, b) = it.meta["answer_spans"][0]
    for j, d in enumerate(it.meta["distances"][:2]):
        assert s[a + j - d] == s[a + j]  # the source value sits exactly d symbols back


def test_distractors_and_tracked_counts_shape_the_context():
    g = _gen(mode="copy", n_tracked=2, n_distractors=7, gap_max=0)
    sp = g._special0
    s = g.item(0).symbols
    first = s[: 2 * 9]
    assert np.sum(first == sp + g.MARK) == 2 and np.sum(first == sp + g.NOMARK) == 7


@pytest.mark.parametrize("params, field", [
    ({"n_keys": 4, "n_tracked": 3, "n_distractors": 3}, "n_keys"), ({"gap_min": 9, "gap_max": 3}, "gap_min"),
    ({"length": 20}, "length"), ({"n_tracked": 0}, "n_tracked"), ({"n_keys": 990}, "n_keys")])
def test_bad_parameters(params, field):
    with pytest.raises(ConfigError) as e:
        _gen(**params)
    assert e.value.field == field
