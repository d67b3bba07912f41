import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATORS
from preschool.synthetic.set import first_seen_unique


def test_layout_counts_and_separator():
    g = GENERATORS.build("set", {})  # verify-ppt defaults: 2048 ids, values 1..998, separator 999
    it = g.item(0)
    s = it.symbols
    sep = int(np.flatnonzero(s == 999)[0])
    assert len(s) == 2048 and s[:sep].min() >= 1 and s.max() == 999
    assert np.array_equal(s[sep + 1:], first_seen_unique(s[:sep]))
    assert 1100 < it.meta["n_inputs"] < 1500 and 550 < it.meta["n_unique"] < 850  # coupon-collector range
    assert it.loss_mask is None


def test_answer_only_loss_masks_the_unique_list():
    g = GENERATORS.build("set", {"length": 50, "vocab": 20, "answer_only_loss": True})
    it = g.item(4)
    sep = int(np.flatnonzero(it.symbols == 20)[0])
    assert it.loss_mask[: sep + 1].sum() == 0 and it.loss_mask[sep + 1:].all()


def test_first_seen_unique():
    assert first_seen_unique(np.array([5, 3, 5, 1, 3, 7])).tolist() == [5, 3, 1, 7]


def test_check_rejects_a_wrong_unique_list():
    g = GENERATORS.build("set", {"length": 60, "vocab": 30})
    it = g.item(0)
    it.symbols[-2:] = it.symbols[-2:][::-1]
    with pytest.raises(AssertionError):
        g.check(it)


@pytest.mark.parametrize("params, field", [({"vocab": 1000}, "vocab"), ({"length": 2}, "length"), ({"vocab": 1}, "vocab")])
def test_bad_parameters(params, field):
    with pytest.raises(ConfigError) as e:
        GENERATORS.build("set", params)
    assert e.value.field == field
