from preschool.analysis.report import _on_base_grid


def test_arm_curve_is_read_at_the_baseline_checkpoints():
    base = [(0, 1.0), (100, 2.0), (200, 3.0), (300, 4.0)]
    arm = [(50, 10.0), (150, 20.0), (250, 30.0)]  # a PPT stage shifted this arm's checkpoints
    xs, a, b = _on_base_grid(arm, base)
    assert xs == [100.0, 200.0]  # never extrapolated outside the arm's range
    assert a == [15.0, 25.0] and b == [2.0, 3.0]


def test_checkpoints_after_pt_collapse_to_the_latest():
    # a final non-PT stage (e.g. DEPO) adds checkpoints at the same PT-token count
    base = [(0, 1.0), (100, 2.0), (100, 2.5), (100, 2.7)]
    arm = [(0, 1.5), (100, 3.0), (100, 3.3)]
    xs, a, b = _on_base_grid(arm, base)
    assert xs == [0.0, 100.0] and a == [1.5, 3.3] and b == [1.0, 2.7]



# --- per-metric token axes (language tokens vs a synthetic task's own tokens)

from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402

from pathlib import Path  # noqa: E402

from preschool.analysis.report import (DOWNSTREAM, _point, _target, add_downstream_average, build_curves,  # noqa: E402
                                       metric_axes, task_datasets)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
from preschool.errors import ConfigError  # noqa: E402


def _cfg(axes=None):
    from preschool.data.builders.corpus import CorpusSpec
    from preschool.synthetic.builder import GeneratorSpec

    data = {"pt": CorpusSpec(corpus="sb"), "stack": GeneratorSpec(generator="stack"),
            "depo": GeneratorSpec(generator="depo")}
    return SimpleNamespace(data=data, report=SimpleNamespace(axes=axes or {}))


def test_each_metric_gets_its_own_axis():
    metrics = ["val/pt", "val/depo", "val/stack", "depo/acc", "minimal_pairs/acc", "lm_eval/piqa/acc"]
    # depo is a task stage (after PT); stack is pre-pretraining: its held-out loss still falls with STACK
    # tokens, not language ones (issue #23.4: val/dyck on the language axis gave ppt_dyck "saved +100 %")
    assert metric_axes(_cfg(), metrics, tasks={"depo"}) == {
        "val/pt": "pt", "val/depo": "depo", "val/stack": "stack", "depo/acc": "depo", "minimal_pairs/acc": "pt",
        "lm_eval/piqa/acc": "pt"}
    # a held-out loss per source sits on its source's axis, as val/<dataset> does (stack_vs_queue: its mean
    # over a language set and an untrained DEPO set was headlined on the language axis, and gave a "stable
    # gain" that was the reserved ids' embeddings, not language); the mean is not headlined
    assert metric_axes(_cfg(), ["heldout/loss/depo", "heldout/loss/pt", "heldout/loss/stack", "heldout/loss"],
                       tasks={"depo"}) == {"heldout/loss/depo": "depo", "heldout/loss/pt": "pt",
                                           "heldout/loss/stack": "stack", "heldout/loss": "pt"}
    from preschool.evals.heldout import Heldout

    assert Heldout.reported("loss/depo") and not Heldout.reported("loss") and not Heldout.reported("ppl/pt")
    # report.axes wins, longest prefix first
    assert metric_axes(_cfg({"depo": "pt", "depo/acc": "depo"}), ["depo/acc", "depo/nll"], tasks={"depo"}) == \
        {"depo/acc": "depo", "depo/nll": "pt"}


def test_task_datasets_are_synthetic_sets_trained_after_language():
    from preschool.experiment import load_experiment

    cfg = load_experiment(EXAMPLES / "ppt_timing_stack.yaml")
    assert task_datasets(cfg) == {"depo"}  # stack runs before, inside and after PT across the arms
    assert task_datasets(load_experiment(EXAMPLES / "quickstart.yaml")) == set()  # Dyck is pre-pretraining


def _pt(step, pt, sources, v):
    return {"step": step, "pt": pt, "sources": sources, "value": v}


def test_task_metric_is_drawn_against_the_tasks_own_tokens():
    # PT stage (steps 1-2), then a DEPO stage that adds no language tokens (steps 3-4)
    pts = [_pt(1, 100, {"pt": 100}, 0.1), _pt(2, 200, {"pt": 200}, 0.2),
           _pt(3, 200, {"pt": 200, "depo": 50}, 0.5), _pt(4, 200, {"pt": 200, "depo": 100}, 0.9)]
    arms = {"a": {"seeds": {0: {"points": {"depo/acc": pts, "val/pt": pts}}}}}
    used = build_curves(arms, {"depo/acc": "depo", "val/pt": "pt"})
    c = arms["a"]["seeds"][0]["curves"]
    assert c["depo/acc"] == [[0, 0.1], [0, 0.2], [50, 0.5], [100, 0.9]]  # the acquisition curve
    assert c["val/pt"] == [[100, 0.1], [200, 0.2], [200, 0.5], [200, 0.9]]
    assert used == {"depo/acc": "depo", "val/pt": "pt"}
    # zero language tokens is a value, not a missing one (a PPT stage's last checkpoint)
    zero = {"a": {"seeds": {0: {"points": {"val/pt": [_point({"step": 2, "pt_tokens": 0, "tokens": 768}, 3.0)]}}}}}
    build_curves(zero, {"val/pt": "pt"})
    assert zero["a"]["seeds"][0]["curves"]["val/pt"] == [[0, 3.0]]
    # runs without per-source counts fall back to language tokens, and say so
    old = {"a": {"seeds": {0: {"points": {"depo/acc": [_pt(1, 100, None, 0.1)]}}}}}
    assert build_curves(old, {"depo/acc": "depo"}) == {"depo/acc": "pt"}


def test_downstream_average_and_targets():
    a = [_pt(1, 10, {}, 0.2), _pt(2, 20, {}, 0.4), _pt(3, 30, {}, 0.6)]
    b = [_pt(2, 20, {}, 0.8), _pt(3, 30, {}, 1.0)]
    arms = {"x": {"seeds": {0: {"points": {"lm_eval/t1/acc": a, "lm_eval/t2/acc": b}}}}}
    add_downstream_average(arms, ["lm_eval/t1/acc", "lm_eval/t2/acc"])
    avg = arms["x"]["seeds"][0]["points"][DOWNSTREAM]
    assert [(p["step"], p["value"]) for p in avg] == [(2, pytest.approx(0.6)), (3, pytest.approx(0.8))]
    assert _target(None, a, "m") is None and _target(0.5, a, "m") == 0.5
    assert _target("baseline@2", a, "m") == 0.4  # the baseline's value at that step
    with pytest.raises(ConfigError, match="no checkpoint at step 7"):
        _target("baseline@7", a, "m")


# --- issue #23: end-of-stage values, downstream metrics, comparability

def _stage(name, data, counts_as_pt=True):
    return SimpleNamespace(name=name, datasets=[data], counts_as_pt=counts_as_pt)


def _sp(step, pt, sources, stage, v):
    return {"step": step, "pt": pt, "sources": sources, "stage": stage, "value": v}


def test_a_later_stage_does_not_overwrite_the_end_of_pretraining_value():
    # PT (steps 1-2), then DEPO (steps 3-4), which leaves language tokens where they were and moves val/pt
    pts = [_sp(1, 100, {"pt": 100}, "pt", 5.6), _sp(2, 200, {"pt": 200}, "pt", 5.185),
           _sp(3, 200, {"pt": 200, "depo": 50}, "depo", 5.21), _sp(4, 200, {"pt": 200, "depo": 100}, "depo", 5.232)]
    arms = {"pt_only": {"seeds": {0: {"points": {"val/pt": pts, "depo/acc": pts}}}}}
    build_curves(arms, {"val/pt": "pt", "depo/acc": "depo"}, {"pt_only": [_stage("pt", "pt"),
                                                                          _stage("depo", "depo", False)]})
    s = arms["pt_only"]["seeds"][0]
    assert s["curves"]["val/pt"] == [[100, 5.6], [200, 5.185]]  # the curve (and its final value) ends with PT
    assert s["final_stage"]["val/pt"] == "pt"
    assert s["stage_ends"]["val/pt"] == {"pt": 5.185, "depo": 5.232}  # DEPO's effect stays reachable
    # a metric of the DEPO task ends with the DEPO stage
    assert s["curves"]["depo/acc"][-1] == [100, 5.232] and s["final_stage"]["depo/acc"] == "depo"


def test_stage_doses_are_read_from_the_logged_token_accounts():
    from preschool.analysis.report import stage_doses

    rows = [{"step": 2, "stage": "stack", "tokens_by_source": {"stack": 256}},
            {"step": 4, "stage": "pt_mixed", "tokens_by_source": {"stack": 300, "pt": 2000}},
            {"step": 6, "stage": "pt_mixed", "tokens_by_source": {"stack": 384, "pt": 3968}},
            {"step": 8, "tokens_by_stage": {"stack": 256, "pt_mixed": 4096, "depo": 512},
             "tokens_by_source": {"stack": 384, "pt": 3968, "depo": 512}}]
    assert stage_doses(rows, ["stack", "pt_mixed", "depo"]) == {
        "stack": {"stack": 256}, "pt_mixed": {"stack": 128, "pt": 3968}, "depo": {"depo": 512}}


def test_downstream_metrics_are_headlined_with_their_evaluators_direction(tmp_path):
    from preschool.analysis.report import headline_metrics
    from preschool.evals.base import EvalResult, Evaluator
    from preschool.evals.lm_eval import LmEval, flatten_metrics, lm_eval_directions
    from preschool.evals.runner import collect_results

    # lm-eval's results name each metric's direction; ours follow it, not the metric's name
    res = {"results": {"piqa": {"acc,none": 0.6, "acc_stderr,none": 0.01},
                       "wikitext": {"word_perplexity,none": 80.0, "bits_per_byte,none": 1.3}},
           "higher_is_better": {"piqa": {"acc": True}, "wikitext": {"word_perplexity": False, "bits_per_byte": False}}}
    metrics = flatten_metrics(res)
    hib = lm_eval_directions(res, metrics)
    assert hib == {"piqa/acc": True, "wikitext/word_perplexity": False, "wikitext/bits_per_byte": False}

    class Fake(LmEval):
        def evaluate(self, model, tokenizer):
            return EvalResult(metrics=metrics, higher_is_better=hib)

    run = tmp_path / "run"
    (run / "checkpoints" / "step-00000002").mkdir(parents=True)
    Fake(None).run(None, None, run / "evals" / "step-00000002" / "lm_eval")
    rows = {r["metric"]: r for r in collect_results(run)}
    assert rows["wikitext/word_perplexity"]["higher_is_better"] is False and rows["piqa/acc"]["higher_is_better"]
    assert rows["piqa/acc"]["reported"] and not rows["piqa/acc_stderr"]["reported"]
    assert Evaluator.reported("acc") and not Evaluator.reported("n_pairs") and not Evaluator.reported("acc/term/x")

    pts = lambda v: [_pt(2, 10, {}, v)]  # noqa: E731
    seed = {"points": {"lm_eval/piqa/acc": pts(0.6), "lm_eval/wikitext/word_perplexity": pts(80.0),
                       "minimal_pairs/acc": pts(0.7), "minimal_pairs/n_pairs": pts(9.0), "val/pt": pts(4.0)},
            "higher_is_better": {"lm_eval/" + m: r["higher_is_better"] for m, r in rows.items()}
            | {"minimal_pairs/acc": True, "minimal_pairs/n_pairs": True},
            "reported": ["lm_eval/" + m for m, r in rows.items() if r["reported"]] + ["minimal_pairs/acc"]}
    arms = {"a": {"seeds": {0: seed}}}
    names = sorted(seed["points"])
    headline, higher = headline_metrics(arms, names)
    assert headline == ["val/pt", "lm_eval/piqa/acc", "lm_eval/wikitext/word_perplexity", "minimal_pairs/acc"]
    assert higher["lm_eval/wikitext/word_perplexity"] is False and higher["val/pt"] is False
    assert higher["lm_eval/piqa/acc"] is True


def test_downstream_average_takes_its_components_direction():
    a = [_pt(1, 10, {}, 30.0), _pt(2, 20, {}, 20.0)]
    seed = {"points": {"lm_eval/t1/word_perplexity": a, "lm_eval/t2/word_perplexity": a, "lm_eval/t3/acc": a},
            "higher_is_better": {"lm_eval/t1/word_perplexity": False, "lm_eval/t2/word_perplexity": False,
                                 "lm_eval/t3/acc": True}}
    arms = {"x": {"seeds": {0: seed}}}
    add_downstream_average(arms, ["lm_eval/t1/word_perplexity", "lm_eval/t2/word_perplexity"])
    assert seed["higher_is_better"][DOWNSTREAM] is False and DOWNSTREAM in seed["reported"]
    with pytest.raises(ConfigError, match="report.efficiency.downstream.*opposite directions"):
        add_downstream_average(arms, ["lm_eval/t1/word_perplexity", "lm_eval/t3/acc"])


def test_an_arm_already_past_the_target_at_its_first_checkpoint_is_not_comparable():
    from preschool.analysis.efficiency import token_efficiency

    # quickstart's val/dyck: the baseline never trains Dyck (every checkpoint at 0 Dyck tokens), the PPT arm's
    # first checkpoint on that axis is already below the baseline's value: it did not "save 100 %"
    e = token_efficiency([(0, 5.0)], [(30, 2.1), (60, 1.2)], higher_is_better=False)
    assert e["comparable"] is False and e["reached"] is False and e["saved_fraction"] is None
    e = token_efficiency([(0, 6.0), (100, 5.0)], [(50, 4.0), (100, 3.0)], higher_is_better=False)
    assert e["comparable"] is False and e["reached"] is False
    e = token_efficiency([(0, 6.0), (100, 5.0)], [(0, 6.5), (50, 4.0)], higher_is_better=False)
    assert e["comparable"] is True and e["reached"] is True and e["arm_tokens"] == pytest.approx(50 * 1.5 / 2.5)


def test_the_l2t_three_field_accuracies_get_their_own_report_table():
    """acc/field3/* (the L2T paper's semantics / morphology / syntax) reach report.md beside the phenomena."""
    from preschool.analysis.minimal_pairs_tables import breakdown_lines, final_breakdown

    def seed(syntax, island):
        return {"curves": {"minimal_pairs/acc/field3/syntax": [(1, 0.1), (2, syntax)],
                           "minimal_pairs/acc/term/island_effects": [(2, island)], "minimal_pairs/acc": [(2, 0.5)]}}

    arms = {"raw": {"seeds": {0: seed(0.6, 0.4), 1: seed(0.8, 0.6)}}, "l2t": {"seeds": {0: seed(0.9, 0.7)}}}
    fields = final_breakdown(arms, ["raw", "l2t"], "field3")
    assert fields == {"raw": {"syntax": pytest.approx(0.7)}, "l2t": {"syntax": 0.9}}
    assert final_breakdown(arms, ["raw", "l2t"], "term")["l2t"] == {"island_effects": 0.7}
    lines = breakdown_lines("Minimal pairs by field", "field", fields)
    assert lines[0] == "## Minimal pairs by field" and "| field | raw | l2t |" in lines
    assert "| syntax | 0.700 | 0.900 |" in lines


def test_minimal_pair_margins_get_their_own_breakdown_tables_beside_the_accuracies():
    """margin/term/* and margin/field3/* (issue #30: accuracy's continuous proxy) are tabled on their own,
    never mixed into the accuracy tables (nor margin_tokmean into the margin ones)."""
    from preschool.analysis.minimal_pairs_tables import Fields3Margin, PhenomenaMargin, final_breakdown

    curves = {"minimal_pairs/acc/term/binding": [(2, 0.5)], "minimal_pairs/margin/term/binding": [(1, 0.0), (2, 1.5)],
              "minimal_pairs/margin_tokmean/term/binding": [(2, 0.1)], "minimal_pairs/margin/field3/syntax": [(2, 2.0)]}
    arms = {"raw": {"seeds": {0: {"curves": curves}, 1: {"curves": {**curves, "minimal_pairs/margin/term/binding":
                                                                   [(2, 2.5)]}}}}}
    assert final_breakdown(arms, ["raw"], "term") == {"raw": {"binding": 0.5}}
    assert final_breakdown(arms, ["raw"], "term", "margin") == {"raw": {"binding": 2.0}}
    assert final_breakdown(arms, ["raw"], "field3", "margin") == {"raw": {"syntax": 2.0}}
    assert (PhenomenaMargin.metric, PhenomenaMargin.results_key) == ("margin", "phenomena_margin")
    assert (Fields3Margin.group, Fields3Margin.results_key) == ("field3", "fields3_margin")


def test_verbatim_positions_come_from_the_checkpoint_of_the_final_value(tmp_path):
    from preschool.analysis.sections import SectionContext
    from preschool.analysis.verbatim_positions import verbatim_positions
    from preschool.io import write_json
    from preschool.layout import evals_dir, run_dir

    run = run_dir(tmp_path, "a", 0)
    for step, v in ((4, 1.0), (8, 2.0), (12, 3.0)):  # step 12 ends a DEPO stage after PT (steps 1-8)
        for label in ("verbatim", "verbatim_b"):
            write_json(evals_dir(run, step) / label / "summary.json",
                       {"extra": {"positions": {"repeat": {"n3": {"list1": [v], "list2": [v + (label != "verbatim")]}}}}})
    seed = {"run_dir": str(run), "final_step": {"verbatim/x_perc": 8, "verbatim_b/x_perc": 4, "val/pt": 8}}
    ctx = SectionContext(tmp_path, {}, ["a", "b"], [0], "a", results={"arms": {"a": {"seeds": {0: seed}}}},
                         evaluators={"verbatim": "verbatim", "verbatim_b": "verbatim", "val": "val"})
    assert verbatim_positions(ctx) == {"a": {"list1": [2.0], "list2": [2.0]}}
    seed["final_step"]["verbatim_b/x_perc"] = 8  # two labels end at the same step: the last label by name
    assert verbatim_positions(ctx) == {"a": {"list1": [2.0], "list2": [3.0]}}
    seed["final_step"] = {"val/pt": 12}  # no verbatim metric reached the report: nothing to draw
    assert verbatim_positions(ctx) == {}
