"""Crafted checkpoint files whose checksums match (issue 34, items 11 and 12).

Whoever can write a checkpoint folder can also rewrite its ``checksums.json``; what stands between
such a folder and the run is what a resume accepts: a trainer state of the right shape whose step is
the folder's, a ``checksums.json`` of bounded depth that lists every file of the checkpoint, and no
hint from torch to load a refused pickle anyway. Each crafted checkpoint is named on stderr and the
run resumes from the previous intact one, ending as the uninterrupted run does.
"""

import json

import pytest
import torch

from preschool.io import write_json
from preschool.train.checkpoint import STATE_FILE, record_checksums
from preschool.train.trainer import train


def _cfg(micro_cfg):
    return micro_cfg(checkpoint_every=2, eval_every=0, log_every=1)  # 8 steps, checkpoints at 2, 4, 6, 8


def _rows(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in x]


@pytest.fixture
def stopped(tmp_path, datasets, micro_cfg, stop_at):
    """``(run, newest checkpoint)``: a run stopped after step 6, its checkpoints at 2, 4 and 6."""
    run = tmp_path / "run"
    train(_cfg(micro_cfg), run, datasets, callbacks=[stop_at(6)])
    return run, run / "checkpoints" / "step-00000006"


def _resumes_from_step_4(datasets, micro_cfg, run, capfd, names):
    """Resume ``run``: stderr names each of ``names``, the resume starts at step 4 and the run ends DONE
    with every step logged once, steps 5 and 6 trained again to the losses they had."""
    before = _rows(run)
    capfd.readouterr()
    res = train(_cfg(micro_cfg), run, datasets)
    err = capfd.readouterr().err
    for n in names:
        assert str(n) in err, err
    assert "Traceback" not in err and "weights_only" not in err
    assert res["resumed_from"] == str(run / "checkpoints" / "step-00000004") and (run / "DONE").is_file()
    after = _rows(run)
    assert [r["step"] for r in before] == list(range(1, 7)) and [r["step"] for r in after] == list(range(1, 9))
    assert [r["loss"] for r in after[:6]] == pytest.approx([r["loss"] for r in before], abs=1e-6)
    return err


def _craft_state(ckpt, **changes):
    """Rewrite the checkpoint's trainer state as plain data with ``changes``, and its checksums to match."""
    st = torch.load(ckpt / STATE_FILE, weights_only=True)
    st.update(changes)
    torch.save(st, ckpt / STATE_FILE)
    record_checksums(ckpt)


# ---------------------------------------------------------------- item 11: a trainer state of the wrong shape

@pytest.mark.parametrize("changes", [
    {"rng": {"torch": "not a generator state", "cuda": None}},
    {"optimizer": {"state": 1, "param_groups": "x"}},
    {"acc": []},
    {"stage_index": 7},
    {"groups": [1, 2]},
], ids=["rng", "optimizer", "acc", "stage_index", "groups"])
def test_a_plain_data_state_of_the_wrong_shape_falls_back(datasets, micro_cfg, stopped, capfd, changes):
    run, ckpt = stopped
    _craft_state(ckpt, **changes)
    err = _resumes_from_step_4(datasets, micro_cfg, run, capfd, [ckpt / STATE_FILE])
    assert "does not fit this run" in err or "unreadable trainer state" in err


@pytest.mark.parametrize("cuda", ["not a generator state", [torch.zeros(2), "x"]], ids=["string", "list"])
def test_a_cuda_rng_state_that_is_not_one_falls_back(datasets, micro_cfg, stopped, capfd, cuda):
    """Checked on a CPU run too, which does not restore it: the same folder resumed on a GPU would stop there."""
    run, ckpt = stopped
    rng = torch.load(ckpt / STATE_FILE, weights_only=True)["rng"]
    _craft_state(ckpt, rng={**rng, "cuda": cuda})
    err = _resumes_from_step_4(datasets, micro_cfg, run, capfd, [ckpt / STATE_FILE])
    assert "rng holds no CUDA generator state" in err


@pytest.mark.parametrize("step", [-5, 10**12, 4, True])
def test_a_state_whose_step_is_not_its_folders_falls_back_and_keeps_the_metrics(datasets, micro_cfg,
                                                                               stopped, capfd, step):
    run, ckpt = stopped
    _craft_state(ckpt, step=step)
    err = _resumes_from_step_4(datasets, micro_cfg, run, capfd, [ckpt / STATE_FILE])
    assert "step-00000006 holds step 6" in err


# ---------------------------------------------------------------- item 11: checksums.json

def test_a_deeply_nested_checksums_file_is_unreadable_not_a_recursion_error(datasets, micro_cfg,
                                                                          stopped, capfd):
    run, ckpt = stopped
    (ckpt / "checksums.json").write_text("[" * 100_000 + "]" * 100_000)
    err = _resumes_from_step_4(datasets, micro_cfg, run, capfd, [ckpt / "checksums.json"])
    assert "unreadable checksums" in err and "RecursionError" not in err


@pytest.mark.parametrize("listed", ["none", "all but the weights"])
def test_a_checksums_file_must_list_every_file(datasets, micro_cfg, stopped, capfd, listed):
    run, ckpt = stopped
    weights = ckpt / "model.safetensors"
    b = bytearray(weights.read_bytes())
    b[int(len(b) * 0.9)] ^= 0x5A  # a same-size flip in the tensor data: loads fine unless its hash is checked
    weights.write_bytes(bytes(b))
    man = json.loads((ckpt / "checksums.json").read_text())
    man["files"] = {} if listed == "none" else {k: v for k, v in man["files"].items() if k != weights.name}
    write_json(ckpt / "checksums.json", man)
    err = _resumes_from_step_4(datasets, micro_cfg, run, capfd, [ckpt])
    line = next(x for x in err.splitlines() if "not listed in checksums.json" in x)
    assert "model.safetensors" in line.split("not listed")[0]


# ---------------------------------------------------------------- item 12: a refused DCP tensor payload

def test_a_refused_tensor_payload_in_a_dcp_shard_gives_no_weights_only_hint(tmp_path, datasets, micro_cfg,
                                                                           stop_at, capfd, payload,
                                                                           plant_in_dcp_entry):
    cfg = {**_cfg(micro_cfg), "parallel": "fsdp", "device": "cpu"}
    run = tmp_path / "f"
    train(cfg, run, datasets, callbacks=[stop_at(6)])
    folder = run / "checkpoints" / "step-00000006" / "sharded"
    marker = tmp_path / "PWNED"
    # where a tensor is read: torch.load(weights_only=True) refuses it, with a hint to retry without
    plant_in_dcp_entry(folder, lambda fqn: fqn.startswith("model.") and fqn.endswith("weight"), payload(marker))
    capfd.readouterr()
    res = train(cfg, run, datasets)
    assert not marker.exists()
    err = capfd.readouterr().err
    assert f"{folder}: " in err and "refused, since unpickling them could run code" in err, err
    assert "weights_only" not in err and "can still be loaded" not in err and "Traceback" not in err
    assert res["resumed_from"] == str(run / "checkpoints" / "step-00000004") and (run / "DONE").is_file()
