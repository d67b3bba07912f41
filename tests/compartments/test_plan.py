import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from preschool.compartments.plan import (PlanConfig, category_probs, largest_remainder, load_plan, make_plan,
                                         save_plan)
from preschool.config import from_dict
from preschool.errors import ConfigError, DataError


def test_largest_remainder_exact():
    np.testing.assert_array_equal(largest_remainder(np.array([1, 1, 1]), 10), [4, 3, 3])
    np.testing.assert_array_equal(largest_remainder(np.array([0.5, 0.25, 0.25]), 7), [3, 2, 2])  # 3.5,1.75,1.75
    np.testing.assert_array_equal(largest_remainder(np.array([0.1, 0.2, 0.3, 0.4]), 0), [0, 0, 0, 0])


@settings(max_examples=40, deadline=None)
@given(probs=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=12), total=st.integers(0, 5000))
def test_largest_remainder_properties(probs, total):
    p = np.asarray(probs) / sum(probs)
    n = largest_remainder(p, total)
    assert n.sum() == total
    assert (np.abs(n - p * total) < 1 + 1e-9).all()  # each count within one of the exact share


@pytest.mark.parametrize("shares,expected", [("equal", [250, 250, 250, 250]), ("unequal", [100, 200, 300, 400]),
                                             ([3, 1, 0, 0], [750, 250, 0, 0])])
def test_plan_has_exact_shares(shares, expected):
    plan = make_plan(PlanConfig(4, shares, seed=3), 1000)
    assert np.bincount(plan.src, minlength=4).tolist() == expected
    assert (plan.dst == -1).all()


def test_plan_is_seeded_and_shuffled():
    a = make_plan(PlanConfig(3, seed=7), 3000)
    b = make_plan(PlanConfig(3, seed=7), 3000)
    c = make_plan(PlanConfig(3, seed=8), 3000)
    np.testing.assert_array_equal(a.src, b.src)
    assert not np.array_equal(a.src, c.src)
    assert len(set(a.src[:30].tolist())) > 1  # not sorted into blocks


def test_translation_masses_absolute_and_compartment():
    cfg = PlanConfig(4, "equal", translation_fraction=0.25, translation_mode="absolute", seed=0)
    plan = make_plan(cfg, 1200)
    assert plan.is_translation.sum() == 300
    assert (plan.src[plan.is_translation] != plan.dst[plan.is_translation]).all()
    pairs = {(s, d) for s, d in zip(plan.src[plan.is_translation], plan.dst[plan.is_translation])}
    assert len(pairs) == 12  # every ordered pair i != j
    assert np.bincount(plan.src[~plan.is_translation], minlength=4).tolist() == [225] * 4
    legacy = PlanConfig(4, "equal", translation_fraction=1.0, translation_mode="compartment")
    assert legacy.effective_translation_fraction == pytest.approx(1 / 5)
    assert make_plan(legacy, 1000).is_translation.sum() == 200
    # the reference's normalisation is tr / (c + tr), not tr / (c + 1): they differ away from tr = 1
    half = PlanConfig(2, "equal", translation_fraction=0.5, translation_mode="compartment")
    assert half.effective_translation_fraction == pytest.approx(0.2)
    assert make_plan(half, 1000).is_translation.sum() == 200
    cats, probs = category_probs(PlanConfig(3, "unequal", translation_fraction=0.5))
    d = dict(zip(cats, probs))
    assert d[(0, 1)] == pytest.approx(d[(1, 0)])  # ordered pairs split half/half
    assert d[(1, 2)] / d[(0, 1)] == pytest.approx((2 * 3) / (1 * 2))  # proportional to w_i * w_j
    assert probs.sum() == pytest.approx(1.0)


def test_plan_save_load(tmp_path):
    plan = make_plan(PlanConfig(3, translation_fraction=0.1), 500)
    save_plan(plan, tmp_path / "plan.npy")
    back = load_plan(tmp_path / "plan.npy")
    np.testing.assert_array_equal(back.src, plan.src)
    np.testing.assert_array_equal(back.dst, plan.dst)
    with pytest.raises(DataError, match="checksum"):
        load_plan(tmp_path / "plan.npy", sha256="0" * 64)


def test_plan_config_errors():
    with pytest.raises(ConfigError, match="shares"):
        from_dict(PlanConfig, {"n_compartments": 3, "shares": [1, 2]})
    with pytest.raises(ConfigError, match="shares"):
        from_dict(PlanConfig, {"shares": "equals"})
    with pytest.raises(ConfigError, match="translation_fraction"):
        from_dict(PlanConfig, {"translation_fraction": 1.0})
    with pytest.raises(ConfigError, match="translation_fraction"):
        from_dict(PlanConfig, {"n_compartments": 1, "translation_fraction": 0.2})
