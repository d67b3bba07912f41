"""A file preschool reads back that is damaged ends the command in one line naming it (issue 48): garbage
JSON, JSON nested 100,000 deep, bytes that are not UTF-8, a manifest ``dtype`` no shard can have, a BLiMP
line holding half a UTF-16 pair. Each of these was a traceback (JSONDecodeError, RecursionError's
stand-in, UnicodeDecodeError, numpy's ValueError, a TypeError from the tokenizer)."""

import json

import pytest
import yaml

from preschool.cli import main
from preschool.errors import DataError
from preschool.evals.minimal_pairs import read_jsonl_pairs


def _errors(capsys) -> list[str]:
    """stderr's lines without the progress notes (``[preschool] ...``)."""
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not ln.startswith("[preschool]")]


def test_garbage_in_a_shard_manifest_under_train_is_one_line(tmp_path, write_dataset, micro_cfg, capsys):
    data = write_dataset(tmp_path, "text")
    (data / "train" / "manifest.json").write_text("{garbage")
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump({"train": micro_cfg(), "datasets": {"text": str(data)}}))
    assert main(["train", str(cfg), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = _errors(capsys)
    assert len(err) == 1 and f"{data / 'train' / 'manifest.json'}: not valid JSON" in err[0], err


def test_garbage_in_the_data_manifest_is_one_line(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    (out / "data" / "manifest.json").write_text("{garbage")
    capsys.readouterr()
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    err = _errors(capsys)
    assert len(err) == 1 and f"{out / 'data' / 'manifest.json'}: not valid JSON" in err[0], err


@pytest.mark.parametrize("content, says", [(b"{garbage", "not valid JSON"),
                                           (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
                                           (b'{"config": "\xff"}', "not UTF-8")])
def test_a_damaged_results_file_to_rerender_is_one_line(tmp_path, one_line_error, content, says):
    results = tmp_path / "results.json"
    results.write_bytes(content)
    assert main(["report", "--from-results", str(results)]) == 2
    one_line_error(results, says)


def test_a_manifest_dtype_no_shard_can_have_is_one_line(tmp_path, write_dataset):
    from preschool.data.shards import ShardSet

    data = write_dataset(tmp_path, "text")
    mpath = data / "train" / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["dtype"] = "object"
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"manifest\.json: field 'dtype' is 'object', not uint16 or uint32"):
        ShardSet(data / "train")


def test_a_blimp_line_with_a_lone_surrogate_is_named_with_its_line(tmp_path):
    good = {"sentence_good": "Who should Derek hug?", "sentence_bad": "Who Derek should hug?", "UID": "x"}
    bad = {**good, "sentence_good": "Who \ud800 hug?"}
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")  # json.dumps escapes it: \ud800
    with pytest.raises(DataError, match=rf"{path}:2: field 'sentence_good' holds a lone surrogate \\ud800"):
        read_jsonl_pairs(path)
