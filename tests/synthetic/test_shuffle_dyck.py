import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATOR_PRESETS, GENERATORS


def test_presets_match_the_spec():
    assert GENERATOR_PRESETS["dyck_verify_ppt"].params.items() >= {"k": 64, "p_open": 0.50, "length": 2048}.items()
    assert GENERATOR_PRESETS["dyck_hu2025"].params.items() >= {"k": 64, "p_open": 0.51, "length": 2048}.items()
    g = GENERATORS.build("shuffle_dyck", {"seed": 3})
    assert (g.cfg.min_depth, g.cfg.max_depth, g.vocab_size) == (1, 8, 128)


def test_depth_stays_in_bounds_and_closers_match_open_types():
    g = GENERATORS.build("shuffle_dyck", {"k": 4, "length": 400, "max_depth": 5, "p_open": 0.6})
    for it in g.items(0, 20):
        s = it.symbols
        depth = np.cumsum(np.where(s < 4, 1, -1))
        assert depth.min() >= 0 and depth.max() <= 5
        assert depth[-1] == it.meta["final_depth"]
        assert s[0] < 4  # starts with min_depth=1 opener


def test_close_at_end_gives_balanced_words():
    g = GENERATORS.build("shuffle_dyck", {"k": 8, "length": 64, "max_depth": 8, "close_at_end": True})
    for it in g.items(0, 30):
        g.check(it)
        assert it.meta["final_depth"] == 0


def test_p_open_shifts_the_mean_depth():
    lo = GENERATORS.build("shuffle_dyck", {"k": 8, "length": 2000, "max_depth": 16, "p_open": 0.3})
    hi = GENERATORS.build("shuffle_dyck", {"k": 8, "length": 2000, "max_depth": 16, "p_open": 0.7})
    mean = lambda g: np.mean(np.cumsum(np.where(g.item(0).symbols < 8, 1, -1)))  # noqa: E731
    assert mean(hi) > mean(lo) + 3


def test_check_rejects_closing_an_unopened_type():
    g = GENERATORS.build("shuffle_dyck", {"k": 4, "length": 50})
    it = g.item(0)
    it.symbols[0] = 4 + (int(it.symbols[0]) + 1) % 4  # a closer before anything is open
    with pytest.raises(AssertionError):
        g.check(it)


@pytest.mark.parametrize("params, field", [
    ({"k": 600}, "k"),  # closer 1199 has 4 digits
    ({"min_depth": 9, "max_depth": 8}, "min_depth"),
    ({"p_open": 1.0}, "p_open"),
    ({"close_at_end": True, "length": 10, "max_depth": 8}, "length"),
])
def test_bad_parameters_name_the_field(params, field):
    with pytest.raises(ConfigError) as e:
        GENERATORS.build("shuffle_dyck", params)
    assert e.value.field == field


def test_large_k_is_fine_without_a_digit_budget():
    g = GENERATORS.build("shuffle_dyck", {"k": 600, "max_digits": 0, "length": 100})
    g.check(g.item(0))
