"""train/branch.py: a run forked from another's checkpoint at a branch point equals the run trained from step 0."""

import json

import pytest

from preschool.errors import DataError
from preschool.train.branch import branch_record, fork_run
from preschool.train.trainer import train


def _stages(middle_data: str):
    # group g spans the branch point: its schedule (summed steps) and paused state must carry across it
    return [{"name": "a", "data": "text", "tokens": 4 * 16 * 3, "group": "g", "schedule": {"warmup": 1}},
            {"name": "mid", "data": middle_data, "tokens": 4 * 16 * 2, "counts_as_pt": False},
            {"name": "b", "data": "text", "tokens": 4 * 16 * 3, "group": "g", "schedule": {"warmup": 1}}]


def _ckpts(run):
    return sorted(p.name for p in (run / "checkpoints").iterdir() if not p.name.startswith("."))


def _rows(run):
    return [{k: v for k, v in json.loads(x).items() if k != "tokens_per_s"}
            for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_branch_equals_the_same_run_trained_from_scratch(tmp_path, datasets, micro_cfg, same_checkpoint):
    parent_cfg = micro_cfg(stages=_stages("synth"), checkpoint_every=2)
    child_cfg = micro_cfg(stages=_stages({"synth": 1, "text": 1}), checkpoint_every=2)
    parent, child, scratch = tmp_path / "parent", tmp_path / "child", tmp_path / "scratch"
    train(parent_cfg, parent, datasets, keep_state_at=[3])
    assert (parent / "checkpoints" / "step-00000003" / "trainer_state.pt").is_file()  # kept for the branch
    assert fork_run(parent, child, 3)
    assert branch_record(child) == {"parent": str(parent), "step": 3}
    res = train(child_cfg, child, datasets)
    assert res["resumed_from"].endswith("step-00000003")
    train(child_cfg, scratch, datasets)
    assert _ckpts(child) == _ckpts(scratch) == ["step-00000002", "step-00000003", "step-00000004",
                                                 "step-00000005", "step-00000006", "step-00000008"]
    for name in _ckpts(scratch):
        same_checkpoint(scratch / "checkpoints" / name, child / "checkpoints" / name)
    assert _rows(child) == _rows(scratch)
    assert not fork_run(parent, child, 3)  # forked already: nothing done


def test_a_fork_cut_short_completes_on_the_next_call_and_a_trained_folder_is_never_forked_into(
        tmp_path, datasets, micro_cfg, same_checkpoint):
    cfg = micro_cfg(stages=_stages("synth"), checkpoint_every=2)
    parent, child = tmp_path / "parent", tmp_path / "child"
    train(cfg, parent, datasets, keep_state_at=[3])
    with pytest.raises(DataError, match=r"step-00000004: no trainer_state.pt to branch from"):
        fork_run(parent, child, 4)
    fork_run(parent, child, 3)
    # as if killed before the end: the record and the last checkpoint missing
    (child / "branch.json").unlink()
    import shutil

    shutil.rmtree(child / "checkpoints" / "step-00000003")
    assert fork_run(parent, child, 3)
    train(cfg, child, datasets)
    assert _ckpts(child) == _ckpts(parent)
    for name in _ckpts(parent):
        if name != "step-00000003":  # the parent keeps its branch point's training state; the child pruned it
            same_checkpoint(parent / "checkpoints" / name, child / "checkpoints" / name)
    own = tmp_path / "own"
    train(cfg, own, datasets)
    assert not fork_run(parent, own, 3)  # it holds a run of its own (config.yaml)
    assert branch_record(own) is None


def test_fsdp_checkpoints_branch_and_start_runs(tmp_path, datasets, micro_cfg, same_checkpoint):
    """An FSDP run's checkpoint (weights whole in model.safetensors, training state sharded in sharded/) is a
    branch point (its sharded state copied and resumed) and a start (init_from: its weights)."""
    parent_cfg = micro_cfg(stages=_stages("synth"), checkpoint_every=2, parallel="fsdp", device="cpu")
    child_cfg = micro_cfg(stages=_stages({"synth": 1, "text": 1}), checkpoint_every=2, parallel="fsdp", device="cpu")
    parent, child, scratch = tmp_path / "parent", tmp_path / "child", tmp_path / "scratch"
    train(parent_cfg, parent, datasets, keep_state_at=[3])
    assert (parent / "checkpoints" / "step-00000003" / "sharded").is_dir()
    fork_run(parent, child, 3)
    train(child_cfg, child, datasets)
    train(child_cfg, scratch, datasets)
    for name in _ckpts(scratch):
        same_checkpoint(scratch / "checkpoints" / name, child / "checkpoints" / name)
    cont = tmp_path / "cont"
    train(micro_cfg(init_from={"path": str(parent / "checkpoints" / "step-00000008")}), cont, datasets)
    first = [json.loads(x) for x in (cont / "metrics.jsonl").read_text().splitlines()][0]
    assert first["event"] == "init_from" and first["source_step"] == 8
