import json

import numpy as np
import pytest

from preschool.data.shards import ShardSet, ShardWriter, token_dtype
from preschool.errors import DataError


def _write(path, rows=10, row_len=9, vocab=500, rows_per_shard=4, mask=True):
    rng = np.random.default_rng(0)
    toks = rng.integers(0, vocab, size=(rows, row_len))
    m = rng.integers(0, 2, size=(rows, row_len))
    with ShardWriter(path, row_len, vocab, arrays=["loss_mask"] if mask else [], rows_per_shard=rows_per_shard) as w:
        for i in range(rows):
            if mask:
                w.add_rows(toks[i], loss_mask=m[i])
            else:
                w.add_rows(toks[i])
        man = w.close(source={"kind": "test"}, seed=7)
    return toks, m, man


def test_round_trip_across_shard_files(tmp_path):
    toks, m, man = _write(tmp_path / "s")
    ss = ShardSet(tmp_path / "s")
    assert len(ss) == 10 and man["n_rows"] == 10 and len(man["shards"]) == 3  # 4 + 4 + 2
    assert np.array_equal(ss.rows(range(10)), toks)
    assert np.array_equal(ss.rows([9, 0, 5], "loss_mask"), m[[9, 0, 5]])
    assert ss.manifest["seed"] == 7 and ss.manifest["source"] == {"kind": "test"}
    assert ss.dtype == np.uint16 and ss.has_loss_mask


def test_dtype_by_vocab():
    assert token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32


def test_truncated_shard_detected(tmp_path):
    _write(tmp_path / "s")
    f = tmp_path / "s" / "tokens-00001.bin"
    f.write_bytes(f.read_bytes()[:-3])
    with pytest.raises(DataError, match="tokens-00001.bin: truncated"):
        ShardSet(tmp_path / "s")


def test_corrupted_shard_detected(tmp_path):
    _write(tmp_path / "s")
    f = tmp_path / "s" / "tokens-00000.bin"
    b = bytearray(f.read_bytes())
    b[5] ^= 0xFF
    f.write_bytes(bytes(b))
    with pytest.raises(DataError, match="checksum mismatch"):
        ShardSet(tmp_path / "s")
    ShardSet(tmp_path / "s", verify="size")  # size-only check cannot see a flipped byte


def test_corrupt_manifest_and_missing_set(tmp_path):
    _write(tmp_path / "s")
    (tmp_path / "s" / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="manifest is corrupt"):
        ShardSet(tmp_path / "s")
    with pytest.raises(DataError, match="not a shard set"):
        ShardSet(tmp_path / "nothing")


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path / "s", 5, 100) as w:
            w.add_rows(np.zeros((3, 5), int))
            raise RuntimeError("boom")
    assert not (tmp_path / "s").exists()
    assert list(tmp_path.iterdir()) == []


def test_out_of_range_ids_rejected(tmp_path):
    with pytest.raises(ValueError, match="out of range"):
        with ShardWriter(tmp_path / "s", 4, 10) as w:
            w.add_rows(np.array([1, 2, 3, 10]))


def test_manifest_counts(tmp_path):
    _, _, man = _write(tmp_path / "s", rows=6, row_len=5)
    on_disk = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert on_disk["n_tokens"] == 30 and on_disk["seq_len"] == 4
    assert all(len(f["sha256"]) == 64 for sh in on_disk["shards"] for f in sh["files"].values())
