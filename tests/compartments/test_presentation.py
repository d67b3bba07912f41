import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from preschool.compartments.presentation import PRESENTATIONS, build_presentation
from preschool.errors import ConfigError, DataError


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 8), V=st.integers(1, 300), seed=st.integers(0, 5), mode=st.sampled_from(["offset", "permute"]))
def test_round_trip_and_bijection(c, V, seed, mode):
    p = build_presentation(mode, c, V, seed)
    base = np.arange(V)
    for i in range(c):
        enc = p.encode(base, i)
        assert enc.min() >= 0 and enc.max() < p.vocab_size
        assert len(np.unique(enc)) == V  # a bijection on ids
        assert (enc != p.translation_id).all()
        np.testing.assert_array_equal(p.decode(enc, i), base)


@pytest.mark.parametrize("c", [1, 2, 5])
def test_offset_layout_and_disjoint(c):
    V = 50
    p = build_presentation("offset", c, V)
    assert p.vocab_size == c * V + 1 and p.translation_id == c * V
    blocks = [set(p.encode(np.arange(V), i).tolist()) for i in range(c)]
    for i in range(c):
        assert blocks[i] == set(range(i * V, (i + 1) * V))
        for j in range(i + 1, c):
            assert not blocks[i] & blocks[j]  # no id shared across compartments
    ids = np.array([3, V + 3, p.translation_id])
    if c >= 2:
        np.testing.assert_array_equal(p.compartment_of(ids), [0, 1, -1])
        np.testing.assert_array_equal(p.decode(ids), [3, 3, -1])  # decode needs no compartment in offset mode


def test_permute_is_seeded_and_identity_for_zero():
    a = build_presentation("permute", 3, 100, seed=1)
    b = build_presentation("permute", 3, 100, seed=1)
    c = build_presentation("permute", 3, 100, seed=2)
    assert a.vocab_size == 101 and a.translation_id == 100
    np.testing.assert_array_equal(a.permutation(0), np.arange(100))
    np.testing.assert_array_equal(a.permutation(1), b.permutation(1))
    assert not np.array_equal(a.permutation(1), c.permutation(1))
    assert not np.array_equal(a.permutation(1), a.permutation(2))
    with pytest.raises(DataError, match="compartment="):
        a.decode(np.array([1, 2]))


def test_errors_name_the_problem():
    p = build_presentation("offset", 2, 10)
    with pytest.raises(DataError, match="out of range"):
        p.encode(np.array([10]), 0)
    with pytest.raises(DataError, match="compartment 2"):
        p.encode(np.array([1]), 2)
    with pytest.raises(DataError, match="not in compartment 0"):
        p.decode(np.array([12]), 0)
    with pytest.raises(ConfigError, match="n_compartments"):
        PRESENTATIONS.build("offset", {"n_compartments": 0, "base_vocab": 5})
    with pytest.raises(ConfigError, match="did you mean 'offset'"):
        PRESENTATIONS.build("ofset", {})
