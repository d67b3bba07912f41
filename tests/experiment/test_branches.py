"""Issue #47: runs of an experiment that start from another run (init_from: {arm: ...}) and branch trees that
train a shared prefix once; a tree gives the same checkpoints, byte for byte, as independent runs."""

import json
from pathlib import Path

import pytest
import yaml

from preschool import layout
from preschool.errors import ConfigError
from preschool.experiment import build_data, load_experiment, run_experiment, train_arms

# a micro timing tree: language split into group stages so that each later insertion shares the earlier ones
STAGE = 8 * 32  # one step: batch 8 x seq_len 32


def _pt(name, steps):
    return {"name": name, "data": "pt", "tokens": steps * STAGE, "group": "pt", "schedule": {"warmup": 1}}


def _syn(name="syn", steps=2):
    return {"name": name, "data": "dyck", "tokens": steps * STAGE, "counts_as_pt": False, "schedule": "constant"}


def write_experiment(folder: Path, arms, extra=None) -> Path:
    cfg = {
        "name": "tree", "out": str(folder / "out"), "seed": 0, "seeds": [0], "seq_len": 32, "workers": 1,
        "corpora": {"story": {"source": "storybook", "seed": 0}},
        "tokenizer": {"kind": "train", "vocab_size": 300, "sample_documents": 200},
        # units of 4,096 tokens: the storybook is generated as far as the 13k tokens need, not a 2M-token unit
        "data": {"pt": {"corpus": "story", "tokens": 12_000, "val_tokens": 1024, "unit_tokens": 4096},
                 "dyck": {"generator": "shuffle_dyck", "params": {"k": 4, "max_depth": 4, "p_open": 0.5, "length": 16},
                          "render": "text", "tokens": 4000, "val_tokens": 512}},
        "model": {"preset": "micro", "overrides": {"hidden_size": 32}},
        "train": {"batch_size": 8, "lr": 3e-3, "eval_every": 2, "checkpoint_every": 2, "val_rows": 4, "val": ["pt", "dyck"],
                  "log_every": 1, "progress": False},
        "arms": arms, "evals": [], **(extra or {})}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tree.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


TREE = [
    {"name": "pt_only", "stages": [_pt("pt1", 3), _pt("pt2", 3)]},
    {"name": "insert", "stages": [_pt("pt1", 3), _syn(), _pt("pt2", 3)]},
    {"name": "after", "stages": [_pt("pt1", 3), _pt("pt2", 3), _syn()]},
    {"name": "before", "stages": [_syn(), _pt("pt1", 3), _pt("pt2", 3)]},
]


def _ckpts(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").iterdir() if not p.name.startswith("."))


def _rows(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in layout.read_metrics(run / "metrics.jsonl")]


def test_the_tree_of_a_timing_study_is_planned_from_identical_leading_stages(tmp_path):
    exp = load_experiment(write_experiment(tmp_path, TREE))
    got = {r.arm: (r.branch.parent.arm, r.branch.stages, r.branch.step) if r.branch else None for r in exp.runs}
    assert got == {"pt_only": None, "insert": ("pt_only", 1, 3), "after": ("pt_only", 2, 6), "before": None}
    assert {r.arm: r.keep_state_at for r in exp.runs}["pt_only"] == (3, 6)
    # a later stage of the group changes the group's schedule length: no shared prefix
    other = [TREE[0], {"name": "longer", "stages": [_pt("pt1", 3), _syn(), _pt("pt2", 4)]}]
    assert [r.branch for r in load_experiment(write_experiment(tmp_path / "o", other)).runs] == [None, None]
    # validation on every stage dataset with a val/ split (val unset) is the later stages' too: none shared
    unset = write_experiment(tmp_path / "v", TREE, {"train": {"batch_size": 8, "lr": 3e-3, "eval_every": 2,
                                                              "checkpoint_every": 2, "progress": False}})
    assert {r.arm: r.branch and r.branch.parent.arm for r in load_experiment(unset).runs}["insert"] is None
    # another learning rate: no shared prefix either
    lr = [TREE[0], {**TREE[1], "train": {"lr": 1e-3}}]
    assert [r.branch for r in load_experiment(write_experiment(tmp_path / "l", lr)).runs] == [None, None]


def test_a_tree_trains_each_prefix_once_and_equals_independent_runs_byte_for_byte(tmp_path, same_checkpoint):
    tree = load_experiment(write_experiment(tmp_path / "tree", TREE))
    alone = load_experiment(write_experiment(tmp_path / "alone", TREE))
    run_experiment(tree, progress=False, stages=("train",))
    build_data(alone, progress=False)
    train_arms(alone, progress=False, share_prefixes=False)
    trained = {}
    for rec in tree.runs:
        other = alone.record(rec.key).run_dir
        assert _ckpts(rec.run_dir) == _ckpts(other), rec.arm
        for name in _ckpts(other):
            if rec.arm == "pt_only" and name in ("step-00000003", "step-00000006"):
                continue  # the parent keeps the training state at its branch points
            same_checkpoint(other / "checkpoints" / name, rec.run_dir / "checkpoints" / name)
        assert _rows(rec.run_dir) == _rows(other), rec.arm
        first = (json.loads((rec.run_dir / "branch.json").read_text())["step"]
                 if (rec.run_dir / "branch.json").is_file() else 0)
        trained[rec.arm] = json.loads((rec.run_dir / "DONE").read_text())["steps"] - first
    assert trained == {"pt_only": 6, "insert": 5, "after": 2, "before": 8}  # 21 steps instead of 30
    from preschool.analysis.starts import arm_starts

    assert arm_starts(tree.runs) == {"insert": "its steps up to 3 are arm pt_only's (a shared prefix, trained once)",
                                     "after": "its steps up to 6 are arm pt_only's (a shared prefix, trained once)"}
    assert arm_starts(alone.runs) == {}


def test_a_run_starts_from_another_arm_at_a_stage_a_step_or_pt_tokens_parents_first(tmp_path):
    arms = [
        {"name": "anneal", "train": {"init_from": {"arm": "base", "step": 4, "optimizer": "keep"}},
         "stages": [{"name": "cool", "data": "pt", "tokens": 2 * STAGE,
                     "schedule": {"name": "linear", "warmup": 0, "min_lr_ratio": 0}}]},
        {"name": "base", "stages": [_pt("pt1", 3), _pt("pt2", 3)]},
        {"name": "from_pt", "train": {"init_from": {"arm": "base", "pt_tokens": 5 * STAGE}},
         "stages": [{"name": "more", "data": "dyck", "tokens": STAGE}]},
        {"name": "switch", "stages": [{"name": "a", "data": "dyck", "tokens": STAGE},
                                      {"name": "b", "data": "pt", "tokens": STAGE,
                                       "init_from": {"arm": "base", "stage": "pt1"}}]},
    ]
    exp = load_experiment(write_experiment(tmp_path, arms))
    recs = {r.arm: r for r in exp.runs}
    base = recs["base"].run_dir
    assert recs["anneal"].train.init_from.path == str(base / "checkpoints" / "step-00000004")
    assert recs["switch"].train.stages[1].init_from.path == str(base / "checkpoints" / "step-00000003")
    assert recs["from_pt"].train.init_from.path is None  # known once base has trained
    assert recs["base"].keep_state_at == (4,)  # the AdamW state anneal keeps
    assert [p.arm for p in recs["anneal"].parents] == ["base"]
    run_experiment(exp, progress=False, stages=("train",))
    for arm in ("anneal", "from_pt", "switch"):
        cfg = yaml.safe_load((recs[arm].run_dir / "config.yaml").read_text())["train"]
        where = cfg["init_from"] or cfg["stages"][1]["init_from"]
        assert where["arm"] == "base" and Path(where["path"]).parent == base / "checkpoints", arm
    meta = json.loads((Path(yaml.safe_load((recs["from_pt"].run_dir / "config.yaml").read_text())["train"]
                            ["init_from"]["path"]) / "meta.json").read_text())
    assert meta["pt_tokens"] >= 5 * STAGE and meta["step"] == 6  # the first checkpoint with that many (step 5 has none)
    run_experiment(load_experiment(write_experiment(tmp_path, arms)), progress=False, stages=("train", "report"))
    # the report and results.json name each start and what was trained before it (not on the token axes)
    report = (exp.out_dir / "report.md").read_text()
    line = next(x for x in report.splitlines() if x.startswith("- `anneal`"))
    assert "starts from arm base's step 4, AdamW state kept; the 1,024 tokens (1,024 PT) trained before it are not " \
           "on this arm's token axes" in line, line
    assert "stage b starts from arm base's step 3 (end of stage pt1)" in report
    starts = json.loads((exp.out_dir / "results.json").read_text())["starts"]
    assert set(starts) == {"anneal", "from_pt", "switch"} and "first checkpoint with 1,280 PT tokens" in starts["from_pt"]
    # another start for a finished arm is refused like a changed config, before anything is written
    moved = [{**arms[0], "train": {"init_from": {"arm": "base", "step": 2, "optimizer": "keep"}}}, *arms[1:]]
    with pytest.raises(ConfigError, match=r"arms\[0\].train.init_from.path: arm anneal seed 0: differs from the run"):
        run_experiment(load_experiment(write_experiment(tmp_path, moved)), progress=False, stages=("train",))


@pytest.mark.parametrize("init, match", [
    ({"arm": "nope"}, r"arms\[1\].train.init_from.arm: no arm named 'nope'"),
    ({"arm": "late"}, r"arms\[1\].train.init_from.arm: arm late cannot start from itself"),
    ({"arm": "base", "stage": "zz"}, r"arms\[1\].train.init_from.stage: arm base has no stage 'zz'"),
    ({"arm": "base", "step": 5}, r"arms\[1\].train.init_from.step: arm base writes no checkpoint at step 5"),
    ({"arm": "base", "path": "/x"}, r"arms\[1\].train.init_from.path: give arm: or path:, not both"),
])
def test_a_start_an_experiment_cannot_have_is_refused_when_it_is_loaded(tmp_path, init, match):
    arms = [{"name": "base", "stages": [_pt("pt1", 3), _pt("pt2", 3)]},
            {"name": "late", "train": {"init_from": init}, "stages": [_syn()]}]
    with pytest.raises(ConfigError, match=match):
        load_experiment(write_experiment(tmp_path, arms))


def test_runs_that_start_from_each_other_are_refused(tmp_path):
    arms = [{"name": "a", "train": {"init_from": {"arm": "b"}}, "stages": [_syn()]},
            {"name": "b", "train": {"init_from": {"arm": "a"}}, "stages": [_syn()]}]
    with pytest.raises(ConfigError, match=r"starts, through the arms it starts from, from itself"):
        load_experiment(write_experiment(tmp_path, arms))


@pytest.mark.slow
def test_a_tree_interrupted_anywhere_resumes_to_the_same_checkpoints(tmp_path, monkeypatch, same_checkpoint):
    """Stopped (as by a kill) inside the parent before its branch point, right after it, inside a branch, and
    halfway through copying the parent's checkpoints into a branch: rerunning the same command each time ends
    with the checkpoints of the uninterrupted tree."""
    from preschool.io import atomic_dir
    from preschool.train import branch as branch_mod
    from preschool.train.trainer import Trainer

    arms = TREE[:3]
    ref = load_experiment(write_experiment(tmp_path / "ref", arms))
    run_experiment(ref, progress=False, stages=("train",))

    real_step = Trainer._train_step
    count = {"n": 0}

    def die_after(n):
        def step(self, *a, **k):
            count["n"] += 1
            if count["n"] > n:
                raise KeyboardInterrupt("killed")
            return real_step(self, *a, **k)
        count["n"] = 0
        monkeypatch.setattr(Trainer, "_train_step", step)

    exp = load_experiment(write_experiment(tmp_path / "cut", arms))
    for n in (2, 2, 3):  # pt_only at step 2, at 4 (past its branch point 3), then 6: insert's first own step
        die_after(n)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(exp, progress=False, stages=("train",))
    calls = {"n": 0}

    def dying_copy(path):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed while copying")
        return atomic_dir(path)

    monkeypatch.setattr(Trainer, "_train_step", real_step)
    monkeypatch.setattr(branch_mod, "atomic_dir", dying_copy)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, progress=False, stages=("train",))  # insert's own steps, then after's copy dies
    monkeypatch.setattr(branch_mod, "atomic_dir", atomic_dir)
    run_experiment(exp, progress=False, stages=("train",))
    for rec in ref.runs:
        mine = exp.record(rec.key).run_dir
        assert _ckpts(mine) == _ckpts(rec.run_dir)
        for name in _ckpts(mine):
            same_checkpoint(rec.run_dir / "checkpoints" / name, mine / "checkpoints" / name)
        assert _rows(mine) == _rows(rec.run_dir), rec.arm


def test_every_arm_continues_a_public_style_checkpoint_whose_tokenizer_prepared_the_data(tmp_path, hf_tokenizer):
    """The recipe of docs/training.md: the data prepared with the checkpoint's own tokenizer, every arm started
    from the folder (a Llama saved by transformers); the run folder records the folder and its weights' hash."""
    import shutil

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    ckpt = tmp_path / "public"
    shutil.copytree(hf_tokenizer("llama3"), ckpt)
    n = len(AutoTokenizer.from_pretrained(str(ckpt)))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        LlamaForCausalLM(LlamaConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1)).save_pretrained(ckpt)
    arms = [{"name": "raw", "stages": [{"name": "cpt", "data": "pt", "tokens": 2 * STAGE}]},
            {"name": "with_dyck", "stages": [{"name": "cpt", "data": {"pt": 3, "dyck": 1}, "tokens": 2 * STAGE}]}]
    path = write_experiment(tmp_path, arms, {"tokenizer": {"kind": "hf", "name": str(ckpt)}})
    exp = load_experiment(path, ["train.init_from={path: %s}" % ckpt])
    run_experiment(exp, progress=False, stages=("train", "report"))
    for rec in exp.runs:
        rows = layout.read_metrics(rec.run_dir / "metrics.jsonl")
        assert next(r for r in rows if r["event"] == "init_from")["path"] == str(ckpt)
        assert json.loads((rec.run_dir / "DONE").read_text())["model"]["family"] == "llama"
    assert "starts from the folder %s (weights sha256" % ckpt in (exp.out_dir / "report.md").read_text()


def test_a_ladder_branches_each_rung_from_its_own_rung(tmp_path):
    """A branch per rung: at every rung the arm inserting STACK later shares the rung's own language prefix."""
    ladder = {"ladder": {"tokens": {"rule": "multiplier"}, "synthetic": {"rule": "fixed"},
                         "rungs": [{"name": "r0", "multiplier": 1}, {"name": "r1", "multiplier": 2,
                                                                     "model": {"overrides": {"num_hidden_layers": 3}}}]}}
    exp = load_experiment(write_experiment(tmp_path, TREE[:2], ladder))
    got = {(r.rung, r.arm): r.branch and (r.branch.parent, r.branch.step) for r in exp.records}
    assert got == {("r0", "pt_only"): None, ("r0", "insert"): (("r0", "pt_only", 0), 3),
                   ("r1", "pt_only"): None, ("r1", "insert"): (("r1", "pt_only", 0), 6)}


def test_run_no_share_prefixes_trains_every_arm_from_its_own_start(tmp_path, same_checkpoint):
    """`preschool run --no-share-prefixes`: how a user measures what a tree saves against independent arms, and
    how a tree's arms train as parallel processes (`--arm`, without waiting for a parent); the same checkpoints,
    every arm trained in full (no branch.json)."""
    import shutil

    from preschool.cli import main

    arms = TREE[:2]
    tree, alone = write_experiment(tmp_path / "tree", arms), write_experiment(tmp_path / "alone", arms)
    assert main(["prepare", str(tree), "--no-progress"]) == 0
    shutil.copytree(tmp_path / "tree/out/data", tmp_path / "alone/out/data")  # the same prepared data, reused
    a, t = tmp_path / "alone/out/arms", tmp_path / "tree/out/arms"
    assert main(["run", str(alone), "--arm", "insert", "--no-share-prefixes", "--no-progress"]) == 0
    assert not (a / "pt_only/seed0").exists() and not (a / "insert/seed0/branch.json").exists()
    assert main(["run", str(alone), "--only", "train", "--no-progress", "--no-share-prefixes"]) == 0
    assert main(["run", str(tree), "--only", "train", "--no-progress"]) == 0
    assert (t / "insert/seed0/branch.json").is_file() and not (a / "insert/seed0/branch.json").exists()
    for arm in ("pt_only", "insert"):
        for name in _ckpts(a / arm / "seed0"):
            if arm == "pt_only" and name == "step-00000003":
                continue  # the tree's parent keeps its training state at the branch point
            same_checkpoint(a / arm / "seed0/checkpoints" / name, t / arm / "seed0/checkpoints" / name)
