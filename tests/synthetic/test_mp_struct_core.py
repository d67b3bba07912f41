import hashlib

import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATORS
from preschool.synthetic.mp_struct_core import HEAD_CP, HEAD_TP, HEAD_VP, LEAF, MOVE, SELECT, STRUCT, MPStructCore


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


# --- use_complex_args (0-2 VP arguments) ---------------------------------------------------

# sha256 over the symbols of items 0..5, recorded before use_complex_args existed: with the
# option off (the default) documents must stay byte-identical.
_DEFAULT_HASHES = {
    (0, "heads", 2048): "9395a259eaf862f5",
    (0, "heads", 100): "df0f116cfe077331",
    (0, "none", 2048): "a81a74fcecc763c9",
    (1, "heads", 2048): "ad040d34a893857f",
    (1, "none", 100): "867b10d82d2111e1",
    (7, "heads", 2048): "43721bac87c23d8e",
    (7, "none", 2048): "cedc096575d49644",
}


@pytest.mark.parametrize("key", sorted(_DEFAULT_HASHES))
def test_option_off_output_is_byte_identical_to_before(key):
    seed, markers, length = key
    for g in (GENERATORS.build("mp_struct_core", {"seed": seed, "markers": markers, "length": length}),
              _gen(seed=seed, markers=markers, length=length, use_complex_args=False)):
        h = hashlib.sha256()
        for it in g.items(0, 6):
            assert "arg_counts" not in it.meta
            h.update(it.symbols.tobytes())
        assert h.hexdigest()[:16] == _DEFAULT_HASHES[key]


def _sentences(s):
    """Complete sentences (split at structural depth 0) and the unfinished tail."""
    out, start, depth = [], 0, 0
    for i, x in enumerate(s):
        depth += (x == STRUCT) - (x == 5)
        assert depth >= 0
        if depth == 0 and x == 5:
            out.append(s[start: i + 1])
            start = i + 1
    return out, s[start:]


def _vp(t):
    """Children of the VP (third child of TP, third child of CP) as nested lists."""
    stack = [[]]
    for x in t:
        if x == STRUCT:
            stack.append([])
        elif x == 5:
            node = stack.pop()
            stack[-1].append(node)
        else:
            stack[-1].append(x)
    return stack[0][0][2][2]


def test_complex_args_default_off_and_sentence_lengths():
    g = _gen()
    assert g.cfg.use_complex_args is False and g.cfg.complex_arg_probs == (0.33, 0.33, 0.34)
    c = _gen(use_complex_args=True)
    for move, base in ((False, 29), (True, 33)):
        for n in range(3):
            perm = tuple(range(2 + n))
            assert len(c.sentence(move, 2, perm)) == base + 8 * n == c.sentence_length(move, n)
    assert len(_gen(use_complex_args=True, markers="none").sentence(False, 2, (1, 0))) == 26


def test_complex_args_counts_0_1_2_all_occur_and_trees_are_well_formed():
    g = _gen(length=2048, use_complex_args=True)
    seen = [0, 0, 0]
    for it in g.items(0, 30):
        s = it.symbols.tolist()
        assert len(s) == 2048
        g.check(it)
        full, tail = _sentences(s)
        assert len(full) + bool(tail) == it.meta["sentences"]
        for t in full:
            n = t.count(SELECT) - 1  # the subject DP holds one local pair, each argument one
            assert n in (0, 1, 2)
            seen[n] += 1
            assert len(t) == (41 if MOVE in t else 37) + 8 * (n - 1)
            for typ in (MOVE, 2, 3, SELECT):  # each dependency type: opens == closes, open first
                opens = [i for i, x in enumerate(t) if x == typ]
                closes = [i for i, x in enumerate(t) if x == typ + 5]
                assert len(opens) == len(closes) and all(a < b for a, b in zip(opens, closes))
            vp = _vp(t)
            assert len(vp) == 2 + n and vp.count([[SELECT], [SELECT + 5]]) == n
            assert vp.count([HEAD_VP]) == 1
    assert min(seen) > 0, seen
    total = sum(seen)
    for k, p in enumerate((0.33, 0.33, 0.34)):  # ~1700 sentences: 4 sigma is about 0.045
        assert abs(seen[k] / total - p) < 0.05, seen


def test_complex_args_vp_elements_are_shuffled_together():
    # the V head can take every position among the 2 + n VP elements (reference: one shuffle)
    g = _gen(length=2048, use_complex_args=True)
    where = {0: set(), 1: set(), 2: set()}
    for it in g.items(0, 10):
        for t in _sentences(it.symbols.tolist())[0]:
            vp = _vp(t)
            where[len(vp) - 2].add(vp.index([HEAD_VP]))
    assert where == {0: {0, 1}, 1: {0, 1, 2}, 2: {0, 1, 2, 3}}


@pytest.mark.parametrize("length", [1, 7, 29, 30, 100, 1000, 2048])
def test_complex_args_exact_length_and_determinism(length):
    g = _gen(length=length, use_complex_args=True)
    again = _gen(length=length, use_complex_args=True)
    other = _gen(length=length, use_complex_args=True, seed=1)
    items = list(g.items(0, 8))
    differs = 0
    for i in reversed(range(8)):  # another instance, reverse order: same bytes
        it = items[i]
        assert it.symbols.dtype == np.int64 and len(it.symbols) == length
        g.check(it)
        assert again.item(i).symbols.tobytes() == it.symbols.tobytes()
        assert again.item(i).meta == it.meta
        differs += other.item(i).symbols.tobytes() != it.symbols.tobytes()
    if length >= 100:
        assert differs >= 7


def test_complex_arg_probs_and_validation():
    only0 = _gen(use_complex_args=True, complex_arg_probs=[1, 0, 0])  # a YAML list is accepted
    assert only0.cfg.complex_arg_probs == (1.0, 0.0, 0.0)
    it = only0.item(0)
    only0.check(it)
    assert it.meta["arg_counts"][1:] == [0, 0] and it.symbols.tolist().count(SELECT) == it.meta["sentences"]
    only2 = _gen(use_complex_args=True, complex_arg_probs=(0, 0, 1))
    it = only2.item(0)
    only2.check(it)
    assert it.meta["arg_counts"][:2] == [0, 0]
    for bad in ((0.5, 0.5, 0.5), (1.2, -0.2, 0.0), (0.5, 0.5)):
        with pytest.raises(ConfigError) as e:
            _gen(use_complex_args=True, complex_arg_probs=bad)
        assert e.value.field == "complex_arg_probs"


def test_check_rejects_argument_counts_the_config_does_not_allow():
    it = _gen(use_complex_args=True, complex_arg_probs=(0, 0, 1)).item(0)
    with pytest.raises(AssertionError):
        _gen().check(it)  # two arguments with the option off
    with pytest.raises(AssertionError):
        _gen(use_complex_args=True, complex_arg_probs=(0.5, 0.5, 0)).check(it)


def test_markers_docs_map_none_to_no_head_diversity():
    """LAD-PPT ``use_head_diversity=False`` emits no head tokens: that is ``markers: none``, not ``uniform``."""
    import io

    from preschool.commands.generate import list_tasks

    out = io.StringIO()
    list_tasks(out)
    line = next(ln for ln in out.getvalue().splitlines() if ln.strip().startswith("markers = 'heads'"))
    assert "heads / none = LAD-PPT use_head_diversity True / False" in line and "uniform: ours" in line
    # the reference flag's False really is the head-less variant: no head symbol of any kind
    none = _gen(markers="none").item(0).symbols
    assert not {HEAD_CP, HEAD_TP, HEAD_VP, LEAF} & set(none.tolist())
