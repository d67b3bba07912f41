import numpy as np
import pytest

from preschool.compartments.dataset import CompartmentsConfig, read_plan, write_compartment_val, write_compartmented
from preschool.compartments.offsets import build_presentation
from preschool.compartments.translation import TranslationConfig, span_length
from preschool.config import from_dict
from preschool.data.shards import ShardSet, ShardWriter
from preschool.errors import ConfigError


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
