"""examples/stack_vs_queue.yaml at micro scale: end-of-stage values, exact doses, DEPO per hop, and the
downstream rows of a real (tiny, local) lm-eval task scored through the experiment runner."""

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from preschool.experiment import load_experiment, run_experiment

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "stack_vs_queue.yaml"
STEP = 16 * 128  # batch 16 x seq_len 128 tokens
HAS_LM_EVAL = all(importlib.util.find_spec(m) for m in ("lm_eval", "accelerate"))
TASK = "svq_tiny"  # the local lm-eval task the fixture writes
# four two-way choices over storybook-like words: what the micro model prefers is beside the point, only
# that lm-eval scores them on every chosen checkpoint and the report carries the accuracy
ITEMS = [("The cat sat on the", ["mat.", "sky."], 0), ("Once upon a", ["time", "tree"], 0),
         ("The sun is", ["hot.", "cold."], 0), ("The bird can", ["fly.", "swim."], 0)]


def _write_task(folder: Path) -> Path:
    """A multiple-choice lm-eval task YAML over a local JSONL file (offline: no hub dataset)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{TASK}.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "label": a}) + "\n" for q, c, a in ITEMS))
    (folder / f"{TASK}.yaml").write_text(
        f"task: {TASK}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
        "output_type: multiple_choice\ntest_split: test\ndoc_to_text: \"{{question}}\"\n"
        "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\nnum_fewshot: 0\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 1.0\n")
    return folder


def _micro(out: Path, tasks: Path | None):
    """The example, unchanged but for --set overrides: a micro model, one seed, its 100k-token STACK/QUEUE
    stage one step (so PT is six steps) and DEPO three steps, and with ``tasks`` an lm_eval spec scoring
    steps 3, 6, 9 and each stage's last (in PT: a curve on the PT axis for gains and efficiency)."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    arms = raw["arms"]
    for a in arms:
        for st in a["stages"]:
            st["tokens"] = 3 * STEP if st["data"] == "depo" else max(1, round(st["tokens"] / 100_000)) * STEP
    evals = raw["evals"]
    evals[0]["params"]["instances"] = 2
    evals[1]["params"]["max_rows"] = 4
    if tasks is not None:
        evals.append({"name": "lm_eval", "every": 3, "params": {
            "tasks": [TASK], "include_path": str(tasks), "include_defaults": False, "batch_size": 4}})
    over = ["seeds=[0]", "model.preset=micro", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200",
            "data.pt.tokens=16000", "data.pt.val_tokens=1032", "data.stack.tokens=4128",
            "data.stack.val_tokens=1032", "data.queue.tokens=4128", "data.queue.val_tokens=1032",
            "data.depo.tokens=8256", "data.depo.val_tokens=1032", "train.batch_size=16",
            "train.eval_every=3", "train.checkpoint_every=3", "train.val_rows=4",
            f"arms={json.dumps(arms)}", f"evals={json.dumps(evals)}", f"out={out}"]
    return load_experiment(EXAMPLE, over)


@pytest.fixture(scope="module")
def svq(tmp_path_factory):
    """The micro experiment, run once for the tests of this module (they only read it)."""
    root = tmp_path_factory.mktemp("stack_vs_queue")
    tasks = _write_task(root / "tasks") if HAS_LM_EVAL else None
    run_experiment(_micro(root / "svq", tasks), progress=False)
    return json.loads((root / "svq" / "results.json").read_text()), root / "svq"


@pytest.mark.slow
def test_end_of_stage_values_and_exact_doses(svq):
    res, out = svq
    table = {r["arm"]: r for r in res["table"]}
    assert set(table) == {"pt_only", "stack", "queue"}
    for arm in table:
        seed = res["arms"][arm]["seeds"]["0"]
        stages = ["pt", "depo"] if arm == "pt_only" else ["ppt", "pt", "depo"]
        for m in ("val/pt", "val/depo", "depo/acc"):
            ends = seed["stage_ends"][m]
            assert list(ends) == stages, (arm, m)
            # the headline value is the value at the end of the last stage on the metric's axis
            last = seed["final_stage"][m]
            assert table[arm]["final_stage"][m] == last and last in stages
            assert table[arm][m][0] == pytest.approx(ends[last])
        # language metrics are read at the end of PT (DEPO does not replace it); DEPO ones at the end of DEPO
        assert seed["final_stage"]["val/pt"] == "pt" and seed["final_stage"]["depo/acc"] == "depo"
        assert seed["curves"]["val/pt"][-1][1] == pytest.approx(seed["stage_ends"]["val/pt"]["pt"])
        # trained tokens per stage and source: the plan to the row (100k -> 1 step, 600k -> 6, 300k -> 3)
        plan = {"pt": {"pt": 6 * STEP}, "depo": {"depo": 3 * STEP}}
        if arm != "pt_only":
            plan = {"ppt": {arm: STEP}, **plan}
        assert seed["doses"] == plan
    text = (out / "report.md").read_text()
    assert "## Doses" in text and "| stack | ppt | stack | 2,048 | 2,048 |" in text
    assert "| queue | ppt | queue | 2,048 | 2,048 |" in text


@pytest.mark.slow
def test_depo_accuracy_per_hop_rows(svq):
    """Every arm's curves hold DEPO accuracy per hop count, on the DEPO-token axis; depo/acc is their mean."""
    res, _ = svq
    hops = [1, 2, 4]  # the reference hop set for max_hops 4: powers of two
    for arm in ("pt_only", "stack", "queue"):
        curves = res["arms"][arm]["seeds"]["0"]["curves"]
        per_hop = [curves[f"depo/acc/k{k}"] for k in hops]
        for rows in per_hop:
            assert [x for x, _ in rows] == [x for x, _ in curves["depo/acc"]], arm
            assert all(0.0 <= v <= 1.0 for _, v in rows)
        assert [x for x, _ in curves["depo/acc"]][-1] == 3 * STEP  # the DEPO stage's own tokens
        for i, (_, acc) in enumerate(curves["depo/acc"]):
            assert acc == pytest.approx(sum(rows[i][1] for rows in per_hop) / len(hops))
    # each hop count is a headline metric: a table column, a gain row and an efficiency row per arm, on
    # DEPO tokens, higher is better; and so is its continuous proxy, the answer NLL, lower is better (#30)
    table = {r["arm"]: r for r in res["table"]}
    for k in hops:
        for m, direction in ((f"depo/acc/k{k}", "higher"), (f"depo/nll/k{k}", "lower")):
            assert res["directions"][m] == direction and res["axes"][m]["axis"] == "depo"
            assert all(m in row for row in table.values())
            assert {g["arm"] for g in res["stable_gain"] if g["metric"] == m} == {"stack", "queue"}
            assert {e["arm"] for e in res["token_efficiency"] if e["metric"] == m} >= {"stack", "queue"}
    assert res["directions"]["depo/nll"] == "lower"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_LM_EVAL, reason="needs the lmeval extra (lm-eval, accelerate)")
def test_a_local_lm_eval_task_reaches_the_report_higher_is_better(svq):
    """Issue #23.2 with a real lm-eval run: its accuracy gets a table column, gain and efficiency rows."""
    res, out = svq
    m = f"lm_eval/{TASK}/acc"
    assert res["directions"][m] == "higher"
    for arm in ("pt_only", "stack", "queue"):
        seed = res["arms"][arm]["seeds"]["0"]
        curve = seed["curves"][m]
        # steps 3 and 6 lie in PT (the curve, on PT tokens), and so does the checkpoint that ends PT, which
        # is scored too (step 6 in pt_only, step 7 after the one-step STACK/QUEUE stage); DEPO follows
        pt_at = [3 * STEP, 6 * STEP] if arm == "pt_only" else [2 * STEP, 5 * STEP, 6 * STEP]
        assert [x for x, _ in curve if x > 0] == pt_at
        assert all(v in (0.0, 0.25, 0.5, 0.75, 1.0) for _, v in curve)  # accuracies over four items
        assert seed["final_stage"][m] == "pt" and list(seed["stage_ends"][m])[-1] == "depo"
        assert m in next(r for r in res["table"] if r["arm"] == arm)
    assert {g["arm"] for g in res["stable_gain"] if g["metric"] == m} == {"stack", "queue"}
    assert {e["arm"] for e in res["token_efficiency"] if e["metric"] == m} >= {"stack", "queue"}
    assert f"lm_eval/{TASK}/acc_stderr" not in res["table"][0]
    # beside it, its continuous proxy: the correct choice's log-likelihood, higher is better (#30 item 3)
    for proxy in (f"lm_eval/{TASK}/ll_correct", f"lm_eval/{TASK}/ll_correct_norm"):
        assert res["directions"][proxy] == "higher" and all(proxy in r for r in res["table"])
        assert {g["arm"] for g in res["stable_gain"] if g["metric"] == proxy} == {"stack", "queue"}
        assert {e["arm"] for e in res["token_efficiency"] if e["metric"] == proxy} >= {"stack", "queue"}
    assert (out / "plots" / f"lm_eval_{TASK}_acc.png").is_file()
