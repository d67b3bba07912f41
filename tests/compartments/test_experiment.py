import json

import pytest

from preschool.compartments.audit import AuditConfig, run_audit
from preschool.compartments.experiment import CompartmentExperimentConfig, analyse, run
from preschool.config import from_dict
from preschool.errors import ConfigError

BASE = {
    "seq_len": 16,
    "corpora": {"storybook": {"source": "storybook", "seed": 0}},
    "tokenizer": {"kind": "train", "vocab_size": 260, "sample_documents": 100},
    "model": {"preset": "micro", "family": "qwen2", "tie_embeddings": False},
    "train": {"batch_size": 4, "lr": 3.0e-3, "weight_decay": 0.0, "val_rows": 4, "progress": False,
              "log_every": 5, "checkpoints_per_decade": 1},
    "stage": {"schedule": "constant", "warmup": 2},
    "tokens": 640,  # 10 steps
    "val_per_decade": 2,
}


@pytest.mark.slow  # ~40 s CPU: data prep + 3 arms
def test_micro_slowdown_experiment(tmp_path):
    cfg = from_dict(CompartmentExperimentConfig, {
        **BASE, "name": "micro", "out": str(tmp_path / "run"),
        "data": {"corpus": "storybook", "tokens": 4000, "val_tokens": 400},
        "targets": [5.0],
        "arms": [{"name": "c1", "compartments": {"n_compartments": 1}},
                 {"name": "c2", "compartments": {"n_compartments": 2, "translation": {"fraction": 0.25}},
                  "infonce": {"pair_batch": 2, "weight": 0.1}},
                 {"name": "c2_ft", "compartments": {"n_compartments": 2}, "init_from": "c1", "tokens": 320}]})
    report = run(cfg, progress=False)
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(res["arms"]) == {"c1", "c2", "c2_ft"} and res["baseline"] == "c1"
    c2 = res["arms"]["c2"]
    assert c2["curve"]["steps"][0] == 0 and c2["curve"]["steps"][-1] == 10
    assert set(c2["final_per_compartment"]) == {"c0", "c1"} and c2["final_translation_loss"] > 0
    assert res["arms"]["c1"]["final_translation_loss"] is None
    assert -1.0 <= c2["similarity"]["mean"] <= 1.0
    assert all(r["slowdown"] == pytest.approx(1.0) for r in res["arms"]["c1"]["slowdown"])
    assert "c2_ft" in report.read_text() and (tmp_path / "run" / "plots" / "slowdown.png").is_file()
    # the fine-tune starts from the c=1 arm: its first val loss is far below a fresh c=2 model's
    assert res["arms"]["c2_ft"]["curve"]["losses"][0] < c2["curve"]["losses"][0] - 0.5
    # rerun: everything is done, the analysis is identical
    assert analyse(cfg)["plateau"] == res["plateau"]


@pytest.mark.slow  # ~25 s CPU: data prep + 4 arms
def test_micro_audit(tmp_path):
    cfg = from_dict(AuditConfig, {
        **BASE, "name": "audit", "out": str(tmp_path / "audit"), "monolingual": True,
        "presentations": {"story": {"corpus": "storybook", "tokens": 3000, "val_tokens": 300},
                          "dyck": {"generator": "shuffle_dyck", "params": {"k": 4, "length": 20, "max_depth": 4},
                                   "tokens": 3000, "val_tokens": 300}}})
    run_audit(cfg, progress=False)
    res = json.loads((tmp_path / "audit" / "results.json").read_text())
    assert set(res["gaps"]) == {"compartmented", "mono_story", "mono_dyck"}
    g = res["gaps"]["compartmented"]["story"]
    assert g["steps"][0] == 0 and len(g["gap"]) == len(g["steps"])
    assert set(res["summary"]) == {"story", "dyck"} and all(res["done"].values())


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="init_from"):
        from_dict(CompartmentExperimentConfig, {**BASE, "name": "x", "data": {"corpus": "storybook", "tokens": 1000},
                                                "arms": [{"name": "a", "compartments": {"n_compartments": 2}},
                                                         {"name": "b", "init_from": "a"}]})
    with pytest.raises(ConfigError, match="compartment_embedding"):
        from_dict(CompartmentExperimentConfig, {**BASE, "name": "x", "data": {"corpus": "storybook", "tokens": 1000},
                                                "arms": [{"name": "a", "compartments": {"presentation": "permute"}}]})
    with pytest.raises(ConfigError, match="presentations"):
        from_dict(AuditConfig, {**BASE, "name": "x", "presentations": {}})


def test_seed_replicates_aggregate(tmp_path, capfd):
    cfg = from_dict(CompartmentExperimentConfig, {
        **BASE, "name": "reps", "out": str(tmp_path / "run"), "seeds": [0, 3], "tokens": 320, "compare": [["c2", "c1"]],
        "train": {**BASE["train"], "progress": True},  # run(progress=False) must still silence the training bars
        "data": {"corpus": "storybook", "tokens": 2000, "val_tokens": 300}, "targets": [5.3, 0.1],
        "arms": [{"name": "c1", "compartments": {"n_compartments": 1}},
                 {"name": "c2", "compartments": {"n_compartments": 2}}]})
    report = run(cfg, progress=False)
    assert "step/s" not in capfd.readouterr().err
    per = {s: json.loads((tmp_path / "run" / f"seed{s}" / "results.json").read_text()) for s in (0, 3)}
    assert per[0]["config"]["seed"] == 0 and per[3]["config"]["seed"] == 3
    assert per[0]["plateau"]["c2"] != per[3]["plateau"]["c2"]  # the replicates differ
    agg = json.loads((tmp_path / "run" / "results.json").read_text())
    assert agg["seeds"] == [0, 3] and agg["config"]["seeds"] == [0, 3]
    c2 = agg["arms"]["c2"]
    vals = [per[s]["plateau"]["c2"] for s in (0, 3)]
    assert c2["final_loss"]["values"] == pytest.approx(vals)
    assert c2["final_loss"]["mean"] == pytest.approx(sum(vals) / 2)
    assert c2["final_loss"]["sd"] == pytest.approx(abs(vals[0] - vals[1]) / 2 ** 0.5)
    # the baseline against itself: 1x at every reached target, so never a stable difference
    base = agg["arms"]["c1"]["slowdown_at"]["5.3"]
    assert base["reached"] == 2 and base["mean"] == pytest.approx(1.0) and base["verdict"] == "no stable difference"
    assert agg["arms"]["c2"]["slowdown_at"]["0.1"] == {"reached": 0, "of": 2, "verdict": "not reached"}
    # paired by seed: the differences of the per-seed values
    pair = agg["compare"][0]
    assert (pair["arm"], pair["reference"], pair["seeds"]) == ("c2", "c1", [0, 3])
    diffs = [per[s]["plateau"]["c2"] - per[s]["plateau"]["c1"] for s in (0, 3)]
    assert pair["final_loss"]["values"] == pytest.approx(diffs)
    assert pair["final_loss"]["verdict"] == ("no stable difference" if abs(sum(diffs) / 2) <= pair["final_loss"]["sd"]
                                             else "above" if sum(diffs) > 0 else "below")
    assert pair["slowdown_at"]["0.1"]["verdict"] == "not reached by both"
    text = report.read_text()
    assert "| c2 - c1 |" in text
    assert "seed0/report.md" in text and "(n=2)" in text
    assert all((tmp_path / "run" / "plots" / f).is_file() for f in ("plateau_vs_c.png", "slowdown_by_arm.png"))


def test_compare_config_errors():
    for bad in (["a"], ["a", "zz"], ["a", "a"]):
        with pytest.raises(ConfigError, match=r"compare\[0\]"):
            from_dict(CompartmentExperimentConfig, {**BASE, "name": "x", "compare": [bad],
                                                    "data": {"corpus": "storybook", "tokens": 1000},
                                                    "arms": [{"name": "a"}, {"name": "b"}]})


def test_seeds_config_errors():
    for bad in ([], [1, 1], [-1]):
        with pytest.raises(ConfigError, match="seeds"):
            from_dict(CompartmentExperimentConfig, {**BASE, "name": "x", "seeds": bad,
                                                    "data": {"corpus": "storybook", "tokens": 1000},
                                                    "arms": [{"name": "a"}]})


@pytest.mark.slow  # ~30 s CPU: data prep + 2 arms + evaluations
def test_compartments_yaml_runs_evals_and_preschool_report_rebuilds_it(tmp_path):
    import yaml

    from preschool.cli import main

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        **BASE, "name": "ev", "out": str(tmp_path / "run"), "tokens": 320,
        "data": {"corpus": "storybook", "tokens": 3000, "val_tokens": 300},
        "arms": [{"name": "c1", "compartments": {"n_compartments": 1}},
                 {"name": "c2", "compartments": {"n_compartments": 2}}],
        "evals": [{"name": "heldout", "params": {"sources": {"base": "${data}/base"}, "max_rows": 4}}]}))
    assert main(["compartments", str(path), "--no-progress"]) == 0
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(res["evals"]) == {"c1", "c2"} and res["evals"]["c1"]["heldout/loss"] > 0
    assert (tmp_path / "run" / "arms" / "c2" / "evals").is_dir()
    report = tmp_path / "run" / "report.md"
    assert "heldout/loss" in report.read_text()
    report.unlink()
    assert main(["report", str(path)]) == 0 and "## Evaluations" in report.read_text()
