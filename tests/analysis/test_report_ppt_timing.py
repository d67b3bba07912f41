"""examples/ppt_timing_stack.yaml at micro scale: the report puts each metric on its own token axis."""

import json
from pathlib import Path

import pytest
import yaml

from preschool.experiment import load_experiment, run_experiment

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ppt_timing_stack.yaml"
STEP = 16 * 128  # batch 16 x seq_len 128 tokens


def _micro(out: Path, extra=()):
    """The example, unchanged but for --set overrides: a micro model, one STACK step, three of its arms,
    PT ten steps and the DEPO stage five (the report's mechanics, not the study's budgets)."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    arms = [a for a in raw["arms"] if a["name"] in ("pt_only", "before", "mixed")]
    scale = STEP / 60_000  # the example's STACK stage (60k tokens) becomes one step
    for a in arms:
        for st in a["stages"]:
            st["tokens"] = 5 * STEP if st["data"] == "depo" else max(1, round(st["tokens"] * scale / STEP)) * STEP
    over = ["seeds=[0]", "model.preset=micro", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200",
            "data.pt.tokens=24000", "data.pt.val_tokens=1032", "data.stack.tokens=4128",
            "data.stack.val_tokens=1032", "data.depo.tokens=12384", "data.depo.val_tokens=1032",
            "train.batch_size=16", "train.eval_every=3", "train.checkpoint_every=3", "train.val_rows=4",
            "evals.0.params.instances=2", f"arms={json.dumps(arms)}", f"out={out}", *extra]
    return load_experiment(EXAMPLE, over)


@pytest.fixture(scope="module")
def timing(tmp_path_factory):
    """The micro experiment, run once for the tests of this module (they only read it)."""
    out = tmp_path_factory.mktemp("ppt_timing") / "timing"
    run_experiment(_micro(out), progress=False)
    return out


@pytest.mark.slow
def test_mixed_arm_on_language_tokens_and_depo_on_depo_tokens(timing):
    out = timing
    res = json.loads((out / "results.json").read_text())
    assert res["axes"]["val/pt"]["axis"] == "pt" and res["axes"]["depo/acc"]["axis"] == "depo"
    assert res["axes"]["depo/acc"]["label"] == "depo tokens"
    # the mixed arm: 10 of every 11 rows are language (weights 600k : 60k), and only those count; the
    # mixture carries the STACK share (16/11 rows a batch) from batch to batch: 4 STACK rows in the first 48
    mixed = res["arms"]["mixed"]["seeds"]["0"]["curves"]["val/pt"]
    pt_only = res["arms"]["pt_only"]["seeds"]["0"]["curves"]["val/pt"]
    assert mixed[0][0] == (48 - 4) * 128 and pt_only[0][0] == 3 * STEP
    # 11 mixture steps: the axis ends at their 160 language rows, not at all 11 x 2048 trained tokens
    assert max(x for x, _ in mixed) == 160 * 128 and max(x for x, _ in pt_only) == 10 * STEP
    # DEPO accuracy against DEPO tokens: 0 until the DEPO stage, then its own tokens
    depo = res["arms"]["before"]["seeds"]["0"]["curves"]["depo/acc"]
    xs = [x for x, _ in depo]
    assert xs[0] == 0 and xs[-1] == 5 * STEP and sorted(xs) == xs and len({x for x in xs if x > 0}) >= 2
    # stable-gain and efficiency rows say (and use) the same axes
    axes = {(g["metric"], g["axis"]) for g in res["stable_gain"]}
    assert ("val/pt", "pt") in axes and ("depo/acc", "depo") in axes
    eff = {(e["arm"], e["metric"]): e for e in res["token_efficiency"]}
    assert eff[("mixed", "val/pt")]["axis"] == "pt" and eff[("mixed", "depo/acc")]["axis"] == "depo"
    assert eff[("before", "val/pt")]["ppt_tokens"] == STEP and eff[("before", "depo/acc")]["ppt_tokens"] == 0
    # the mixed arm is charged the STACK rows it trained: 1/11 of its 176 rows, as many STACK tokens as the
    # `before` arm's STACK step (rounding 16/11 down in every batch gave 11 rows, -31 %: issue #23.3)
    assert eff[("mixed", "val/pt")]["ppt_tokens"] == 16 * 128 == STEP
    text = (out / "report.md").read_text()
    assert "## Axes and evaluation setups" in text and "| depo/acc | depo tokens |" in text
    assert "| val/pt | language (PT) tokens |" in text


@pytest.mark.slow
def test_end_of_stage_values_and_exact_doses(timing):
    """Issue #23.1/.3: DEPO after PT does not replace the end-of-PT value; each stage's doses are exact."""
    out = timing
    res = json.loads((out / "results.json").read_text())
    table = {r["arm"]: r for r in res["table"]}
    for arm, pt_stage in (("pt_only", "pt"), ("before", "pt"), ("mixed", "pt_mixed")):
        seed = res["arms"][arm]["seeds"]["0"]
        ends = seed["stage_ends"]["val/pt"]
        assert list(ends)[-1] == "depo" and ends[pt_stage] != ends["depo"]
        # the headline value, the curve's end and the final stage are those of the end of PT
        assert seed["final_stage"]["val/pt"] == pt_stage and table[arm]["final_stage"]["val/pt"] == pt_stage
        assert table[arm]["val/pt"][0] == pytest.approx(ends[pt_stage]) == seed["curves"]["val/pt"][-1][1]
        assert table[arm]["stage_ends"]["val/pt"]["depo"][0] == pytest.approx(ends["depo"])
        # DEPO's effect on val/pt is its own row
        row = next(r for r in res["after_stages"] if r["arm"] == arm and r["metric"] == "val/pt")
        assert row["stage"] == "depo" and row["value"][0] == pytest.approx(ends["depo"])
        # depo accuracy ends with the DEPO stage
        assert seed["final_stage"]["depo/acc"] == "depo"
    # token efficiency against pt_only's end-of-PT value, not its post-DEPO one
    eff = {(e["arm"], e["metric"]): e for e in res["token_efficiency"]}
    assert eff[("before", "val/pt")]["targets"] == [pytest.approx(res["arms"]["pt_only"]["seeds"]["0"]
                                                                  ["stage_ends"]["val/pt"]["pt"])]
    # doses per stage and source: the plan to the row (one 2048-token STACK step = the example's 60k)
    doses = {a: res["arms"][a]["seeds"]["0"]["doses"] for a in ("pt_only", "before", "mixed")}
    assert doses["before"] == {"stack": {"stack": STEP}, "pt": {"pt": 10 * STEP}, "depo": {"depo": 5 * STEP}}
    assert doses["pt_only"] == {"pt": {"pt": 10 * STEP}, "depo": {"depo": 5 * STEP}}
    assert doses["mixed"] == {"pt_mixed": {"pt": 160 * 128, "stack": 16 * 128}, "depo": {"depo": 5 * STEP}}
    text = (out / "report.md").read_text()
    assert "## Doses" in text and "| mixed | pt_mixed | stack | 2,048 | 2,048 |" in text
    assert "## After later stages" in text and "after depo" in text


@pytest.mark.slow
def test_downstream_metrics_reach_the_report_in_their_own_direction(timing, tmp_path):
    """Issue #23.2: lm_eval/<task>/<metric> gets its table column, plot, gain and efficiency rows, compared in
    the direction lm-eval gives it (a perplexity: lower is better), and downstream/avg in its components'."""
    import shutil

    from preschool.analysis.report import write_report
    from preschool.evals.base import EvalResult
    from preschool.evals.lm_eval import LmEval
    from preschool.layout import evals_dir, list_checkpoints

    out = tmp_path / "timing"
    shutil.copytree(timing, out)

    class Scored(LmEval):  # what lm_eval writes, without running lm-eval: scores by PT tokens, mixed ahead
        def evaluate(self, model, tokenizer):
            return EvalResult(metrics={"piqa/acc": 0.5 + self.pt / 1e6 + self.ahead / 10, "piqa/acc_stderr": 0.01,
                                       "arc_easy/acc": 0.3 + self.pt / 2e6 + self.ahead / 10,
                                       "wikitext/word_perplexity": 900.0 - self.pt / 100 - 50 * self.ahead},
                              higher_is_better={"piqa/acc": True, "arc_easy/acc": True,
                                                "wikitext/word_perplexity": False})

    for run in sorted((out / "arms").glob("*/seed0")):
        for step, ckpt in list_checkpoints(run):
            ev = Scored(None)
            ev.pt = json.loads((ckpt / "meta.json").read_text())["pt_tokens"]
            ev.ahead = float(run.parent.name == "mixed")
            ev.run(None, None, evals_dir(run, step) / "lm_eval")
    write_report(_micro(out, ["report.efficiency.downstream=[lm_eval/arc_easy/acc, lm_eval/piqa/acc]"]))
    res = json.loads((out / "results.json").read_text())
    for m in ("lm_eval/piqa/acc", "lm_eval/wikitext/word_perplexity", "downstream/avg"):
        assert m in res["table"][0] and (out / "plots" / (m.replace("/", "_") + ".png")).is_file()
        assert any(g["metric"] == m for g in res["stable_gain"]) and any(e["metric"] == m for e in res["token_efficiency"])
    assert "lm_eval/piqa/acc_stderr" not in res["table"][0]
    assert res["directions"]["lm_eval/wikitext/word_perplexity"] == "lower"
    assert res["directions"]["lm_eval/piqa/acc"] == "higher" == res["directions"]["downstream/avg"]
    # the mixed arm is ahead: higher accuracy, lower perplexity; both are gains, so each was read its own way
    gain = {g["metric"]: g for g in res["stable_gain"] if g["arm"] == "mixed"}
    assert gain["lm_eval/piqa/acc"]["mean"] == pytest.approx(0.1) and gain["lm_eval/piqa/acc"]["stable"]
    assert gain["lm_eval/wikitext/word_perplexity"]["mean"] == pytest.approx(50)
    assert gain["lm_eval/wikitext/word_perplexity"]["stable"] and gain["downstream/avg"]["stable"]
    assert "| lm_eval/wikitext/word_perplexity | language (PT) tokens |" in (out / "report.md").read_text()
