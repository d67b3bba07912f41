"""Compartments experiments and audits through the one runner (`preschool run`): the plug-in's dataset
kinds, callbacks and report sections together.

The two micro reruns compare with numbers the retired runners (`compartments/experiment.py`,
`compartments/audit.py`, commit 7b789f7) produced from the same micro configs, in the old schema, on
CPU: the migration changed no number (the runs were bit-identical on the 2-core development box; the
tolerance only absorbs BLAS differences across CPUs).
"""

import json

import pytest
import yaml

from preschool.cli import main
from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.experiment import Experiment, ExperimentConfig, load_experiment

TRAIN = {"batch_size": 4, "lr": 3.0e-3, "weight_decay": 0.0, "val_rows": 4, "progress": False, "log_every": 5,
         "checkpoints_per_decade": 1, "eval_every": 0, "eval_schedule": "log", "evals_per_decade": 2,
         "checkpoint_schedule": "log"}
BASE = {"seq_len": 16, "corpora": {"storybook": {"source": "storybook", "seed": 0}},
        "tokenizer": {"kind": "train", "vocab_size": 260, "sample_documents": 100},
        "model": {"preset": "micro", "family": "qwen2", "tie_embeddings": False}, "train": TRAIN}
STAGE = {"name": "train", "tokens": 640, "schedule": {"name": "constant", "warmup": 2}}  # 10 steps


def _cm(**kw):
    return {"compartment_model": kw}


def _compartments(out, **extra) -> dict:
    return {**BASE, "name": "micro", "out": str(out),
            "data": {"base": {"corpus": "storybook", "tokens": 4000, "val_tokens": 400},
                     "base_c1": {"kind": "compartmented", "source": "base", "params": {"n_compartments": 1}},
                     "base_c2_tr": {"kind": "compartmented", "source": "base",
                                    "params": {"n_compartments": 2, "translation": {"fraction": 0.25}}},
                     "base_c2": {"kind": "compartmented", "source": "base", "params": {"n_compartments": 2}}},
            "arms": [{"name": "c1", "stages": [{**STAGE, "data": "base_c1"}], "callbacks": _cm()},
                     {"name": "c2", "stages": [{**STAGE, "data": "base_c2_tr"}],
                      "callbacks": {**_cm(), "infonce": {"pair_batch": 2, "weight": 0.1}}},
                     {"name": "c2b", "stages": [{**STAGE, "data": "base_c2"}],
                      "callbacks": {**_cm(copy_init=["embeddings", "lm_head", "compartment_embeddings"]),
                                    "infonce": {"pair_batch": 2, "weight": 0.1, "spans": "batch", "layer": 1,
                                                "compartment_embedding": True}}},
                     {"name": "c2_ft", "stages": [{**STAGE, "data": "base_c2", "tokens": 320}],
                      "callbacks": _cm(init_from="c1")}],
            "report": {"baseline": "c1", "sections": {"plateau": {}, "slowdown": {"targets": [5.0]},
                                                       "similarity": {}}},
            **extra}


def _rerendered_alike(out, again) -> None:
    """`preschool report --from-results` of the experiment at ``out`` (into ``again``, no run folder there) writes
    the report the runs gave, but for the line saying it is a re-render (issue #41 item 4)."""
    assert main(["report", "--from-results", str(out / "results.json"), "--out", str(again)]) == 0
    lines = (again / "report.md").read_text().replace(str(again), str(out)).splitlines()
    assert [line for line in lines if "--from-results" not in line] == (out / "report.md").read_text().splitlines()


def _final_val(run) -> dict:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in rows if r.get("event") == "val"][-1]
    return {k[4:]: v for k, v in last.items() if k.startswith("val/")}


@pytest.mark.slow  # ~60 s CPU: data prep + 4 arms + report
def test_micro_compartments_reproduce_the_retired_runner(tmp_path):
    cfg = Experiment.resolve(from_dict(ExperimentConfig, _compartments(tmp_path / "run")))
    from preschool.experiment import run_experiment

    report = run_experiment(cfg, progress=False).read_text()
    # the retired `preschool compartments` runner's numbers for the same micro experiment
    want = {"c1": {"c0": 3.7963305450975895},
            "c2": {"c0": 4.837216809391975, "c1": 4.756819237023592, "translation": 5.087101663861956},
            "c2b": {"c0": 4.5892604775726795, "c1": 4.755394764244556},
            "c2_ft": {"c0": 4.16759355738759, "c1": 4.199364844709635}}
    for arm, vals in want.items():
        assert _final_val(tmp_path / "run" / "arms" / arm / "seed0") == pytest.approx(vals, rel=1e-4), arm
    res = json.loads((tmp_path / "run" / "results.json").read_text())["sections"]
    assert res["slowdown"]["arms"]["c2"]["at"]["5.0"]["mean"] == pytest.approx(3.143824413369671, rel=1e-3)
    assert res["slowdown"]["arms"]["c2b"]["at"]["5.0"]["mean"] == pytest.approx(2.8832069370765327, rel=1e-3)
    assert res["slowdown"]["arms"]["c2_ft"] == {"fine_tune_of": "c1"}
    sim = {a: e["mean"]["mean"] for a, e in res["similarity"]["arms"].items()}
    assert sim == pytest.approx({"c2": 0.5896197557449341, "c2b": 0.9555307626724243, "c2_ft": 0.9531421661376953},
                                abs=1e-3)
    assert res["plateau"]["arms"]["c2"]["final"]["mean"] == pytest.approx((4.837216809391975 + 4.756819237023592) / 2)
    assert "## Slowdown vs `c1`" in report and "fine-tune of c1" in report
    assert all((tmp_path / "run" / "plots" / f).is_file() for f in ("slowdown.png", "plateau_vs_c.png",
                                                                     "loss_vs_step.png"))
    _rerendered_alike(tmp_path / "run", tmp_path / "again")  # the similarity too, with no checkpoint at hand


@pytest.mark.slow  # ~30 s CPU: data prep + 4 arms
def test_micro_audit_reproduces_the_retired_runner(tmp_path):
    stage = {**STAGE, "data": {"story": 1.0, "dyck": 1.0}}
    cfg = Experiment.resolve(from_dict(ExperimentConfig, {
        **BASE, "name": "audit", "out": str(tmp_path / "audit"),
        "data": {"story": {"corpus": "storybook", "tokens": 3000, "val_tokens": 300},
                 "dyck": {"generator": "shuffle_dyck", "params": {"k": 4, "length": 20, "max_depth": 4},
                          "tokens": 3000, "val_tokens": 300},
                 "dyck_shifted": {"kind": "shifted", "source": "dyck", "params": {"index": 1, "of": 2}}},
        "arms": [{"name": "shared", "stages": [stage]},
                 {"name": "compartmented", "stages": [stage], "datasets": {"dyck": "dyck_shifted"}},
                 {"name": "mono_story", "stages": [{**STAGE, "data": "story"}]},
                 {"name": "mono_dyck", "stages": [{**STAGE, "data": "dyck"}]}],
        "report": {"baseline": "shared", "sections": {"audit_gap": {}}}}))
    from preschool.experiment import run_experiment

    run_experiment(cfg, progress=False)
    gap = json.loads((tmp_path / "audit" / "results.json").read_text())["sections"]["audit_gap"]
    summary = gap["arms"]["compartmented"]["summary"]
    # the retired `kind: audit` runner's gaps for the same micro audit
    assert summary["story"]["final_gap"]["mean"] == pytest.approx(0.5931010320782661, rel=1e-3)
    assert summary["dyck"]["final_gap"]["mean"] == pytest.approx(0.6426776051521301, rel=1e-3)
    assert summary["dyck"]["mean_gap_second_half"]["mean"] == pytest.approx(0.734235655516386, rel=1e-3)
    assert set(gap["arms"]["mono_story"]["summary"]) == {"story"}
    steps = gap["arms"]["compartmented"]["seeds"]["0"]["story"]["steps"]
    assert steps[0] == 0 and steps[-1] == 10
    _rerendered_alike(tmp_path / "audit", tmp_path / "again")


@pytest.mark.slow  # ~40 s CPU: 2 arms x 2 seeds + evaluations + report rebuilt by `preschool report`
def test_seed_grid_evals_and_report_rebuild(tmp_path, capfd):
    raw = _compartments(tmp_path / "run", seeds=[0, 3])
    raw["arms"] = [{**raw["arms"][0], "stages": [{**STAGE, "data": "base_c1", "tokens": 320}]},
                   {"name": "c2", "stages": [{**STAGE, "data": "base_c2", "tokens": 320}], "callbacks": _cm()}]
    raw["train"] = {**TRAIN, "progress": True}  # --no-progress must still silence the training bars
    raw["report"] = {**raw["report"], "compare": [["c2", "c1"]], "sections": {"plateau": {},
                                                                            "slowdown": {"targets": [5.3, 0.1]}}}
    raw["evals"] = [{"name": "heldout", "params": {"sources": {"base": "${data}/base"}, "max_rows": 4}}]
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["compartments", str(path), "--no-progress"]) == 0  # the alias runs the one runner
    assert "step/s" not in capfd.readouterr().err
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    plateau = res["sections"]["plateau"]["arms"]["c2"]
    finals = [plateau["seeds"][s]["final"] for s in ("0", "3")]
    assert finals[0] != finals[1]  # the training seeds differ
    assert plateau["final"]["mean"] == pytest.approx(sum(finals) / 2)
    assert plateau["final"]["sd"] == pytest.approx(abs(finals[0] - finals[1]) / 2 ** 0.5)
    pair = res["sections"]["plateau"]["compare"][0]
    c1 = [res["sections"]["plateau"]["arms"]["c1"]["seeds"][s]["final"] for s in ("0", "3")]
    assert pair["diff"]["values"] == pytest.approx([f - c for f, c in zip(finals, c1)])
    base = res["sections"]["slowdown"]["arms"]["c1"]["at"]["5.3"]
    assert base["reached"] == 2 and base["mean"] == pytest.approx(1.0) and base["verdict"] == "no stable difference"
    assert res["sections"]["slowdown"]["arms"]["c2"]["at"]["0.1"] == {"verdict": "not reached", "reached": 0, "of": 2}
    assert (tmp_path / "run" / "arms" / "c2" / "seed3" / "evals").is_dir()
    report = tmp_path / "run" / "report.md"
    assert "heldout/loss" in report.read_text() and "| c2 − c1 |" in report.read_text()
    report.unlink()
    assert main(["report", str(path)]) == 0
    assert "## Final loss (plateau)" in report.read_text() and "heldout/loss" in report.read_text()


def test_config_errors_name_the_field(tmp_path):
    def err(raw, match):
        with pytest.raises(ConfigError, match=match):
            Experiment.resolve(from_dict(ExperimentConfig, raw))

    ok = _compartments(tmp_path)
    err({**ok, "arms": [ok["arms"][3], ok["arms"][0]]}, r"arms\[0\]\.callbacks\.compartment_model.*earlier arm")
    bad = {**ok, "data": {**ok["data"], "x": {"kind": "compartmentd", "source": "base"}}}
    err(bad, r"data\.x\.kind.*did you mean 'compartmented'")
    bad = {**ok, "data": {**ok["data"], "x": {"kind": "compartmented", "source": "base",
                                              "params": {"n_compartments": 0}}}}
    err(bad, r"data\.x\.params\.n_compartments")
    err({**ok, "data": {**ok["data"], "x": {"kind": "shifted", "source": "nope"}}}, r"data\.x\.source")
    err({**ok, "data": {**ok["data"], "x": {"kind": "shifted", "source": "base", "corpus": "storybook"}}},
        r"data\.x\.corpus: a dataset is built one way: 'kind' \(derived\) or 'corpus' \(corpus\)")
    err({**ok, "arms": [{**ok["arms"][0], "callbacks": {"infonse": {}}}]}, r"arms\[0\]\.callbacks.*did you mean")
    err({**ok, "report": {"sections": {"slowdwn": {}}}}, r"report\.sections.*did you mean 'slowdown'")
    err({**ok, "report": {"compare": [["c2", "c2"]]}}, r"report\.compare\[0\]")
    err({**ok, "arms": [{**ok["arms"][0], "datasets": {"base_c1": "nope"}}]}, r"arms\[0\]\.datasets\.base_c1")
    err({**ok, "arms": [ok["arms"][0], {**ok["arms"][1], "train": {"lr": -1.0}}]}, r"^arms\[1\]\.train\.lr")
    err({**ok, "train": {**TRAIN, "lr": -1.0}}, r"^train\.lr")
    err({**ok, "arms": [{**ok["arms"][0], "model": {"preset": "nope"}}]}, r"^arms\[0\]\.model\.preset")


def test_derived_parts_are_what_the_arm_scores(tmp_path):
    exp = Experiment.resolve(from_dict(ExperimentConfig, _compartments(tmp_path)))
    cfg = exp.cfg
    c2 = exp.record((None, cfg.arms[1].name, 0))
    assert c2.train.val == ["c0", "c1", "translation"]
    ds = c2.datasets
    assert ds["c1"] == tmp_path / "data" / "base_c2_tr" / "c1" and ds["base"] == tmp_path / "data" / "base"
    assert "base_c2" not in ds  # another arm's presentation does not widen this arm's vocabulary
    assert cfg.arm_dependencies() == {"c2_ft": "c1"}


def test_the_retired_schema_says_how_to_migrate(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "data": {"corpus": "storybook", "tokens": 1000},
                                    "stage": {"schedule": "constant"}, "tokens": 640,
                                    "arms": [{"name": "c1", "compartments": {"n_compartments": 1}}]}))
    with pytest.raises(ConfigError, match="retired `preschool compartments` schema.*docs/compartments.md"):
        load_experiment(path)
