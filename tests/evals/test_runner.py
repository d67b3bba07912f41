import json
import os

import numpy as np
import pytest
import torch

from preschool.errors import ConfigError, DataError
from preschool.evals import EVALUATORS
from preschool.evals.runner import (
    collect_results,
    evaluate_checkpoint,
    evaluate_run,
    load_checkpoint,
    select_checkpoints,
)

TEXTS = ["The cat sleeps on the mat.", "The cats sleep on the mats.", "A dog barks at the moon.",
         "Some dogs bark at night.", "Who did the girl see?", "The child has eaten the apples."]


def make_checkpoint(folder, seed, step, tokens):
    """A micro Qwen2 checkpoint laid out as the trainer writes it (weights + tokenizer + meta.json)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from preschool.data.tokenizer import save_tokenizer, train_bpe

    tok = train_bpe(TEXTS * 4, vocab_size=280, min_frequency=1)
    cfg = Qwen2Config(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(folder)
    save_tokenizer(tok, folder)
    (folder / "meta.json").write_text(json.dumps({"step": step, "stage": "pt", "stage_index": 0, "tokens": tokens,
                                                  "pt_tokens": tokens // 2, "stage_tokens": tokens}))
    return folder


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    for i, step in enumerate((100, 200, 300)):
        make_checkpoint(run / "checkpoints" / f"step-{step:08d}", seed=i, step=step, tokens=step * 64)
    (run / "checkpoints" / ".step-00000400.tmp").mkdir()  # a half-written checkpoint is ignored
    pairs = [{"sentence_good": g, "sentence_bad": b, "UID": "toy", "pairID": str(k), "field": "syntax",
              "linguistics_term": "agreement"} for k, (g, b) in enumerate(zip(TEXTS, TEXTS[1:] + TEXTS[:1]))]
    (run / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    return run


def evaluators(run, **over):
    return [("minimal_pairs", {"path": str(run / "pairs.jsonl"), **over})]


def test_load_checkpoint(run_dir):
    model, tok = load_checkpoint(run_dir / "checkpoints" / "step-00000100")
    assert not model.training and next(model.parameters()).dtype == torch.float32
    assert tok.bos_token_id == 0 and tok.eos_token_id == 0
    assert len(tok("The cat sleeps.", add_special_tokens=False)["input_ids"]) > 0
    with pytest.raises(DataError, match="no config.json"):
        load_checkpoint(run_dir)


def test_run_is_cached_and_resumable(run_dir, tmp_path):
    evs = evaluators(run_dir) + [("minimal_pairs", {"path": str(run_dir / "pairs.jsonl"), "bos": "none"}, "mp_nobos")]
    first = evaluate_run(run_dir, evs, log=None)
    assert [r["step"] for r in first] == [100, 200, 300] and all(r["cached"] == [] for r in first)
    s = run_dir / "evals" / "step-00000200" / "minimal_pairs" / "summary.json"
    summary = json.loads(s.read_text())
    assert summary["cache"]["version"] == EVALUATORS.get("minimal_pairs").cls.version
    assert summary["checkpoint_meta"]["tokens"] == 200 * 64
    assert (s.parent / "items.jsonl").is_file()
    # different BOS modes really differ, so the labels hold different results
    assert summary != json.loads((s.parent.parent / "mp_nobos" / "summary.json").read_text())
    # rerun: everything cached, nothing rewritten
    mtime = s.stat().st_mtime_ns
    again = evaluate_run(run_dir, evs, log=None)
    assert all(sorted(r["cached"]) == ["minimal_pairs", "mp_nobos"] for r in again)
    assert s.stat().st_mtime_ns == mtime
    assert again[1]["results"]["minimal_pairs"]["metrics"] == summary["metrics"]
    # an interrupted sweep resumes: a missing summary is the only thing recomputed
    (run_dir / "evals" / "step-00000300" / "mp_nobos" / "summary.json").unlink()
    third = evaluate_run(run_dir, evs, log=None)
    assert [r["cached"] for r in third][2] == ["minimal_pairs"]
    # a config change invalidates the cache
    changed = evaluate_run(run_dir, evaluators(run_dir, max_pairs_per_paradigm=3), steps=[200], log=None)
    assert changed[0]["cached"] == [] and changed[0]["results"]["minimal_pairs"]["metrics"]["n_pairs"] == 3
    # so does a rewritten checkpoint (new weight file mtime)
    w = run_dir / "checkpoints" / "step-00000100" / "model.safetensors"
    os.utime(w, ns=(w.stat().st_atime_ns, w.stat().st_mtime_ns + 10**9))
    redo = evaluate_run(run_dir, evs, steps=[100], log=None)
    assert redo[0]["cached"] == []
    # force recomputes regardless
    assert evaluate_run(run_dir, evs, steps=[100], force=True, log=None)[0]["cached"] == []


def test_collect_results(run_dir):
    evaluate_run(run_dir, evaluators(run_dir), log=None)
    rows = collect_results(run_dir)
    acc = [r for r in rows if r["evaluator"] == "minimal_pairs" and r["metric"] == "acc"]
    assert [r["step"] for r in acc] == [100, 200, 300]
    assert [(r["tokens"], r["pt_tokens"]) for r in acc] == [(6400, 3200), (12800, 6400), (19200, 9600)]
    assert all(0 <= r["value"] <= 1 for r in acc)
    # per-pair items agree with the stored accuracy
    items = [json.loads(x) for x in (run_dir / "evals/step-00000300/minimal_pairs/items.jsonl").read_text().splitlines()]
    assert acc[-1]["value"] == pytest.approx(np.mean([r["correct"] for r in items]))


def test_selection_and_errors(run_dir, tmp_path):
    steps = lambda **kw: [s for s, _ in select_checkpoints(run_dir, **kw)]  # noqa: E731
    assert steps() == [100, 200, 300]
    assert steps(every=200) == [200, 300]  # multiples of 200, plus the final checkpoint
    assert steps(steps=[100]) == [100]
    with pytest.raises(ConfigError, match="steps"):
        select_checkpoints(run_dir, steps=[150])
    with pytest.raises(ConfigError, match="did you mean 'minimal_pairs'"):
        evaluate_run(run_dir, [("minimal_pair", {})], log=None)
    with pytest.raises(ConfigError, match="used twice"):
        evaluate_run(run_dir, evaluators(run_dir) * 2, log=None)
    with pytest.raises(DataError, match="not a run folder"):
        evaluate_run(tmp_path, evaluators(run_dir), log=None)
    # a standalone checkpoint can be evaluated into any folder
    res = evaluate_checkpoint(run_dir / "checkpoints" / "step-00000100", evaluators(run_dir), tmp_path / "out")
    assert res["step"] == 100 and (tmp_path / "out" / "minimal_pairs" / "summary.json").is_file()


def test_cli(run_dir, tmp_path, capsys):
    from preschool.cli import main

    argv = ["eval", "--checkpoints", str(run_dir), "--steps", "100,300", "--blimp", str(run_dir / "pairs.jsonl"),
            "--set", "max_pairs_per_paradigm=4", "--label", "blimp4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "blimp4" in out and "acc=" in out and "n_pairs=4" in out and "cached" not in out
    assert (run_dir / "evals" / "step-00000300" / "blimp4" / "summary.json").is_file()
    assert not (run_dir / "evals" / "step-00000200" / "blimp4").exists()
    assert main(argv + ["--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in res] == [100, 300] and all(r["cached"] == ["blimp4"] for r in res)
    # one checkpoint inside a run folder lands in the run's evals/
    ckpt = run_dir / "checkpoints" / "step-00000200"
    assert main(["eval", "--checkpoint", str(ckpt), "--evaluator", "minimal_pairs",
                 "--set", f"path={run_dir / 'pairs.jsonl'}", "--set", "bos=none"]) == 0
    assert json.loads((run_dir / "evals/step-00000200/minimal_pairs/summary.json").read_text())["config"]["bos"] == "none"
    assert main(["eval", "--list"]) == 0
    assert {"minimal_pairs", "blimp", "heldout", "lm_eval"} <= {ln.split()[0] for ln in capsys.readouterr().out.splitlines()}
    # errors: --set without an evaluator; unknown config key names the field
    with pytest.raises(SystemExit):
        main(["eval", "--checkpoint", str(ckpt), "--set", "bos=none"])
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(ckpt), "--evaluator", "heldout", "--set", "rows=3"]) == 2
    assert "evaluators[0].rows: unknown key" in capsys.readouterr().err


def test_data_edited_in_place_invalidates_cache(run_dir, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text((run_dir / "pairs.jsonl").read_text())
    evs = [("minimal_pairs", {"path": str(pairs)}, "mp_tmpdata")]
    assert evaluate_run(run_dir, evs, steps=[100], log=None)[0]["cached"] == []
    assert evaluate_run(run_dir, evs, steps=[100], log=None)[0]["cached"] == ["mp_tmpdata"]
    lines = pairs.read_text().splitlines()
    pairs.write_text("\n".join(lines[:-1]) + "\n")  # same path and config, one pair fewer
    again = evaluate_run(run_dir, evs, steps=[100], log=None)[0]
    assert again["cached"] == [] and again["results"]["mp_tmpdata"]["metrics"]["n_pairs"] == len(lines) - 1


def test_every_pt_tokens_picks_the_same_pt_points_in_arms_with_and_without_a_ppt_stage(tmp_path):
    """verify-ppt scores every 1K PT steps: a PPT arm's PT step k is its global step k + 500."""
    T = 64  # tokens per step
    for name, ppt in (("base", 0), ("ppt", 500)):
        for step in range(500, 3001 + ppt, 500):
            d = tmp_path / name / "checkpoints" / f"step-{step:08d}"
            d.mkdir(parents=True)
            (d / "meta.json").write_text(json.dumps({"step": step, "tokens": step * T,
                                                     "pt_tokens": max(0, step - ppt) * T}))
    steps = lambda run, **kw: [s for s, _ in select_checkpoints(tmp_path / run, **kw)]  # noqa: E731
    assert steps("base", every_pt_tokens=1000 * T) == [1000, 2000, 3000]
    assert steps("ppt", every_pt_tokens=1000 * T) == [500, 1500, 2500, 3500]  # PT steps 0, 1000, 2000, 3000
    assert steps("ppt", every_pt_tokens=1000 * T, steps=[1000]) == [500, 1000, 1500, 2500, 3500]
    with pytest.raises(ConfigError, match="every_pt_tokens"):
        select_checkpoints(tmp_path / "base", every_pt_tokens=0)


def test_eval_specs_with_labels_run_one_evaluator_twice(run_dir, tmp_path):
    """Three qa_f1 datasets (Beyond Perplexity) or lm-eval at two shot counts: one label each."""
    import shutil

    from preschool.evals.runner import EvalSpec, evaluate_specs

    run = tmp_path / "run"
    shutil.copytree(run_dir / "checkpoints" / "step-00000100", run / "checkpoints" / "step-00000100")
    specs = [EvalSpec("minimal_pairs", {"path": str(run_dir / "pairs.jsonl")}, label="mp_all"),
             EvalSpec("minimal_pairs", {"path": str(run_dir / "pairs.jsonl"), "preset": "preschool"}, label="mp_own")]
    assert evaluate_specs(run, specs, tmp_path)
    rows = collect_results(run)
    assert {r["evaluator"] for r in rows} == {"mp_all", "mp_own"}
    with pytest.raises(ConfigError, match="label"):
        EvalSpec("minimal_pairs", label="a/b").validate()


def test_eval_spec_every_pt_tokens_alone_does_not_select_every_checkpoint(tmp_path):
    from preschool.evals.runner import EvalSpec

    spec = EvalSpec("minimal_pairs", every_pt_tokens=1000)
    assert spec.every is None  # unset: not "every checkpoint", which would swallow the PT-token cadence
    with pytest.raises(ConfigError, match="every"):
        EvalSpec("minimal_pairs", every=0).validate()



def test_every_also_scores_the_checkpoint_that_ends_each_stage(tmp_path):
    """A stage ending between two multiples of ``every`` is scored at its own end (the trainer always
    writes that checkpoint), so the report's end-of-stage value is measured there, not steps earlier."""
    for step, stage in ((3, 0), (6, 0), (7, 0), (9, 1), (10, 1)):  # PT ends at step 7, DEPO at 10
        d = tmp_path / "checkpoints" / f"step-{step:08d}"
        d.mkdir(parents=True)
        (d / "meta.json").write_text(json.dumps({"step": step, "stage_index": stage, "pt_tokens": min(step, 7) * 64}))
    steps = lambda **kw: [s for s, _ in select_checkpoints(tmp_path, **kw)]  # noqa: E731
    assert steps(every=3) == [3, 6, 7, 9, 10]
    assert steps(every_pt_tokens=3 * 64) == [3, 6, 7, 10]
    assert steps(steps=[3]) == [3]  # explicit steps alone are taken as given
    assert steps() == [3, 6, 7, 9, 10]


def test_experiment_evaluates_on_the_training_device_when_that_is_cuda(monkeypatch):
    """An evaluator's device: its own setting when given; else the arm's training device when that is
    CUDA here; else the CPU (a CPU run, or a CUDA run scored where there is no GPU)."""
    from preschool.evals.runner import EvalSpec, eval_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert eval_device(None, "auto") == "cuda" and eval_device(None, "cuda:1") == "cuda:1"
    assert eval_device(None, "cpu") == "cpu"
    assert eval_device("cpu", "cuda") == "cpu"  # an explicit setting wins
    # trained on cuda:1, scored where there is one GPU (launch's report job asks for one): that GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert eval_device(None, "cuda:1") == "cuda" and eval_device(None, "cuda:0") == "cuda:0"
    assert eval_device(None, "cuda:x") == "cuda:x"  # left to resolve_device's error, which names the field
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert eval_device(None, "auto") == "cpu" and eval_device(None, "cuda") == "cpu"
    with pytest.raises(ConfigError, match="device"):
        EvalSpec("minimal_pairs", device="gpu").validate()


def test_specs_pass_their_device_and_the_report_says_where(run_dir, tmp_path, monkeypatch):
    """evaluate_specs scores on eval_device(spec.device, training device); the summary records the device
    and dtype, and collect_results' setup (what the report prints beside an evaluator) ends with them."""
    import shutil

    import preschool.evals.runner as R

    run = tmp_path / "run"
    shutil.copytree(run_dir / "checkpoints" / "step-00000100", run / "checkpoints" / "step-00000100")
    seen = []
    real = R.load_checkpoint
    monkeypatch.setattr(R, "load_checkpoint", lambda p, device="cpu", **kw: seen.append(device) or real(p, device, **kw))
    specs = [R.EvalSpec("minimal_pairs", {"path": str(run_dir / "pairs.jsonl")}, device="cpu")]
    assert R.evaluate_specs(run, specs, tmp_path, train_device="cuda")
    assert seen == ["cpu"]
    summary = json.loads((run / "evals/step-00000100/minimal_pairs/summary.json").read_text())
    assert summary["evaluated_on"] == {"device": "cpu", "dtype": "float32"}
    assert {r["setup"] for r in collect_results(run)} == {"preset lm_eval, on cpu in float32"}
