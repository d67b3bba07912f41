import numpy as np
import pytest

from preschool.synthetic import GENERATORS
from preschool.synthetic.mp_struct import HEAD_CP, HEAD_TP, HEAD_VP, LEAF, MPStructCore


def _gen(**kw):
    return GENERATORS.build("mp_struct_core", {"length": 1000, **kw})


def test_sentence_lengths_match_the_reference():
    g = _gen()
    assert len(g.sentence(False, 2, (0, 1, 2))) == 37
    assert len(g.sentence(True, 3, (2, 1, 0))) == 41
    assert len(_gen(markers="none").sentence(True, 2, (0, 1, 2))) == 38


def test_movement_places_the_subject_under_spec_cp():
    g = _gen()
    moved = g.sentence(True, 2, (0, 1, 2))
    # C head carries the MOVE opener, the VP subject slot its closer
    assert moved.index(1) < moved.index(6)
    assert moved.index(HEAD_CP) < moved.index(1)
    assert 1 not in g.sentence(False, 2, (0, 1, 2))


def test_markers_variants():
    heads = _gen().item(0).symbols
    assert {HEAD_CP, HEAD_TP, HEAD_VP} <= set(heads.tolist()) and LEAF not in heads
    uni = _gen(markers="uniform").item(0).symbols
    assert LEAF in uni and not {HEAD_CP, HEAD_TP, HEAD_VP} & set(uni.tolist())
    none = _gen(markers="none").item(0).symbols
    assert not {HEAD_CP, HEAD_TP, HEAD_VP, LEAF} & set(none.tolist())
    for m in ("heads", "uniform", "none"):
        g = _gen(markers=m)
        for it in g.items(0, 5):
            g.check(it)


def test_p_move_is_respected():
    g = _gen(length=4000, p_move=0.0)
    assert g.item(0).meta["moves"] == 0 and 1 not in g.item(0).symbols
    g = _gen(length=4000, p_move=1.0)
    it = g.item(0)
    assert it.meta["moves"] == it.meta["sentences"]


def test_check_rejects_swapped_agreement():
    g = _gen()
    it = g.item(0)
    s = it.symbols
    i = int(np.flatnonzero((s == 2) | (s == 3))[0])
    s[i] = 5 - s[i]  # A <-> B on the opener only
    with pytest.raises(AssertionError):
        g.check(it)
    assert isinstance(g, MPStructCore)
