"""The quickstart pipeline end to end on a micro config: prepare -> train arms -> eval -> report."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from preschool.errors import ConfigError, DataError
from preschool.experiment import load_experiment, run_experiment

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart.yaml"

# The quickstart, shrunk to seconds: micro model, tiny budgets, few pairs.
MICRO = [
    "seq_len=32", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200",
    # the corpus read in units of 4,096 tokens, not the default 2M: the storybook generated as far as needed
    "data.pt.tokens=12000", "data.pt.val_tokens=1056", "data.pt.unit_tokens=4096",
    "data.dyck.tokens=2112", "data.dyck.val_tokens=528",
    "data.dyck.params.length=24",
    "minimal_pairs.per_paradigm=8", "model.preset=micro",
    "train.batch_size=8", "train.eval_every=6", "train.checkpoint_every=6", "train.val_rows=8",
    "arms.0.stages.0.tokens=4096", "arms.1.stages.0.tokens=768", "arms.1.stages.1.tokens=4096",
    "arms.2.stages.0.tokens=768", "arms.2.stages.1.tokens=4096",
]


def _cfg(out: Path, extra=()):
    return load_experiment(QUICKSTART, MICRO + [f"out={out}", *extra])


def _curves(out: Path) -> dict:
    res = json.loads((out / "results.json").read_text())
    return {arm: {k: v for k, v in a["seeds"]["0"]["curves"].items()} for arm, a in res["arms"].items()}


def test_quickstart_micro_end_to_end_and_rerun_is_a_noop(tmp_path):
    out = tmp_path / "qs"
    report = run_experiment(_cfg(out), progress=False)
    text = report.read_text()
    assert "| pt_only |" in text and "| ppt_dyck |" in text and "val/pt" in text
    assert "minimal_pairs/acc" in text and "subject_verb_agreement" in text
    assert (out / "plots" / "val_pt.png").stat().st_size > 1000
    assert (out / "plots" / "minimal_pairs_by_phenomenon.png").is_file()
    res = json.loads((out / "results.json").read_text())
    # accuracy's continuous proxies (issue #30 item 3) get their own column, gain and efficiency rows, higher
    # is better, and a per-phenomenon table of their own
    for m in ("minimal_pairs/margin", "minimal_pairs/margin_tokmean"):
        assert res["directions"][m] == "higher" and all(m in row for row in res["table"])
        assert {g["arm"] for g in res["stable_gain"] if g["metric"] == m} == {"ppt_dyck", "ppt_dyck_reinit"}
        assert {e["arm"] for e in res["token_efficiency"] if e["metric"] == m} == {"ppt_dyck", "ppt_dyck_reinit"}
    assert "subject_verb_agreement" in res["phenomena_margin"]["pt_only"] and "log-prob margin" in text
    assert res["code_version"]["preschool"] and res["config"]["name"] == "quickstart"
    assert set(res["data_manifests"]["datasets"]) == {"pt", "dyck"}
    for arm in ("pt_only", "ppt_dyck"):
        run = out / "arms" / arm / "seed0"
        assert (run / "DONE").is_file()
        ckpts = sorted((run / "checkpoints").iterdir())
        assert ckpts and all((c / "model.safetensors").is_file() for c in ckpts)
        assert all((run / "evals" / c.name / "minimal_pairs" / "summary.json").is_file() for c in ckpts)
    # the PPT arm's first checkpoint is the end of its Dyck stage, before any PT token
    ppt_curve = _curves(out)["ppt_dyck"]["val/pt"]
    assert ppt_curve[0][0] == 0
    before = _curves(out)
    mtimes = {p: p.stat().st_mtime for p in (out / "arms").rglob("model.safetensors")}
    run_experiment(_cfg(out), progress=False)  # everything cached: nothing retrained
    assert {p: p.stat().st_mtime for p in (out / "arms").rglob("model.safetensors")} == mtimes
    assert _curves(out) == before


@pytest.mark.parametrize("override, field, msg", [
    ("model.preset=huge", "model.preset", "unknown model preset"),
    ("arms.0.stages.0.tokens=-5", "arms[0].stages[0].tokens", "must be > 0"),
    ("corpora.storybook.sorce=text", "corpora.storybook.sorce", "did you mean 'source'"),
    ("data.dyck.generator=shuffle_dyk", "data.dyck.generator", "did you mean 'shuffle_dyck'"),
    ("arms.1.stages.0.data=nope", "arms[1].stages[0].data", "no dataset named 'nope'"),
    ("evals.0.name=blimpp", "evals[0].name", "unknown evaluator"),
    # the shared and per-arm train/model sections are overlays, checked and typed on load
    ("arms.1.train.lrr=0.1", "arms[1].train.lrr", "did you mean 'lr'"),
    ("arms.1.train.batch_size=many", "arms[1].train.batch_size", "expected an integer"),
    ("train.seed=3", "train.seed", "training seeds are the experiment's `seeds:`"),
    ("train.model.preset=tiny-1m", "train.model", "the model is set under `model:`"),
    ("arms.0.model.overrides.hiden_size=64", "arms[0].model.overrides.hiden_size", "did you mean 'hidden_size'"),
    ("arms.2.train.lr=-1", "arms[2].train.lr", "must be > 0"),
    ("train.lr=-1", "train.lr", "must be > 0"),
    # a value is named where it was written, the shared section or the arm's
    ("train.val=[nope]", "train.val", "no dataset or part named 'nope'"),
    ("arms.1.train.val=[nope]", "arms[1].train.val", "no dataset or part named 'nope'"),
    # a nested config an overlay builds or overlays is checked too, and named under its section
    ("train.wandb.project=''", "train.wandb.project", "non-empty W&B project"),
    ("arms.1.train.wandb.project=''", "arms[1].train.wandb.project", "non-empty W&B project"),
    ("arms.0.train.wandb.mode=onlin", "arms[0].train.wandb.mode", "did you mean 'online'"),
    # a model shape the trainer could not build fails on load, not after the data is prepared
    ("arms.1.model.overrides.hidden_size=51", "arms[1].model.overrides.hidden_size", "not divisible by 2 heads"),
    ("model.overrides.num_key_value_heads=3", "model.overrides.num_key_value_heads", "not divisible by 3 KV"),
    ("model.overrides.hidden_size=wide", "model.overrides.hidden_size", "must be a positive integer"),
    # reserved_ids: auto with nothing to read the range from fails on load, not in the trainer
    ("arms.1.train.reserved_ids=auto", "arms[1].train.reserved_ids", "renders symbols on reserved ids"),
    ("train.reserved_ids=auto", "train.reserved_ids", "renders symbols on reserved ids"),
])
def test_bad_configs_fail_before_any_work(tmp_path, override, field, msg):
    out = tmp_path / "never"
    with pytest.raises(ConfigError, match=msg) as e:
        _cfg(out, [override])
    assert e.value.field == field
    assert not out.exists()


def test_an_arm_overlaying_a_bad_value_onto_a_shared_nested_config_is_named(tmp_path):
    with pytest.raises(ConfigError, match="non-empty W&B project") as e:
        _cfg(tmp_path / "never", ["train.wandb.project=p", "arms.2.train.wandb.project=''"])
    assert e.value.field == "arms[2].train.wandb.project"
    # the arm sets another key of the same section: the bad value is still the shared one
    with pytest.raises(ConfigError, match="non-empty W&B project") as e:
        _cfg(tmp_path / "never", ["train.wandb.project=''", "arms.0.train.wandb.mode=offline"])
    assert e.value.field == "train.wandb.project"


def test_arms_overlay_the_shared_train_and_model_settings(tmp_path):
    exp = _cfg(tmp_path / "x", ["model.overrides.rope_theta=5000", "arms.1.model.overrides.hidden_size=48",
                                "arms.1.train.lr=1e-3", "train.wandb.project=p", "arms.2.train.wandb.mode=disabled",
                                "seeds=[7]"])
    cfg = exp.cfg
    base, ppt, other = (r.train for r in exp.runs)
    assert base.seed == ppt.seed == 7 and base.lr == 2e-3 and ppt.lr == 1e-3
    assert base.stages == cfg.arms[0].stages and ppt.stages[0].name == cfg.arms[1].stages[0].name
    # mappings and nested configs merge key by key: the arm's override adds to the shared one
    assert base.model.overrides == {"rope_theta": 5000}
    assert ppt.model.overrides == {"rope_theta": 5000, "hidden_size": 48}
    assert base.wandb.project == other.wandb.project == "p" and other.wandb.mode == "disabled"
    assert base.wandb.mode != "disabled"
    assert cfg.model.overrides == {"rope_theta": 5000}  # the shared config is not changed by an arm


def test_null_in_an_arm_overlay_replaces_the_shared_value(tmp_path):
    """`null` is a value like any other: `wandb: null` turns W&B off for that arm, `val: null` gives back
    the default (every stage dataset with a val/ split), and neither changes the other arms."""
    exp = _cfg(tmp_path / "x", ["train.wandb.project=p", "train.val=[pt]", "arms.1.train.wandb=null",
                                "arms.2.train.val=null"])
    base, ppt, other = (r.train for r in exp.runs)
    assert base.wandb.project == other.wandb.project == "p" and ppt.wandb is None
    assert base.val == ppt.val == ["pt"] and other.val is None


def test_missing_corpus_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="not found") as e:
        _cfg(tmp_path / "x", ["corpora.storybook.source=text", f"corpora.storybook.path={tmp_path}/missing.txt"])
    assert e.value.field == "corpora.storybook.path"


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_numbers(tmp_path):
    """SIGKILL mid-arm, rerun: every curve equals an uninterrupted run's."""
    # a longer PT stage for ppt_dyck (128 steps) so the kill reliably lands mid-arm: the micro
    # model trains a step in milliseconds, and the default 16-step stage could end while we poll
    longer = ["arms.1.stages.1.tokens=32768"]
    ref = tmp_path / "ref"
    run_experiment(_cfg(ref, longer), progress=False)
    out = tmp_path / "killed"
    args = [sys.executable, "-m", "preschool.cli", "run", str(QUICKSTART), "--no-progress"]
    for o in MICRO + longer + [f"out={out}"]:
        args += ["--set", o]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckdir = out / "arms" / "ppt_dyck" / "seed0" / "checkpoints"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if ckdir.is_dir() and len([p for p in ckdir.iterdir() if p.name.startswith("step-")]) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "run finished before it could be killed; enlarge the budget"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "arms" / "ppt_dyck" / "seed0" / "DONE").exists()
    run_experiment(_cfg(out, longer), progress=False)
    got, want = _curves(out), _curves(ref)
    assert got.keys() == want.keys()
    for arm in want:
        for k in want[arm]:
            assert [x for x, _ in got[arm][k]] == [x for x, _ in want[arm][k]], (arm, k)
            assert [v for _, v in got[arm][k]] == pytest.approx([v for _, v in want[arm][k]], abs=1e-5), (arm, k)


def test_reserved_ids_render_grows_the_vocabulary_and_feeds_mean_transfer(tmp_path):
    """Dyck on its own ids: the model covers tokenizer + symbols; the arm learns reserved_ids from the data."""
    import yaml
    from transformers import AutoModelForCausalLM

    out = tmp_path / "r"
    cfg = _cfg(out, ["data.dyck.render=reserved", "arms.1.stages.1.embeddings_at_start=mean"])
    run_experiment(cfg, progress=False, stages=("train",))
    man = json.loads((out / "data" / "manifest.json").read_text())
    base = man["tokenizer"]["vocab_size"]
    k = 16  # quickstart's Dyck k: 2k symbols
    assert man["datasets"]["dyck"]["vocab_size"] == base + 2 * k
    run = out / "arms" / "ppt_dyck" / "seed0"
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["reserved_ids"] == [base, base + 2 * k]
    last = sorted((run / "checkpoints").iterdir())[-1]
    assert AutoModelForCausalLM.from_pretrained(str(last)).get_input_embeddings().weight.shape[0] == base + 2 * k


def test_l2t_dataset_is_built_by_the_runner(tmp_path):
    """An `l2t:` dataset goes through the L2T transform with the experiment's tokenizer and split rule."""
    from preschool.data.shards import ShardSet
    from preschool.experiment import build_data

    out = tmp_path / "l"
    cfg = _cfg(out, ["seq_len=256", "data.l2t={corpus: storybook, tokens: 16384, val_tokens: 0, unit_tokens: 4096, l2t: {scenario: shared}}"])
    man = build_data(cfg, progress=False)
    l2t = ShardSet(out / "data" / "l2t" / "train")
    assert l2t.row_len == 257 and len(l2t) == 16384 // 257
    assert l2t.manifest["tokenizer_sha256"] == man["tokenizer"]["sha256"]
    assert l2t.manifest["l2t_rows"] > 0 and l2t.manifest["raw_rows"] > 0  # shared: raw text and exercises
    assert man["datasets"]["l2t"]["spec"]["l2t"] == {"scenario": "shared"}


def test_l2t_dataset_that_yields_no_exercise_is_an_error(tmp_path):
    """Chunks too short for every task (seq_len 32): fail naming the dataset, never a silent raw-only arm."""
    from preschool.experiment import build_data

    cfg = _cfg(tmp_path / "l", ["data.l2t={corpus: storybook, tokens: 4096, val_tokens: 0, unit_tokens: 4096, l2t: {scenario: shared}}"])
    with pytest.raises(ConfigError, match="no document produced an L2T sample") as e:
        build_data(cfg, progress=False)
    assert e.value.field == "data.l2t.l2t"
    assert not (tmp_path / "l" / "data" / "l2t").exists()


def test_exact_fill_makes_one_dyck_document_per_row(tmp_path):
    from preschool.data.shards import ShardSet
    from preschool.experiment import build_data

    out = tmp_path / "x"
    cfg = _cfg(out, ["data.dyck.render=reserved", "data.dyck.exact_fill=true", "data.dyck.params={k: 16, max_depth: 8}"])
    man = build_data(cfg, progress=False)
    ss = ShardSet(out / "data" / "dyck" / "train")
    eos = 0
    rows = ss.rows(range(len(ss)))
    assert (rows[:, -1] == eos).all() and not (rows[:, :-1] == eos).any()  # EOS exactly at each row's end
    assert (rows[:, 0] >= man["tokenizer"]["vocab_size"]).all()  # every row starts a new document


def test_control_dataset_is_disjoint_from_pt_by_document(tmp_path):
    """Control (verify-ppt): natural text from the PT source that PT never trains on."""
    from preschool.experiment import build_data

    out = tmp_path / "c"
    cfg = _cfg(out, ["data.control={corpus: storybook, tokens: 2112, exclude: [pt], unit_tokens: 4096}"])
    man = build_data(cfg, progress=False)
    ids = lambda name, split: set((out / "data" / name / f"{split}.doc_ids.txt").read_text().split())  # noqa: E731
    control = ids("control", "train")
    assert control and not control & (ids("pt", "train") | ids("pt", "val"))
    assert man["datasets"]["control"]["splits"]["train"]["n_rows"] == 2112 // 33


def test_report_has_token_efficiency_and_verbatim_positions(tmp_path):
    """A micro run with the verbatim evaluator: the report carries efficiency rows and the position plot."""
    out = tmp_path / "v"
    cfg = _cfg(out, ["evals=[{name: verbatim, params: {list_lengths: [3], intervening_words: [0], n_lists: 2}}]",
                     "seeds=[0,1]"])
    run_experiment(cfg, progress=False)
    res = json.loads((out / "results.json").read_text())
    assert {e["arm"] for e in res["token_efficiency"]} == {"ppt_dyck", "ppt_dyck_reinit"}
    # PPT tokens are charged on the language axis only
    assert all(e["ppt_tokens"] == (768 if e["axis"] == "pt" else 0) for e in res["token_efficiency"])
    # val/dyck is read on Dyck tokens, which pt_only never trains: not comparable, not "saved 100 %"
    dyck = [e for e in res["token_efficiency"] if e["metric"] == "val/dyck"]
    assert dyck and all(e["axis"] == "dyck" and e["reached"] == 0 and e["not_comparable"] == 2 for e in dyck)
    # each seed is measured against the baseline run of the same seed, and every target is reported
    base = res["arms"]["pt_only"]["seeds"]
    for e in res["token_efficiency"]:
        assert e["seeds"] == 2
        assert e["targets"] == pytest.approx([base[s]["curves"][e["metric"]][-1][1] for s in ("0", "1")])
    assert (out / "plots" / "verbatim_positions.png").stat().st_size > 1000
    assert "## Token efficiency" in (out / "report.md").read_text()


def test_finished_arms_are_not_reused_with_other_data_or_config(tmp_path):
    """A rerun after the data spec or the training config changed must not silently reuse old arms."""
    out = tmp_path / "qs"
    run_experiment(_cfg(out), progress=False, stages=("train",))
    # a changed data spec is refused before anything is rebuilt, naming the dataset and the field
    with pytest.raises(DataError, match="dataset 'pt' was prepared with another data.pt.tokens"):
        run_experiment(_cfg(out, ["data.pt.tokens=16000"]), progress=False, stages=("train",))
    # with --rebuild, the arms trained on it still stop the run before the data is replaced
    with pytest.raises(DataError, match="arm pt_only seed 0 was trained on dataset 'pt'"):
        run_experiment(_cfg(out, ["data.pt.tokens=16000"]), progress=False, stages=("train",), rebuild=True)
    # rebuilt Dyck data concerns only the arms that train on it: pt_only (arms[0]) is not named
    with pytest.raises(DataError, match="arm ppt_dyck seed 0 was trained on dataset 'dyck'"):
        run_experiment(_cfg(out, ["data.dyck.tokens=2640"]), progress=False, stages=("train",), rebuild=True)
    # a changed value is named where the YAML sets it: the shared section, the arm's stages or overlays
    with pytest.raises(ConfigError, match="was 0.002") as e:
        run_experiment(_cfg(out, ["train.lr=1e-3"]), progress=False, stages=("train",))
    assert e.value.field == "train.lr"
    for change, field_ in (("arms.0.train.lr=1e-3", "arms[0].train.lr"),
                           ("arms.0.stages.0.schedule.warmup=0.1", "arms[0].stages[0].schedule.warmup"),
                           ("model.init_std=0.01", "model.init_std"),
                           ("arms.0.model.init_std=0.01", "arms[0].model.init_std")):
        with pytest.raises(ConfigError, match="differs from the run") as e:
            run_experiment(_cfg(out, [change]), progress=False, stages=("train",))
        assert e.value.field == field_
    # fields that do not change the weights may differ
    run_experiment(_cfg(out, ["train.log_every=3"]), progress=False, stages=("train",))


def test_an_experiment_refuses_two_evals_filed_under_one_name():
    from preschool.config import from_dict
    from preschool.experiment import ExperimentConfig

    raw = {"name": "x", "data": {"a": {"generator": "stack", "tokens": 1000}},
           "arms": [{"name": "a", "stages": [{"name": "s", "data": "a", "tokens": 1000}]}],
           "evals": [{"name": "heldout", "params": {"sources": {"a": "x"}}},
                     {"name": "heldout", "params": {"sources": {"a": "y"}}}]}
    with pytest.raises(ConfigError, match=r"evals\[1\]\.label"):
        from_dict(ExperimentConfig, raw)
    raw["evals"][1]["label"] = "heldout_y"
    from_dict(ExperimentConfig, raw)


_TRAIN = {"batch_size": 4, "lr": 2.0e-3, "wandb": {"mode": "offline"}, "val_rows": 4}


@pytest.mark.parametrize("bad, field", [({"lr": "x"}, "train.lr"), ({"lrr": 1}, "train.lrr"),
                                        ({"batch_size": 0}, "train.batch_size"),
                                        ({"wandb": {"mode": "bogus"}}, "train.wandb.mode"),
                                        ({"betas": [0.9]}, "train.betas")])
def test_train_mapping_reads_the_same_in_preschool_train_and_an_experiment(tmp_path, bad, field):
    """One `train:` mapping: `preschool train` (a full TrainConfig) and an experiment (an overlay on
    the arm's stages and seed) resolve the same settings, and name a bad value by the same key."""
    import yaml

    from preschool.commands.train import load_run_config

    model = {"preset": "micro"}
    stages = [{"name": "pt", "data": "pt", "tokens": 2048}]

    def both(train):
        run_yaml = tmp_path / "train.yaml"
        run_yaml.write_text(yaml.safe_dump({"train": {"model": model, "stages": stages, **train},
                                            "datasets": {"pt": "pt"}}))
        exp_yaml = tmp_path / "exp.yaml"
        exp_yaml.write_text(yaml.safe_dump({"name": "same", "out": str(tmp_path / "out"), "model": model,
                                            "corpora": {"sb": {"source": "storybook"}},
                                            "data": {"pt": {"corpus": "sb", "tokens": 6000}},
                                            "train": train, "arms": [{"name": "a", "stages": stages}]}))
        got = []
        for read in (lambda: load_run_config(run_yaml)[0],
                     lambda: load_experiment(exp_yaml).records[0].train):
            try:
                got.append(read())
            except ConfigError as e:
                got.append(e.field)
        return got

    cli, exp = both(_TRAIN)
    assert cli == exp and cli.lr == 2.0e-3 and cli.wandb.mode == "offline"
    assert both({**_TRAIN, **bad}) == [field, field]
