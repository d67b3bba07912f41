import numpy as np
import pytest

from preschool.data.mixture import Mixture, rank_indices
from preschool.data.shards import ShardSet, ShardWriter
from preschool.errors import ConfigError, DataError


def make_set(path, n_rows, row_len=9, base=0, mask=False, segments=False):
    arrays = (["loss_mask"] if mask else []) + (["segments"] if segments else [])
    with ShardWriter(path, row_len, 1000, arrays=arrays, rows_per_shard=7) as w:
        for i in range(n_rows):
            extra = {}
            if mask:
                extra["loss_mask"] = (np.arange(row_len) % 2).astype(np.uint8)
            if segments:
                extra["segments"] = (np.arange(row_len) >= row_len // 2).astype(np.uint16)
            w.add_rows(np.full(row_len, base + i), **extra)
    return ShardSet(path)


def test_cumulative_counts_round_the_shares_of_every_prefix():
    from preschool.data.mixture import cumulative_counts

    assert cumulative_counts(np.array([0.3, 0.7]), 16).tolist() == [5, 11]
    assert cumulative_counts(np.array([1, 1, 1]), 10).tolist() == [4, 3, 3]  # ties to the lower index
    assert cumulative_counts(np.array([1.0]), 5).tolist() == [5]
    assert cumulative_counts(np.array([0.0, 2.0]), 7).tolist() == [0, 7]
    rng = np.random.default_rng(0)
    for m in (2, 3):
        for _ in range(40):
            w = rng.random(m) ** 3
            prev = np.zeros(m, np.int64)
            for n in range(300):
                c = cumulative_counts(w, n)
                assert c.sum() == n and (c >= prev).all()  # a prefix of one sequence: never shrinks
                assert (np.abs(c - w / w.sum() * n) < (0.5 + 1e-9 if m == 2 else 1)).all()
                prev = c


@pytest.mark.parametrize("batch", [16, 7, 64, 100])
def test_a_stage_realises_its_weights_to_within_a_row_whatever_the_batch(tmp_path, batch):
    # ppt_timing_stack.yaml's mixed arm: pt 600k : stack 60k. Rounding 16 x 1/11 = 1.45 STACK rows per
    # batch down in every batch gave 323 instead of 470 STACK rows (-31%) over the stage's 323 steps.
    a, b = make_set(tmp_path / "a", 50), make_set(tmp_path / "b", 9, base=100)
    m = Mixture({"pt": a, "stack": b}, {"pt": 600_000, "stack": 60_000}, seed=1, window=batch)
    n = 40 * batch
    srcs = [m.locate(j)[0] for j in range(n)]
    for k in range(1, 41):  # after every batch, the STACK rows so far are 1/11 of the rows so far, rounded
        assert abs(srcs[:k * batch].count(1) - k * batch / 11) <= 0.5
    assert srcs.count(1) == m.rows_before(n)["stack"] == round(n / 11)
    for steps in (1, 5, 33, 323):
        got = m.rows_before(steps * batch)
        assert sum(got.values()) == steps * batch and abs(got["stack"] - steps * batch / 11) <= 0.5
    # every window still holds exactly `batch` samples, and source rows cycle epoch by epoch
    stack_rows = [r for s, r in (m.locate(j) for j in range(n)) if s == 1]
    assert sorted(stack_rows[:9]) == list(range(9)) and sorted(stack_rows[9:18]) == list(range(9))
    assert [m.locate(j) for j in reversed(range(n))][::-1] == [m.locate(j) for j in range(n)]  # pure in j


def test_single_source_epochs_are_permutations(tmp_path):
    s = make_set(tmp_path / "a", 13)
    m = Mixture({"a": s}, seed=3, window=4)
    rows = [m.locate(j)[1] for j in range(39)]
    for e in range(3):
        assert sorted(rows[13 * e:13 * (e + 1)]) == list(range(13))
    assert rows[:13] != rows[13:26]  # fresh order each epoch
    m2 = Mixture({"a": s}, seed=3, window=4)
    assert [m2.locate(j) for j in reversed(range(39))][::-1] == [m.locate(j) for j in range(39)]  # pure in j
    assert [Mixture({"a": s}, seed=4, window=4).locate(j)[1] for j in range(13)] != rows[:13]
    assert [Mixture({"a": s}, seed=3, stage_index=1, window=4).locate(j)[1] for j in range(13)] != rows[:13]


def test_mixture_weights_exact_per_window(tmp_path):
    a, b = make_set(tmp_path / "a", 5), make_set(tmp_path / "b", 50, base=100)
    m = Mixture({"a": a, "b": b}, {"a": 0.25, "b": 0.75}, seed=0, window=8)
    for k in range(6):
        srcs = [m.locate(j)[0] for j in range(8 * k, 8 * k + 8)]
        assert srcs.count(0) == 2 and srcs.count(1) == 6
    # rows of each source still cycle through epochs without repeats inside an epoch
    a_rows = [r for s, r in (m.locate(j) for j in range(80)) if s == 0]
    assert sorted(a_rows[:5]) == list(range(5)) and sorted(a_rows[5:10]) == list(range(5))
    batch = m.load(list(range(8)))
    assert set(np.unique(batch["input_ids"][batch["source"] == 0])) <= set(range(5))
    assert set(np.unique(batch["input_ids"][batch["source"] == 1])) <= set(range(100, 150))


def test_batch_masks_and_segments(tmp_path):
    a = make_set(tmp_path / "a", 4, mask=True, segments=True)
    b = make_set(tmp_path / "b", 4, base=50)
    m = Mixture({"a": a, "b": b}, {"a": 1, "b": 1}, window=4)
    batch = m.load([0, 1, 2, 3])
    assert batch["input_ids"].shape == (4, 8) and batch["labels"].shape == (4, 8)
    for i in range(4):
        if batch["source"][i] == 0:
            # loss_mask[j] applies to the prediction of token j: labels = row[1:], masked where mask[1:] == 0
            assert batch["loss_mask"][i].tolist() == [1, 0, 1, 0, 1, 0, 1, 0]
            assert (batch["labels"][i][1::2] == -100).all() and (batch["labels"][i][::2] >= 0).all()
            assert batch["segments"][i].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
        else:
            assert (batch["loss_mask"][i] == 1).all() and (batch["segments"][i] == 0).all()


def test_rank_split_recomposes_global_batch(tmp_path):
    a, b = make_set(tmp_path / "a", 11), make_set(tmp_path / "b", 7, base=100)
    m = Mixture({"a": a, "b": b}, {"a": 2, "b": 1}, seed=5, window=6)
    full = m.load(rank_indices(3, 6))["input_ids"]
    parts = [m.load(rank_indices(3, 6, r, 2))["input_ids"] for r in range(2)]
    merged = np.empty_like(full)
    merged[0::2], merged[1::2] = parts
    assert np.array_equal(full, merged)
    with pytest.raises(ConfigError, match="batch_size"):
        rank_indices(0, 6, 0, 4)


def test_errors_name_source(tmp_path):
    a = make_set(tmp_path / "a", 3)
    c = make_set(tmp_path / "c", 3, row_len=5)
    with pytest.raises(ConfigError, match="data.zz"):
        Mixture({"a": a}, {"zz": 1.0})
    with pytest.raises(DataError, match="row lengths"):
        Mixture({"a": a, "c": c})
    with pytest.raises(ConfigError, match="data.b"):
        Mixture.from_spec({"b": 1.0}, {"a": tmp_path})


def test_row_permutation_is_numpys_in_half_the_memory():
    from preschool.data.mixture import _permutation

    for n in (1, 2, 7, 1000, 100_003):
        for seed in ([0, 0, 0, 0], [3, 1, 2, 5]):
            got = _permutation(n, np.random.default_rng(seed))
            assert got.dtype == np.uint32
            assert (got == np.random.default_rng(seed).permutation(n)).all()
