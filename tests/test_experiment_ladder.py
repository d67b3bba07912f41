"""`ladder:` in the experiment YAML: rungs resolve to rung x arm x seed runs with the rule's budgets; a rung added
later trains only its own runs; `--rung` for one run; errors name the rung's field."""

from pathlib import Path

import pytest
import yaml

from preschool.errors import ConfigError
from preschool.experiment import load_experiment, run_arm, run_experiment

ROOT = Path(__file__).resolve().parents[1]
LADDER_DYCK = ROOT / "examples" / "ladder_dyck.yaml"
MICRO = ROOT / "tests" / "ladder_micro.yaml"


def _budgets(exp) -> dict:
    """(rung, arm) -> {stage: tokens} of the resolved TrainConfigs."""
    return {(r.rung, r.arm): {st.name: st.tokens for st in r.train.stages}
            for r in exp.runs if r.seed == exp.seeds[0]}


def test_a_per_param_ladder_resolves_to_rung_arm_seed_runs_and_budgets(tmp_path):
    cfg = load_experiment(LADDER_DYCK, [f"out={tmp_path}"])
    runs = cfg.runs
    assert len(runs) == 4 * 2 * 3
    assert {r.run_dir.relative_to(tmp_path).as_posix() for r in runs} == {
        f"rungs/{r}/arms/{a}/seed{s}" for r in ("r0", "r1", "r2", "r3") for a in ("pt_only", "ppt_dyck")
        for s in (0, 1, 2)}
    b = _budgets(cfg)
    # 20 tokens per non-embedding parameter: micro 74,304 / cpu-3x128 591,488 (hand count: 2 x 37,120 + 64;
    # 3 x 197,120 + 128); the Dyck stage 5 % of the language tokens
    assert b[("r0", "pt_only")] == {"pt": 1_486_080}
    assert b[("r3", "pt_only")] == {"pt": 11_829_760}
    assert b[("r3", "ppt_dyck")] == {"ppt": 591_488, "pt": 11_829_760}
    view = cfg.at_rung("r2")
    assert view.record(("r2", "pt_only", 1)).train.model.preset == "cpu-3x96"
    assert view.record(("r2", "pt_only", 1)).train.seed == 1


@pytest.mark.parametrize("rule, sets, expect", [
    # the YAML's shape: pt_only pt 2048; ppt 512 of Dyck (not PT) then pt 2048
    ("multiplier", [], {("r0", "pt_only"): {"pt": 1024}, ("r0", "ppt"): {"ppt": 128, "pt": 1024},
                        ("r2", "ppt"): {"ppt": 384, "pt": 3072}}),
    ("explicit", ["ladder.rungs.0.tokens=4096", "ladder.rungs.1.tokens=8192", "ladder.rungs.2.tokens=10000"],
     {("r0", "ppt"): {"ppt": 512, "pt": 4096}, ("r2", "pt_only"): {"pt": 10000}}),
])
def test_multiplier_and_explicit_rules_scale_language_stages_and_synthetic_is_a_fraction(rule, sets, expect):
    extra = [] if rule == "multiplier" else ["ladder.tokens.rule=explicit"] + [
        f"ladder.rungs.{k}.multiplier=null" for k in range(3)]
    b = _budgets(load_experiment(MICRO, extra + sets))
    for key, stages in expect.items():
        assert b[key] == stages, key


def test_total_parameters_count_the_embeddings_at_the_tokenizers_vocabulary():
    b = _budgets(load_experiment(LADDER_DYCK, ["ladder.tokens.params=total"]))
    # micro at vocab 2048, tied: 74,304 + 2048 x 64 = 205,376 parameters
    assert b[("r0", "pt_only")] == {"pt": 20 * 205_376}
    with pytest.raises(ConfigError, match="tokenizer.vocab_size") as e:
        load_experiment(LADDER_DYCK, ["ladder.tokens.params=total", "tokenizer={kind: load, path: x.json}"])
    assert e.value.field == "ladder.tokens.params"


def test_fixed_synthetic_keeps_the_yaml_tokens_and_no_fraction_keeps_each_arms_ratio():
    b = _budgets(load_experiment(MICRO, ["ladder.synthetic={rule: fixed}"]))
    assert b[("r2", "ppt")] == {"ppt": 512, "pt": 3072}
    b = _budgets(load_experiment(MICRO, ["ladder.synthetic={rule: fraction}"]))  # the YAML's 512 / 2048
    assert b[("r2", "ppt")] == {"ppt": 768, "pt": 3072}


@pytest.mark.parametrize("sets, field, msg", [
    (["ladder.rungs.0.tokens=5"], "ladder.rungs[0].tokens", "only with tokens.rule: explicit"),
    (["ladder.rungs.1.multiplier=null"], "ladder.rungs[1].multiplier", "needs each rung's multiplier"),
    (["ladder.rungs.1.name=r0"], "ladder.rungs", "unique"),
    (["ladder.rungs.1.name=../x"], "ladder.rungs[1].name", "folder name"),
    (["rung=r9"], "rung", "no rung named 'r9'"),
    (["ladder=null", "rung=r0"], "rung", "has no `ladder:`"),
    (["arms.0.model={preset: tiny-1m}", "ladder.rungs.2.model={preset: micro}"], "ladder.rungs[2].model.preset",
     "arm 'pt_only' sets it too"),
    (["ladder.rungs.2.model={preset: nope}"], "model.preset", "rung 'r2'"),
    (["arms.0.stages.0.counts_as_pt=false"], "ladder.tokens", "no stage that counts as PT"),
])
def test_bad_ladders_are_named_before_any_work(sets, field, msg):
    with pytest.raises(ConfigError) as e:
        load_experiment(MICRO, sets)
    assert e.value.field.startswith(field) and msg in str(e.value), str(e.value)


def test_adding_a_rung_later_trains_only_its_runs(tmp_path, capsys):
    raw = yaml.safe_load(MICRO.read_text())
    raw["minimal_pairs"] = {"per_paradigm": 0}
    raw["evals"] = []
    two = dict(raw, ladder={**raw["ladder"], "rungs": raw["ladder"]["rungs"][:2]})
    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump(two))
    out = tmp_path / "out"
    run_experiment(load_experiment(path, [f"out={out}"]), progress=False, stages=("train",))
    done = {p: p.stat().st_mtime_ns for p in out.glob("rungs/*/arms/*/seed0/DONE")}
    metrics = {p: p.read_bytes() for p in out.glob("rungs/*/arms/*/seed0/metrics.jsonl")}
    assert {p.relative_to(out).parts[1] for p in done} == {"r0", "r1"}
    capsys.readouterr()
    path.write_text(yaml.safe_dump(raw))  # r2 appended
    run_experiment(load_experiment(path, [f"out={out}"]), progress=False, stages=("train",))
    log = capsys.readouterr().out
    assert log.count("done, skipping") == 4 and "rung r2 arm pt_only seed 0: training" in log
    assert all(p.stat().st_mtime_ns == t for p, t in done.items())
    assert all(p.read_bytes() == b for p, b in metrics.items())
    assert (out / "rungs/r2/arms/ppt/seed0/DONE").is_file()


def test_one_run_of_a_ladder_needs_its_rung(tmp_path):
    exp = load_experiment(MICRO, [f"out={tmp_path}"])
    assert exp.rungs == ["r0", "r1", "r2"]
    with pytest.raises(ConfigError, match="name the rung") as e:
        run_arm(exp, "ppt", 0)
    assert e.value.field == "--rung"
    one = load_experiment(MICRO, [f"out={tmp_path}", "rung=r1"])
    assert one.rungs == ["r1"] and one.cfg.runs_root == tmp_path / "rungs" / "r1"
    # one rung's command and the whole ladder's take the same output lock (the second waits, not fails)
    from preschool.lock import config_key

    assert config_key(one.cfg) == config_key(exp.cfg)
