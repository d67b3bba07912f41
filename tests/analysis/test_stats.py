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
