import numpy as np
import pytest

from preschool.compartments.dataset import CompartmentsConfig, read_plan, write_compartment_val, write_compartmented
from preschool.compartments.presentation import build_presentation
from preschool.compartments.translation import TranslationConfig, span_length
from preschool.config import from_dict
from preschool.data.shards import ShardSet, ShardWriter
from preschool.errors import ConfigError, DataError


def _source(path, n=40, row_len=9, V=30, seed=0):
    rng = np.random.default_rng(seed)
    toks = rng.integers(0, V, size=(n, row_len))
    with ShardWriter(path, row_len, V, arrays=["loss_mask"]) as w:
        w.add_rows(toks, loss_mask=np.ones_like(toks, np.uint8))
    return toks


def test_write_compartmented_plain_and_translation(tmp_path):
    base = _source(tmp_path / "src")
    cfg = from_dict(CompartmentsConfig, {"n_compartments": 3, "translation": {"fraction": 0.25}, "seed": 1})
    man = write_compartmented(tmp_path / "src", tmp_path / "out", cfg, n_rows=60, chunk_rows=16)
    out = ShardSet(tmp_path / "out")
    p = build_presentation("offset", 3, 30)
    assert out.vocab_size == 91 and len(out) == 60
    plan = read_plan(tmp_path / "out")
    assert plan.is_translation.sum() == 15 and man["compartments"]["source_passes"] == 1.5
    m = span_length(9)
    for r in range(60):
        row = out.row(r)
        src_row = base[r % 40]
        if plan.dst[r] < 0:
            np.testing.assert_array_equal(row, p.encode(src_row, int(plan.src[r])))
        else:
            assert row[0] == row[m + 1] == p.translation_id
            np.testing.assert_array_equal(p.decode(row[1:m + 1], int(plan.src[r])), src_row[:m])
            np.testing.assert_array_equal(p.decode(row[m + 2:2 * m + 2], int(plan.dst[r])), src_row[:m])
            assert out.row(r, "loss_mask")[-1] == 0


def test_write_is_deterministic(tmp_path):
    _source(tmp_path / "src")
    cfg = CompartmentsConfig(n_compartments=2, seed=5)
    write_compartmented(tmp_path / "src", tmp_path / "a", cfg)
    write_compartmented(tmp_path / "src", tmp_path / "b", cfg, chunk_rows=7)
    np.testing.assert_array_equal(ShardSet(tmp_path / "a").rows(range(40)), ShardSet(tmp_path / "b").rows(range(40)))


def test_val_sets_share_rows(tmp_path):
    base = _source(tmp_path / "val", n=5)
    paths = write_compartment_val(tmp_path / "val", tmp_path / "v", CompartmentsConfig(n_compartments=4))
    assert sorted(paths) == ["c0", "c1", "c2", "c3"]
    for i in range(4):
        np.testing.assert_array_equal(ShardSet(paths[f"c{i}"]).rows(range(5)), base + 30 * i)


def test_config_errors():
    with pytest.raises(ConfigError, match="translation_fraction"):
        from_dict(CompartmentsConfig, {"n_compartments": 1, "translation": {"fraction": 0.3}})
    with pytest.raises(ConfigError, match="presentation"):
        from_dict(CompartmentsConfig, {"presentation": "shift"})
    assert TranslationConfig().loss_on == "all"


def test_translation_val_rows_cycle_pairs_and_train_target_only(tmp_path):
    from preschool.compartments.dataset import write_translation_val

    base = _source(tmp_path / "val", n=7)
    out = write_translation_val(tmp_path / "val", tmp_path / "tr", CompartmentsConfig(n_compartments=3))
    s = ShardSet(out)
    p = build_presentation("offset", 3, 30)
    m = span_length(9)
    pairs = [(i, j) for i in range(3) for j in range(3) if i != j]
    for r in range(7):
        i, j = pairs[r % 6]
        row, mask = s.row(r), s.row(r, "loss_mask")
        np.testing.assert_array_equal(row[1:m + 1], base[r, :m] + 30 * i)
        np.testing.assert_array_equal(row[m + 2:2 * m + 2], base[r, :m] + 30 * j)
        assert mask.tolist() == [0] * (m + 2) + [1] * m + [0] * (9 - 2 * m - 2)
    assert row[0] == p.translation_id


def _digest(*dirs):
    import hashlib

    h = hashlib.sha256()
    for d in dirs:
        s = ShardSet(d)
        for arr in ("tokens", "loss_mask", "segments"):
            h.update(np.stack([s.row(r, arr) for r in range(len(s))]).astype(np.int64).tobytes())
    return h.hexdigest()


def test_standard_translation_dataset_unchanged(tmp_path):
    """Standard-format training and translation-val shards hash to the value computed before
    ``row_format`` existed, and the config record (manifests, arm-data cache key) has no new keys."""
    from preschool.compartments.dataset import write_translation_val

    _source(tmp_path / "src")
    cfg = from_dict(CompartmentsConfig, {"n_compartments": 3, "translation": {"fraction": 0.25}, "seed": 1})
    man = write_compartmented(tmp_path / "src", tmp_path / "out", cfg, n_rows=60, chunk_rows=16)
    write_translation_val(tmp_path / "src", tmp_path / "tr", cfg)
    assert _digest(tmp_path / "out", tmp_path / "tr") == \
        "5db05017e0a48e701eef271296da7ad322c7df5136cb15713d3126f57f2f80e9"
    assert man["compartments"]["config"]["translation"] == {"fraction": 0.25, "mode": "absolute", "loss_on": "all"}
    assert cfg.record()["translation"] == {"fraction": 0.25, "mode": "absolute", "loss_on": "all"}


def test_write_compartmented_interleaved(tmp_path):
    from preschool.compartments.translation import layout, translation_row

    base = _source(tmp_path / "src")  # row_len 9: T = 8, 7 content positions
    spec = {"n_compartments": 3, "translation": {"fraction": 0.3, "row_format": "interleaved", "chunk_size": 2},
            "seed": 3}
    cfg = from_dict(CompartmentsConfig, spec)
    man = write_compartmented(tmp_path / "src", tmp_path / "a", cfg, n_rows=70, chunk_rows=16)
    write_compartmented(tmp_path / "src", tmp_path / "b", from_dict(CompartmentsConfig, spec), n_rows=70, chunk_rows=5)
    a, b = ShardSet(tmp_path / "a"), ShardSet(tmp_path / "b")
    np.testing.assert_array_equal(a.rows(range(70)), b.rows(range(70)))  # deterministic, chunking-free
    assert man["compartments"]["config"]["translation"]["row_format"] == "interleaved"
    assert man["compartments"]["config"]["translation"]["chunk_size"] == 2
    plan = read_plan(tmp_path / "a")
    assert plan.is_translation.sum() in (21, 22)  # 0.3 * 70 over six ordered pairs, largest remainder
    p = build_presentation("offset", 3, 30)
    m = span_length(9, "interleaved", 2)
    assert m == 4  # chunks 2 + 2, 2 + 1
    lay = layout(9, "interleaved", 2)
    for r in range(70):
        row, mask = a.row(r), a.row(r, "loss_mask")
        src_row = base[r % 40]
        i, j = int(plan.src[r]), int(plan.dst[r])
        if j < 0:
            np.testing.assert_array_equal(row, p.encode(src_row, i))
            continue
        # a function of (seed, index): the plan's pair and the first m tokens of source row r mod S
        want, wmask = translation_row(src_row[:m], p, i, j, 9, "all", "interleaved", 2)
        np.testing.assert_array_equal(row, want)
        np.testing.assert_array_equal(mask, wmask)
        assert (row[:-1] == p.translation_id).sum() == 1 and row[0] == p.translation_id
        np.testing.assert_array_equal(p.decode(row[lay["source_positions"]], i), src_row[:m])
        np.testing.assert_array_equal(p.decode(row[lay["target_positions"]], j), src_row[:3])
        assert mask.tolist() == [0] + [1] * 7 + [0]


def test_interleaved_translation_val_and_errors(tmp_path):
    from preschool.compartments.dataset import write_translation_val

    base = _source(tmp_path / "val", n=7)
    cfg = from_dict(CompartmentsConfig, {"n_compartments": 2,
                                         "translation": {"fraction": 0.2, "row_format": "interleaved"}})
    s = ShardSet(write_translation_val(tmp_path / "val", tmp_path / "tr", cfg))
    # row_len 9, chunk 4: TRANS, 4 source tokens, 3 target tokens, padding; loss on the target chunk only
    for r in range(7):
        i, j = [(0, 1), (1, 0)][r % 2]
        row, mask = s.row(r), s.row(r, "loss_mask")
        np.testing.assert_array_equal(row[1:5], base[r, :4] + 30 * i)
        np.testing.assert_array_equal(row[5:8], base[r, :3] + 30 * j)
        assert mask.tolist() == [0] * 5 + [1] * 3 + [0]
    short = from_dict(CompartmentsConfig, {"n_compartments": 2,
                                           "translation": {"fraction": 0.2, "row_format": "interleaved",
                                                           "chunk_size": 7}})
    with pytest.raises(DataError, match="too short for translation rows.*chunk_size 7: needs >= 10"):
        write_compartmented(tmp_path / "val", tmp_path / "x", short)
