"""preschool/numerics.py: the bootstrap CI and the MAD that the verbatim evaluator and the report share."""

import math

import numpy as np
import pytest

from preschool.errors import ConfigError, DataError
from preschool.numerics import bootstrap_ci, float_array, mad


def test_bootstrap_ci_properties():
    rng = np.random.default_rng([0, 1])
    x = rng.normal(10.0, 2.0, size=200)
    lo, hi = bootstrap_ci(x)
    assert lo < x.mean() < hi
    # close to the normal-theory interval 1.96 * s / sqrt(n)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.1)
    assert bootstrap_ci(x) == bootstrap_ci(x)  # seeded
    assert bootstrap_ci(x, seed=1) != bootstrap_ci(x, seed=2)
    mlo, mhi = bootstrap_ci(x, stat="median", n_resamples=2000)
    assert mlo < np.median(x) < mhi
    assert bootstrap_ci([4.0]) == (4.0, 4.0)
    assert bootstrap_ci([1.0, float("nan"), 1.0]) == (1.0, 1.0)
    lo80, hi80 = bootstrap_ci(x, ci=0.8)
    assert lo < lo80 < hi80 < hi
    with pytest.raises(DataError):
        bootstrap_ci([])
    with pytest.raises(ConfigError, match="stat"):
        bootstrap_ci(x, stat="mode")


def test_mad_and_non_numbers():
    assert mad([1, 2, 3, 4, 100]) == 1.0
    assert mad([2.0, float("nan"), 4.0]) == 1.0
    with pytest.raises(DataError, match="mad"):
        mad([float("nan")])
    with pytest.raises(DataError, match="values: expected numbers"):
        float_array(["a", object()], "values")
