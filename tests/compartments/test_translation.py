import numpy as np
import pytest

from preschool.compartments.offsets import build_presentation
from preschool.compartments.translation import layout, span_length, translation_row
from preschool.errors import DataError


def test_standard_layout_and_loss_positions():
    V, c, row_len = 10, 3, 11  # T = 10, h = 5, span of 4 base tokens
    p = build_presentation("offset", c, V)
    tr = p.translation_id
    span = np.array([1, 2, 3, 4])
    assert span_length(row_len) == 4
    toks, mask = translation_row(span, p, 0, 2, row_len)
    assert toks.tolist() == [tr, 1, 2, 3, 4, tr, 21, 22, 23, 24, tr]
    # loss on every prediction 1..2h-1 (source half, second marker, target half); padding slot never
    assert mask.tolist() == [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]
    _, tmask = translation_row(span, p, 0, 2, row_len, loss_on="target")
    assert tmask.tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    lay = layout(row_len)
    assert lay["marker_positions"] == [0, 5] and lay["target"] == (6, 10) and lay["padding"] == (10, 11)


def test_paper_block_size_layout():
    # the paper's T = 64: marker, 31 tokens, marker, 31 tokens (+ our one padding slot)
    p = build_presentation("offset", 2, 100)
    toks, mask = translation_row(np.arange(31), p, 1, 0, 65)
    assert toks[0] == toks[32] == toks[64] == p.translation_id
    np.testing.assert_array_equal(toks[1:32], np.arange(31) + 100)
    np.testing.assert_array_equal(toks[33:64], np.arange(31))
    assert mask.sum() == 63 and mask[64] == 0


def test_permute_translation_row_decodes():
    p = build_presentation("permute", 2, 20, seed=4)
    span = np.array([5, 6, 7])
    toks, _ = translation_row(span, p, 0, 1, 9)
    np.testing.assert_array_equal(p.decode(toks[1:4], 0), span)
    np.testing.assert_array_equal(p.decode(toks[5:8], 1), span)


def test_translation_row_errors():
    p = build_presentation("offset", 2, 10)
    with pytest.raises(DataError, match="two different"):
        translation_row(np.array([1, 2, 3, 4]), p, 1, 1, 11)
    with pytest.raises(DataError, match="4 tokens"):
        translation_row(np.array([1, 2]), p, 0, 1, 11)
    with pytest.raises(DataError, match="too short"):
        translation_row(np.array([]), p, 0, 1, 4)
