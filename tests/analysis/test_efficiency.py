import pytest

from preschool.analysis.efficiency import smooth_values, token_efficiency, tokens_to_target
from preschool.errors import ConfigError, DataError


def test_tokens_to_target_interpolates_first_crossing():
    tokens = [0, 100, 200, 300]
    values = [0.40, 0.50, 0.70, 0.80]
    # 0.60 lies halfway between 0.50 (t=100) and 0.70 (t=200)
    assert tokens_to_target(tokens, values, 0.60) == pytest.approx(150.0)
    assert tokens_to_target(tokens, values, 0.70) == pytest.approx(200.0)
    assert tokens_to_target(tokens, values, 0.30) == 0.0  # reached at the first checkpoint
    assert tokens_to_target(tokens, values, 0.90) is None  # never reached


def test_tokens_to_target_non_monotone_and_lower_is_better():
    tokens = [0, 10, 20, 30, 40]
    values = [0.1, 0.6, 0.3, 0.8, 0.9]
    # first crossing of 0.5: between t=0 and t=10; under `first` the later dip does not undo it
    assert tokens_to_target(tokens, values, 0.5, crossing="first") == pytest.approx(8.0)
    # by default the curve must stay past: from 20 (0.3) to 30 (0.8) on, 20 + 0.2/0.5*10 = 24
    assert tokens_to_target(tokens, values, 0.5) == pytest.approx(24.0)
    # 0.7 is first reached between 20 (0.3) and 30 (0.8): 20 + 0.4/0.5*10 = 28 (it stays past: both rules)
    assert tokens_to_target(tokens, values, 0.7) == pytest.approx(28.0)
    assert tokens_to_target(tokens, values, 0.7, crossing="first") == pytest.approx(28.0)
    # unsorted input is sorted by tokens
    assert tokens_to_target(tokens[::-1], values[::-1], 0.7) == pytest.approx(28.0)
    # loss curve: lower is better; 2.5 is reached between 3.0 (t=10) and 2.0 (t=20)
    loss = [4.0, 3.0, 2.0, 2.2]
    assert tokens_to_target([0, 10, 20, 30], loss, 2.5, higher_is_better=False) == pytest.approx(15.0)
    assert tokens_to_target([0, 10, 20, 30], loss, 1.0, higher_is_better=False) is None


def test_smoothing_suppresses_a_spurious_spike():
    tokens = [0, 10, 20, 30, 40, 50]
    values = [0.1, 0.9, 0.1, 0.4, 0.6, 0.8]
    assert tokens_to_target(tokens, values, 0.5, crossing="first") == pytest.approx(5.0)  # the spike crosses
    assert tokens_to_target(tokens, values, 0.5) == pytest.approx(35.0)  # it does not stay past
    sm = smooth_values(values, 3)
    assert sm.tolist() == pytest.approx([0.1, 0.5, 1.1 / 3, 1.4 / 3, 1.1 / 3, 0.6])
    # smoothed: first >= 0.5 is t=10 (0.5 exactly)
    assert tokens_to_target(tokens, values, 0.5, smooth=3, crossing="first") == pytest.approx(10.0)
    assert tokens_to_target(tokens, values, 0.55, smooth=3) == pytest.approx(40 + (0.55 - 1.1 / 3) / (0.6 - 1.1 / 3) * 10)
    with pytest.raises(ConfigError, match="smooth"):
        smooth_values(values, 0)


def test_token_efficiency_worked_example():
    base = [(0, 0.30), (1000, 0.40), (2000, 0.50), (3000, 0.55), (4000, 0.60)]
    arm = ([0, 1000, 2000, 3000, 4000], [0.35, 0.50, 0.60, 0.62, 0.63])
    r = token_efficiency(base, arm, extra_tokens=500)
    assert r["target"] == pytest.approx(0.60)  # baseline final
    assert r["base_tokens"] == pytest.approx(4000)
    assert r["arm_tokens"] == pytest.approx(2000)
    assert r["arm_tokens_incl_ppt"] == pytest.approx(2500)
    assert r["saved_fraction"] == pytest.approx(0.5)
    assert r["saved_fraction_incl_ppt"] == pytest.approx(0.375)
    assert r["ratio"] == pytest.approx(2.0)
    assert r["ratio_incl_ppt"] == pytest.approx(1.6)
    assert r["reached"] is True
    # explicit target
    r = token_efficiency(base, arm, target=0.45)
    assert r["base_tokens"] == pytest.approx(1500) and r["arm_tokens"] == pytest.approx(1000 * 0.10 / 0.15)


def test_token_efficiency_never_reached_is_reported():
    base = [(0, 0.3), (100, 0.6)]
    arm = [(0, 0.3), (100, 0.5), (200, 0.55)]
    r = token_efficiency(base, arm, extra_tokens=10)
    assert r["reached"] is False and r["arm_reached"] is False and r["base_reached"] is True
    assert r["arm_tokens"] is None and r["saved_fraction"] is None and r["ratio"] is None
    # PPT costing more than it saves gives a negative saving
    r = token_efficiency([(0, 0.0), (100, 1.0)], [(0, 0.0), (50, 1.0)], extra_tokens=80)
    assert r["saved_fraction"] == pytest.approx(0.5)
    assert r["saved_fraction_incl_ppt"] == pytest.approx(-0.3)
    with pytest.raises(DataError):
        token_efficiency([], arm)
    with pytest.raises(DataError, match="duplicate"):
        token_efficiency([(0, 0.1), (0, 0.2)], arm)


def test_absolute_tokens_saved_beside_the_fraction():
    base = [(0, 0.30), (1e9, 0.40), (2e9, 0.46), (3e9, 0.50), (4e9, 0.52)]
    arm = [(0, 0.33), (1e9, 0.44), (2e9, 0.49), (3e9, 0.53), (4e9, 0.54)]
    e = token_efficiency(base, arm, extra_tokens=0.5e9)
    assert e["saved_tokens"] == pytest.approx(1.25e9)  # 4B - 2.75B
    assert e["saved_tokens_incl_ppt"] == pytest.approx(0.75e9)
    assert e["saved_fraction"] == pytest.approx(1.25 / 4)


def test_a_curve_that_touches_the_target_and_falls_back_saves_nothing_by_default():
    """The ppt_retrieval case (issue #31 item 6): a loss curve dips below the baseline's final value once and
    ends above it, worse than the baseline over the window (a stable harm). Counting its first crossing
    "saves" tokens; the default rule counts a crossing only when the curve stays past the target."""
    base = [(0, 6.0), (100, 5.0), (200, 4.6), (300, 4.4), (400, 4.3)]
    arm = [(0, 6.0), (100, 4.2), (200, 4.7), (300, 4.6), (400, 4.5)]  # down once, then stays above 4.3
    first = token_efficiency(base, arm, higher_is_better=False, crossing="first")
    assert first["reached"] and first["saved_fraction"] > 0.7 and first["crossing"] == "first"
    stays = token_efficiency(base, arm, higher_is_better=False)
    assert stays["crossing"] == "stays" and not stays["reached"] and stays["arm_tokens"] is None
    assert stays["base_tokens"] == pytest.approx(400)
    # an arm that stays past after its dip reaches it where it last comes back
    back = [(0, 6.0), (100, 4.2), (200, 4.7), (300, 4.2), (400, 4.1)]
    r = token_efficiency(base, back, higher_is_better=False)
    assert r["reached"] and r["arm_tokens"] == pytest.approx(200 + 100 * 0.4 / 0.5)
    with pytest.raises(ConfigError, match="crossing"):
        token_efficiency(base, arm, crossing="last")
