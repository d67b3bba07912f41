import numpy as np
import pytest

from preschool.compartments.presentation import build_presentation
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


# ----------------------------------------------------------------------------- standard: regression

def test_standard_rows_unchanged_by_row_formats():
    """Standard rows (tokens + masks, both loss_on, both presentations, odd/even T) hash to the value
    computed before ``row_format`` existed; the default format is standard."""
    import hashlib

    from preschool.compartments.translation import TranslationConfig, translation_rows

    assert TranslationConfig().row_format == "standard" and TranslationConfig().chunk_size == 4
    h = hashlib.sha256()
    for mode in ("offset", "permute"):
        for row_len in (5, 6, 9, 11, 65):
            p = build_presentation(mode, 3, 50, seed=2)
            rng = np.random.default_rng([row_len, 7])
            spans = rng.integers(0, 50, size=(6, span_length(row_len)))
            src, dst = np.array([0, 1, 2, 0, 1, 2]), np.array([1, 2, 0, 2, 0, 1])
            for loss_on in ("all", "target"):
                t, k = translation_rows(spans, p, src, dst, row_len, loss_on)
                t2, k2 = translation_rows(spans, p, src, dst, row_len, loss_on, "standard", 7)  # chunk ignored
                assert (t == t2).all() and (k == k2).all()
                h.update(t.tobytes())
                h.update(k.tobytes())
    assert h.hexdigest() == "9d7642805dbb32c056890fdaf737b29001ec4bb7cfd808296fc37787ad580ab8"


# ----------------------------------------------------------------------------- interleaved

def _reference_stream(span, src, dst, V, T, n, tr):
    """The reference's interleaved inputs x (length T, offset presentation), written as a stream cut
    at T: TRANS, then chunk k in src and chunk k in dst for k = 0, 1, ... Also its targets y
    (-1 = ignored) and per-position compartment ids."""
    x, cids = [tr], [src]
    k = 0
    while len(x) < T:
        chunk = list(span[k * n:(k + 1) * n])
        x += [t + src * V for t in chunk]
        cids += [src] * len(chunk)
        x += [t + dst * V for t in chunk]
        cids += [dst] * len(chunk)
        k += 1
    x, cids = x[:T], cids[:T]
    y = x[1:] + [-1]
    return x, y, cids


def test_interleaved_worked_example():
    # the docs' example: T = 16, chunk 4 -> one full pair, then 4 + 3 tokens; span of 8 base tokens
    V, row_len = 10, 17
    p = build_presentation("offset", 2, V)
    tr = p.translation_id
    assert span_length(row_len, "interleaved", 4) == 8
    toks, mask = translation_row(np.arange(1, 9), p, 0, 1, row_len, row_format="interleaved")
    assert toks.tolist() == [tr, 1, 2, 3, 4, 11, 12, 13, 14, 5, 6, 7, 8, 15, 16, 17, tr]
    assert mask.tolist() == [0] + [1] * 15 + [0]
    _, tmask = translation_row(np.arange(1, 9), p, 0, 1, row_len, loss_on="target", row_format="interleaved")
    assert tmask.tolist() == [0] * 5 + [1] * 4 + [0] * 4 + [1] * 3 + [0]
    lay = layout(row_len, "interleaved", 4)
    assert lay["marker_positions"] == [0] and lay["padding"] == (16, 17) and lay["span_length"] == 8
    assert lay["chunks"] == [("source", (1, 5), (0, 4)), ("target", (5, 9), (0, 4)),
                             ("source", (9, 13), (4, 8)), ("target", (13, 16), (4, 7))]
    from preschool.compartments.translation import row_compartments

    assert row_compartments(row_len, 0, 1, "interleaved").tolist() == [0] * 5 + [1] * 4 + [0] * 4 + [1] * 4


def test_paper_block_size_interleaved():
    # T = 64, chunk 4: 63 content positions = 7 full pairs + 4 source + 3 target; span of 32 tokens
    p = build_presentation("offset", 2, 100)
    assert span_length(65, "interleaved") == 32
    toks, mask = translation_row(np.arange(32), p, 1, 0, 65, row_format="interleaved")
    assert (toks[:64] == p.translation_id).sum() == 1 and toks[0] == toks[64] == p.translation_id
    np.testing.assert_array_equal(toks[1:5], np.arange(4) + 100)
    np.testing.assert_array_equal(toks[5:9], np.arange(4))
    np.testing.assert_array_equal(toks[57:61], np.arange(28, 32) + 100)
    np.testing.assert_array_equal(toks[61:64], np.arange(28, 31))
    assert mask.sum() == 63 and mask[0] == mask[64] == 0


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_interleaved_matches_reference_layout(n):
    import torch

    from preschool.compartments.model import compartment_ids
    from preschool.compartments.translation import row_compartments

    V, c = 13, 2
    p = build_presentation("offset", c, V)
    tr = p.translation_id
    for row_len in list(range(n + 3, n + 3 + 4 * n + 2)) + [65]:
        T = row_len - 1
        m = span_length(row_len, "interleaved", n)
        span = np.random.default_rng([row_len, n]).integers(0, V, size=m)
        for src, dst in ((0, 1), (1, 0)):
            toks, mask = translation_row(span, p, src, dst, row_len, row_format="interleaved", chunk_size=n)
            _, tmask = translation_row(span, p, src, dst, row_len, "target", "interleaved", n)
            x, y, cids = _reference_stream(span, src, dst, V, T, n, tr)
            # exact length; the reference's T inputs; one TRANS among them (+ our padding slot)
            assert toks.shape == (row_len,) and mask.shape == (row_len,)
            assert toks[:T].tolist() == x
            assert (toks[:T] == tr).sum() == 1 and toks[0] == tr and toks[T] == tr
            # loss as the reference: y[t] != -1 <=> the prediction of token t+1 is trained
            assert [bool(v != -1) for v in y] == mask[1:].astype(bool).tolist()
            assert mask[0] == 0
            # compartment ids: reference cids == ours == what the model reads from the ids
            comp = row_compartments(row_len, src, dst, "interleaved", n)
            assert comp[:T].tolist() == cids
            got = compartment_ids(torch.as_tensor(toks[:T])[None], c, V)[0].tolist()
            assert got == cids
            # chunks alternate source / target, each target chunk is the same span slice (cut at T)
            lay = layout(row_len, "interleaved", n)
            sides = [ch[0] for ch in lay["chunks"]]
            assert sides == ["source", "target"] * (len(sides) // 2) + ["source"] * (len(sides) % 2)
            assert lay["chunks"][0][1][0] == 1 and lay["chunks"][-1][1][1] == T
            for k, (side, (a, b), (sa, sb)) in enumerate(lay["chunks"]):
                assert b - a == sb - sa and 0 < b - a <= n
                np.testing.assert_array_equal(p.decode(toks[a:b], src if side == "source" else dst), span[sa:sb])
                if side == "target":
                    prev = lay["chunks"][k - 1]
                    assert prev[0] == "source" and prev[2][0] == sa and sb <= prev[2][1]
            # both streams decode back to the same span (the target one possibly cut short)
            s_dec = p.decode(toks[lay["source_positions"]], src)
            t_dec = p.decode(toks[lay["target_positions"]], dst)
            np.testing.assert_array_equal(s_dec, span)
            np.testing.assert_array_equal(t_dec, span[:len(t_dec)])
            assert len(span) - n <= len(t_dec) <= len(span)  # at most the last chunk is cut
            assert tmask.nonzero()[0].tolist() == lay["target_positions"]


def test_interleaved_permute_decodes_and_is_deterministic():
    p = build_presentation("permute", 3, 20, seed=4)
    span = np.arange(2, 2 + span_length(12, "interleaved", 3))
    a, ma = translation_row(span, p, 2, 0, 12, row_format="interleaved", chunk_size=3)
    b, mb = translation_row(span.copy(), p, 2, 0, 12, row_format="interleaved", chunk_size=3)
    assert (a == b).all() and (ma == mb).all()
    lay = layout(12, "interleaved", 3)
    np.testing.assert_array_equal(p.decode(a[lay["source_positions"]], 2), span)
    t = p.decode(a[lay["target_positions"]], 0)
    np.testing.assert_array_equal(t, span[:len(t)])


def test_interleaved_errors():
    p = build_presentation("offset", 2, 10)
    with pytest.raises(DataError, match="too short for an interleaved"):
        translation_row(np.arange(4), p, 0, 1, 6, row_format="interleaved", chunk_size=4)  # no target token
    translation_row(np.arange(4), p, 0, 1, 7, row_format="interleaved", chunk_size=4)  # 4 + 1 fits
    with pytest.raises(DataError, match="8 tokens"):
        translation_row(np.arange(4), p, 0, 1, 17, row_format="interleaved")
    with pytest.raises(DataError, match="two different"):
        translation_row(np.arange(8), p, 1, 1, 17, row_format="interleaved")
    with pytest.raises(DataError, match="loss_on"):
        translation_row(np.arange(8), p, 0, 1, 17, loss_on="source", row_format="interleaved")
    with pytest.raises(DataError, match="row_format"):
        translation_row(np.arange(8), p, 0, 1, 17, row_format="interleave")
    with pytest.raises(DataError, match="chunk_size"):
        translation_row(np.arange(8), p, 0, 1, 17, row_format="interleaved", chunk_size=0)


def test_translation_config_errors():
    from preschool.compartments.dataset import CompartmentsConfig
    from preschool.compartments.translation import TranslationConfig
    from preschool.config import from_dict
    from preschool.errors import ConfigError

    cfg = from_dict(TranslationConfig, {"fraction": 0.25, "row_format": "interleaved", "chunk_size": 2})
    assert cfg.row_format == "interleaved" and cfg.chunk_size == 2
    with pytest.raises(ConfigError, match="row_format: must be one of") as e:
        from_dict(TranslationConfig, {"row_format": "interleave"})
    assert e.value.field == "row_format" and "did you mean 'interleaved'" in str(e.value)
    with pytest.raises(ConfigError) as e:
        from_dict(CompartmentsConfig, {"translation": {"fraction": 0.2, "row_format": "interleaved", "chunk_size": 0}})
    assert e.value.field == "translation.chunk_size" and ">= 1" in str(e.value)
    with pytest.raises(ConfigError) as e:
        from_dict(CompartmentsConfig, {"translation": {"chunk_size": "four"}})
    assert e.value.field == "translation.chunk_size"
    with pytest.raises(ConfigError) as e:
        TranslationConfig(row_format="zigzag").validate()  # built in code, not from YAML
    assert e.value.field == "row_format"
    with pytest.raises(ConfigError) as e:
        TranslationConfig(chunk_size=-1).validate()
    assert e.value.field == "chunk_size"
