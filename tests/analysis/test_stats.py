import math

import numpy as np
import pytest

from preschool.analysis.stats import (
    align,
    bootstrap_ci,
    mad,
    mean_sd_over_checkpoints,
    seed_summary,
    stable_gain,
    t_cdf,
    t_quantile,
)
from preschool.errors import ConfigError, DataError


def test_stable_gain_worked_example():
    # verify-ppt window: 5000..10000 every 250 -> 21 checkpoints; use a small analogue.
    steps = [4000, 5000, 6000, 7000, 8000]
    base = [0.50, 0.60, 0.61, 0.62, 0.63]
    arm = [0.90, 0.62, 0.64, 0.63, 0.66]  # step 4000 is outside the window
    r = stable_gain(steps, arm, base, window=(5000, 10000))
    assert r["n"] == 4
    assert r["steps"] == [5000, 6000, 7000, 8000]
    np.testing.assert_allclose(r["deltas"], [0.02, 0.03, 0.01, 0.03], atol=1e-12)
    assert r["mean"] == pytest.approx(0.0225)
    sd = math.sqrt(((0.02 - 0.0225) ** 2 + 2 * (0.03 - 0.0225) ** 2 + (0.01 - 0.0225) ** 2) / 3)
    assert r["sd"] == pytest.approx(sd)
    assert r["stable"] is True  # 0.0225 > 0.0096
    assert r["t"] == pytest.approx(0.0225 / (sd / 2))


def test_stable_gain_unstable_and_lower_is_better():
    steps = [1, 2, 3, 4]
    base = [3.0, 3.0, 3.0, 3.0]
    arm = [2.9, 3.2, 2.8, 3.05]  # lower NLL is better: deltas = base - arm
    r = stable_gain(steps, arm, base, higher_is_better=False)
    np.testing.assert_allclose(r["deltas"], [0.1, -0.2, 0.2, -0.05], atol=1e-12)
    assert r["mean"] == pytest.approx(0.0125)
    assert r["stable"] is False
    # the same numbers read as higher-is-better flip the sign
    r2 = stable_gain(steps, arm, base, higher_is_better=True)
    assert r2["mean"] == pytest.approx(-0.0125)


def test_stable_gain_aligns_on_shared_steps_and_seeds():
    # arm has an extra checkpoint and a different order; base has a checkpoint the arm lacks.
    r = stable_gain([30, 10, 20, 40], [1.3, 1.1, 1.2, 9.0], [0.0] * 3, base_steps=[10, 20, 30])
    assert r["steps"] == [10, 20, 30]
    np.testing.assert_allclose(r["deltas"], [1.1, 1.2, 1.3])
    # seeds x checkpoints are averaged per checkpoint before differencing
    s, a, b = align([1, 2], [[1.0, 2.0], [3.0, 4.0]], [0.0, 0.0])
    np.testing.assert_allclose(a, [2.0, 3.0])


def test_stable_gain_degenerate_cases_do_not_crash():
    r = stable_gain([1, 2], [1, 2], [1, 2], window=(10, 20))
    assert r["n"] == 0 and r["stable"] is False and r["mean"] is None and r["reason"]
    r = stable_gain([1, 2], [2, 2], [1, 1], window=(1, 1))
    assert r["n"] == 1 and r["mean"] == 1.0 and r["sd"] is None and r["stable"] is False
    with pytest.raises(DataError, match="duplicate"):
        stable_gain([1, 1], [1, 2], [1, 2])
    with pytest.raises(DataError, match="3 values for 2"):
        stable_gain([1, 2], [1, 2, 3], [1, 2])
    with pytest.raises(ConfigError, match="window"):
        stable_gain([1, 2], [1, 2], [1, 2], window=(5, 1))


def test_the_shared_numerics_are_re_exported_not_copied():
    # bootstrap_ci and mad live in preschool/numerics.py (tests/test_numerics.py); stats re-exports them
    import preschool.numerics as numerics

    assert (bootstrap_ci, mad) == (numerics.bootstrap_ci, numerics.mad)


def test_seed_summary_and_checkpoint_summary():
    s = seed_summary({0: 41.0, 1: 42.0, 2: 43.0})
    assert s["mean"] == pytest.approx(42.0)
    assert s["sd"] == pytest.approx(1.0)
    assert s["sd_pop"] == pytest.approx(math.sqrt(2 / 3))
    assert s["ci_lo"] >= 41.0 and s["ci_hi"] <= 43.0 and s["ci_lo"] < 42.0 < s["ci_hi"]
    t = seed_summary([41.0, 42.0, 43.0], method="t")
    assert t["ci_hi"] - 42.0 == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)  # t_{0.975, 2} = 4.3027
    one = seed_summary([5.0])
    assert one["sd"] is None and one["ci_lo"] is None and one["mean"] == 5.0
    m = mean_sd_over_checkpoints([0, 5000, 7500, 10000], [9.0, 1.0, 2.0, 3.0], window=(5000, 10000))
    assert m["n"] == 3 and m["mean"] == pytest.approx(2.0) and m["sd"] == pytest.approx(1.0)
    assert mad([1, 2, 3, 4, 100]) == 1.0


def test_student_t_against_table_values():
    # two-sided 95% critical values from standard t tables
    for df, crit in ((1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423), (1000, 1.9623)):
        assert t_quantile(0.975, df) == pytest.approx(crit, abs=1e-4)
    assert t_quantile(0.995, 5) == pytest.approx(4.0321, abs=1e-4)
    assert t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-9)
    assert t_quantile(0.025, 10) == pytest.approx(-2.2281, abs=1e-4)
    # df = 1 is the Cauchy distribution: F(t) = 1/2 + atan(t)/pi
    for t in (-3.0, -0.5, 0.0, 0.7, 5.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
    with pytest.raises(ConfigError):
        t_quantile(1.0, 3)


def test_one_sd_verdict_and_mean_sd_formatting():
    from preschool.analysis.stats import format_mean_sd, mean_sd, one_sd_verdict

    assert one_sd_verdict(0.5, 0.2, 3) == "above" and one_sd_verdict(-0.5, 0.2, 3) == "below"
    assert one_sd_verdict(0.1, 0.2, 3) == "no stable difference"
    assert one_sd_verdict(1.3, 0.2, 3, null=1.0) == "above" and one_sd_verdict(1.1, 0.2, 3, null=1.0) != "above"
    assert one_sd_verdict(0.5, None, 1, single="one seed") == "one seed"
    m, sd, n = mean_sd([1.0, None, 3.0, float("nan")])
    assert (m, n) == (2.0, 2) and sd == pytest.approx(2 ** 0.5)
    assert format_mean_sd(m, sd, n) == "2.000 ± 1.414"
    assert format_mean_sd(5.5, None, 1, 2, "x", show_n=True) == "5.50x (n=1)"
    assert format_mean_sd(*mean_sd([])) == "–"


# ----------------------------------------------------------------------------- seed-level verdicts (issue #45)


def test_the_t_interval_is_the_spec_formula_with_n_stated():
    from preschool.analysis.stats import t_interval

    t = t_interval([41.2, 42.9, 40.1, None, float("nan")])
    assert t["n"] == 3 and t["mean"] == pytest.approx(41.4)
    assert t["half"] == pytest.approx(4.302653 * t["sd"] / math.sqrt(3), rel=1e-6)
    assert t["interval"] == pytest.approx([41.4 - t["half"], 41.4 + t["half"]])
    assert t_interval([5.0])["interval"] is None and t_interval([])["mean"] is None
    with pytest.raises(ConfigError, match="level"):
        t_interval([1.0, 2.0], level=1.0)


def test_equivalence_is_two_one_sided_tests_against_the_margin():
    """Issue #45 item 4: "no difference" rests on the 90 % interval lying inside the margin (Schuirmann 1987)."""
    from preschool.analysis.stats import equivalence, t_interval

    tight = [0.01, -0.01, 0.005, -0.004]
    e = equivalence(tight, 0.05)
    assert e["verdict"] == "equivalent" and e["interval"] == pytest.approx(t_interval(tight, 0.9)["interval"])
    # an interval that holds 0 and reaches past the margin: inconclusive, not "no difference"
    wide = [0.3, -0.3, 0.05]
    assert equivalence(wide, 0.235)["verdict"] == "inconclusive"
    assert equivalence([0.5, 0.6, 0.55], 0.1)["verdict"] == "different"
    assert equivalence([0.02, 0.021, 0.0205], 0.1)["verdict"] == "different, within the margin"
    assert equivalence([0.02], 0.1)["verdict"] == "one seed"
    with pytest.raises(ConfigError, match="margin"):
        equivalence(tight, 0.0)


def test_a_comparison_within_noise_of_chance_is_not_testable():
    """Issue #45 item 3: an arm is beyond chance only when its seed interval lies on the better side of it."""
    from preschool.analysis.stats import beyond_chance, testability

    at = beyond_chance([0.505, 0.516, 0.498], 0.5, higher=True)
    assert at["beyond"] is False and at["interval"][0] < 0.5 < at["interval"][1]
    learnt = beyond_chance([0.61, 0.63, 0.62], 0.5, higher=True)
    assert learnt["beyond"] is True
    # lower is better (x_perc: 100 = no memory): below chance beyond noise is the skill; above it is not
    assert beyond_chance([99.9, 100.2, 100.1], 100.0, higher=False)["beyond"] is False
    assert beyond_chance([80.0, 82.0, 81.0], 100.0, higher=False)["beyond"] is True
    # worse than chance is no skill either (DEPO exact match at 0 when a guess among the nodes gets 1/9)
    assert beyond_chance([0.0, 0.01, 0.016], 1 / 9, higher=True)["beyond"] is False
    # one seed: a stated noise band, or unknown without one
    assert beyond_chance([0.52], 0.5, higher=True, band=0.03)["beyond"] is False
    assert beyond_chance([0.52], 0.5, higher=True)["beyond"] is None
    assert testability({"a": at, "b": at}, 0.5)["verdict"] == "not testable"
    assert testability({"a": at, "b": learnt}, 0.5)["verdict"] == "testable"
    assert testability({"a": at, "b": beyond_chance([0.52], 0.5, True)}, 0.5)["verdict"] == "unknown"


def test_seeds_needed_gives_the_interval_80_percent_power_by_simulation():
    """Issue #45 item 4: n from n >= ((t + t) s / d)^2 excludes 0 in about 80 % of simulated studies of n seeds
    (and n - 1 seeds fall short); equivalence within the margin likewise when the true effect is 0."""
    from preschool.analysis.stats import seeds_for_equivalence, seeds_needed, t_quantile

    rng = np.random.default_rng(45)

    def power(n, effect, sd, margin=None, trials=20000):
        x = rng.normal(effect, sd, (trials, n))
        m, se = x.mean(axis=1), x.std(axis=1, ddof=1) / math.sqrt(n)
        if margin is None:
            half = t_quantile(0.975, n - 1) * se
            return float(((m - half > 0) | (m + half < 0)).mean())
        half = t_quantile(0.95, n - 1) * se
        return float(((m - half > -margin) & (m + half < margin)).mean())

    assert seeds_needed(1.0, 1.0) == 10 and seeds_needed(1.0, 0.5) == 34  # the textbook paired-t sizes
    for sd, effect in ((1.0, 1.0), (0.02, 0.03), (0.5, 2.0)):
        n = seeds_needed(sd, effect)
        assert power(n, effect, sd) >= 0.78 and (n == 2 or power(n - 1, effect, sd) < 0.82)
    n = seeds_for_equivalence(1.0, 1.0)
    assert power(n, 0.0, 1.0, margin=1.0) >= 0.78
    assert seeds_needed(1.0, 0.0) is None and seeds_needed(0.0, 0.3) == 2 and seeds_needed(1.0, 1e-4) is None


def test_the_width_prediction_range_covers_as_stated_by_simulation():
    """A pilot of k seeds predicts the half-width with k + 1 seeds; the realised one falls inside the stated 80 %
    range in about 80 % of simulated studies (what tests/analysis/test_seed_plan.py checks on committed ones)."""
    from preschool.analysis.stats import width_ratio_range

    rng = np.random.default_rng(7)
    for k in (2, 3, 5):
        lo, hi = width_ratio_range(k, 0.8)
        x = rng.normal(0.0, 1.0, (40000, k + 1))
        ratio = x.std(axis=1, ddof=1) / x[:, :k].std(axis=1, ddof=1)
        assert float(((ratio >= lo) & (ratio <= hi)).mean()) == pytest.approx(0.8, abs=0.01)
    with pytest.raises(ConfigError):
        width_ratio_range(1)
