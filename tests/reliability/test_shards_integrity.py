"""Shard integrity before training and evaluation (issue 11, item 2): a flipped byte or an
out-of-range token id stops the run with an error naming the file, before any step."""

import json

import numpy as np
import pytest

from preschool.cli import main
from preschool.config import from_dict
from preschool.data.shards import ShardSet, ShardWriter, content_sha256
from preschool.errors import ConfigError, DataError
from preschool.evals import EVALUATORS
from preschool.train.trainer import TrainConfig, train


def _flip_byte(f, at=7):
    b = bytearray(f.read_bytes())
    b[at] ^= 0x01  # ids stay in range: the low bit of a small uint16
    f.write_bytes(bytes(b))


def test_flipped_bytes_in_a_training_shard_stop_the_run_naming_the_file(tmp_path, datasets, micro_cfg):
    bad = datasets["text"] / "train" / "tokens-00000.bin"
    _flip_byte(bad)
    with pytest.raises(DataError, match=f"{bad}: checksum mismatch") as e:
        train(micro_cfg(), tmp_path / "run", datasets)
    assert "rebuild" in str(e.value)  # the fix, not just the fault
    assert not (tmp_path / "run" / "checkpoints").exists()  # nothing trained on it


def test_flipped_bytes_in_a_val_shard_are_caught_too(tmp_path, datasets, micro_cfg):
    bad = datasets["text"] / "val" / "tokens-00000.bin"
    _flip_byte(bad)
    with pytest.raises(DataError, match=f"{bad}: checksum mismatch"):
        train(micro_cfg(), tmp_path / "run", datasets)


def test_cli_reports_a_corrupt_shard_in_one_line(tmp_path, datasets, capsys):
    import yaml

    _flip_byte(datasets["text"] / "train" / "tokens-00000.bin")
    cfg = {"train": {"model": {"preset": "micro", "overrides": {"hidden_size": 32}}, "batch_size": 4, "progress": False,
                     "stages": [{"name": "pt", "data": "text", "tokens": 4 * 16 * 2}]},
           "datasets": {k: str(v) for k, v in datasets.items()}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["train", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tokens-00000.bin: checksum mismatch" in err[0] and "Traceback" not in err[0]


def test_verify_size_is_a_config_choice_and_skips_the_hash(tmp_path, datasets, micro_cfg):
    assert from_dict(TrainConfig, micro_cfg()).verify == "full"
    with pytest.raises(ConfigError, match="verify"):
        from_dict(TrainConfig, micro_cfg(verify="sha"))
    _flip_byte(datasets["text"] / "train" / "tokens-00000.bin")
    res = train(micro_cfg(verify="size"), tmp_path / "run", datasets)  # the user's explicit trade-off
    assert res["steps"] == 8


def test_verification_cost_is_printed_once(tmp_path, datasets, micro_cfg, capsys):
    train(micro_cfg(), tmp_path / "run", datasets)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("[preschool] verified")]
    # train/ and val/ of the one dataset trained on, each hashed once although opened several times
    assert sorted(lines) == sorted(set(lines)) and len(lines) == 2
    assert any(str(datasets["text"] / "train") in x for x in lines) and all("MB sha256 in" in x for x in lines)


def test_data_sha256_comes_from_verified_files(tmp_path, datasets):
    before = content_sha256(datasets["text"])
    assert before == content_sha256(datasets["text"])
    _flip_byte(datasets["text"] / "val" / "tokens-00000.bin")
    with pytest.raises(DataError, match="checksum mismatch"):
        content_sha256(datasets["text"])


def _big_id_dataset(root, manifest_vocab):
    """A dataset whose ids reach 499 but whose manifest claims a smaller vocabulary and, like
    manifests written before max ids were recorded, has no ``max_id``."""
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        with ShardWriter(root / "big" / split, 17, 500) as w:
            w.add_rows(rng.integers(0, 500, size=(16, 17)))
            w.add_rows(np.full(17, 499))
        mpath = root / "big" / split / "manifest.json"
        man = json.loads(mpath.read_text())
        man["vocab_size"] = manifest_vocab
        man.pop("max_token_id")
        for entry in man["shards"]:
            entry["files"]["tokens"].pop("max_id")
        mpath.write_text(json.dumps(man))
    return root / "big"


def test_writer_records_the_max_token_id(tmp_path):
    with ShardWriter(tmp_path / "s", 5, 1000, rows_per_shard=2) as w:
        w.add_rows(np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [0, 0, 0, 0, 812]]))
        man = w.close()
    assert man["max_token_id"] == 812
    assert [e["files"]["tokens"]["max_id"] for e in man["shards"]] == [10, 812]
    ss = ShardSet(tmp_path / "s")
    ss.check_vocab(813)
    with pytest.raises(DataError, match=r"tokens-00001.bin: token id 812 >= the model's vocab_size 812"):
        ss.check_vocab(812)


def test_out_of_range_ids_name_the_file_instead_of_an_index_error(tmp_path, micro_cfg):
    data = {"big": _big_id_dataset(tmp_path / "data", manifest_vocab=64)}
    cfg = micro_cfg(stages=[{"name": "pt", "data": "big", "tokens": 4 * 16 * 2}])
    for verify in ("full", "size"):  # an old manifest's max id is computed on open in either mode
        with pytest.raises(DataError, match=r"big/train/tokens-00000.bin: token id 499 >= the model's vocab_size 64"):
            train(micro_cfg(**{**cfg, "verify": verify}), tmp_path / f"run-{verify}", data)


def test_heldout_eval_verifies_and_checks_ids(tmp_path, datasets):
    from preschool.train.model import ModelConfig, build_model

    ev = EVALUATORS.build("heldout", {"sources": {"t": str(datasets["text"])}, "verify": "full"})
    model = build_model(ModelConfig(preset="micro", overrides={"hidden_size": 32}), 64, seed=0)
    assert ev.evaluate(model, None).metrics["loss"] > 0
    _flip_byte(datasets["text"] / "val" / "tokens-00000.bin")
    with pytest.raises(DataError, match="val/tokens-00000.bin: checksum mismatch"):
        ev.evaluate(model, None)
    big = _big_id_dataset(tmp_path / "data", manifest_vocab=64)
    ev = EVALUATORS.build("heldout", {"sources": {"b": str(big)}, "verify": "size"})
    with pytest.raises(DataError, match=r"big/val/tokens-00000.bin: token id 499"):
        ev.evaluate(model, None)


def _understated_max_id(dataset, big_id=200):
    """Put ``big_id`` into the last row of train/tokens-00000.bin and recompute its size and sha256 in
    the manifest, leaving ``max_id`` / ``max_token_id`` as they were (issue 22, item 8)."""
    from preschool.io import sha256_file

    split = dataset / "train"
    f = split / "tokens-00000.bin"
    man = json.loads((split / "manifest.json").read_text())
    arr = np.fromfile(f, dtype=man["dtype"]).reshape(-1, man["row_len"])
    arr[-1, 3] = big_id
    arr.tofile(f)
    info = man["shards"][0]["files"]["tokens"]
    info["sha256"], info["bytes"] = sha256_file(f), f.stat().st_size
    assert info["max_id"] < big_id  # the manifest under-states the file
    (split / "manifest.json").write_text(json.dumps(man))
    return f


@pytest.mark.parametrize("verify", ["full", "size"])
def test_a_manifest_understating_max_id_never_reaches_the_embedding(tmp_path, datasets, micro_cfg, verify):
    bad = _understated_max_id(datasets["text"])
    # 32 steps of 4 rows: two epochs of the 64 training rows, so the bad row is drawn under "size" too
    cfg = micro_cfg(verify=verify, eval_every=0, checkpoint_every=4,
                    stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 32}])
    with pytest.raises(DataError, match=f"{bad}.*token id 200 >= the model's vocab_size 64"):
        train(cfg, tmp_path / "run", datasets)
    if verify == "full":  # the hash pass reads every id anyway: caught on open, before the first step
        assert not (tmp_path / "run" / "checkpoints").exists()


def test_size_verified_rows_are_checked_as_they_are_read(tmp_path, datasets):
    bad = _understated_max_id(datasets["text"])
    ss = ShardSet(datasets["text"] / "train", verify="size")
    ss.check_vocab(64)  # the manifest's word is all an unhashed open has
    last = len(ss) - 1
    ss.rows(range(last))  # rows below the limit read as before
    with pytest.raises(DataError, match=rf"{bad}: row {last} holds token id 200 >= the model's vocab_size 64"):
        ss.rows([last])
