from preschool.analysis.compute import on_base_grid


def test_arm_curve_is_read_at_the_baseline_checkpoints():
    base = [(0, 1.0), (100, 2.0), (200, 3.0), (300, 4.0)]
    arm = [(50, 10.0), (150, 20.0), (250, 30.0)]  # a PPT stage shifted this arm's checkpoints
    xs, a, b = on_base_grid(arm, base)
    assert xs == [100.0, 200.0]  # never extrapolated outside the arm's range
    assert a == [15.0, 25.0] and b == [2.0, 3.0]


def test_checkpoints_after_pt_collapse_to_the_latest():
    # a final non-PT stage (e.g. DEPO) adds checkpoints at the same PT-token count
    base = [(0, 1.0), (100, 2.0), (100, 2.5), (100, 2.7)]
    arm = [(0, 1.5), (100, 3.0), (100, 3.3)]
    xs, a, b = on_base_grid(arm, base)
    assert xs == [0.0, 100.0] and a == [1.5, 3.3] and b == [1.0, 2.7]



# --- per-metric token axes (language tokens vs a synthetic task's own tokens)

from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402

from pathlib import Path  # noqa: E402

from preschool.analysis.collect import DOWNSTREAM, add_downstream_average, point  # noqa: E402
from preschool.analysis.compute import _target, metric_axes, seed_result, task_datasets, used_axes  # noqa: E402
from preschool.analysis.records import Collected, Point, Report, SeedResult, SeedRun  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
from preschool.errors import ConfigError  # noqa: E402


def _data():
    from preschool.data.builders.corpus import CorpusSpec
    from preschool.synthetic.builder import GeneratorSpec

    return {"pt": CorpusSpec(corpus="sb"), "stack": GeneratorSpec(generator="stack"),
            "depo": GeneratorSpec(generator="depo")}


def test_each_metric_gets_its_own_axis():
    metrics = ["val/pt", "val/depo", "val/stack", "depo/acc", "minimal_pairs/acc", "lm_eval/piqa/acc"]
    # depo is a task stage (after PT); stack is pre-pretraining: its held-out loss still falls with STACK
    # tokens, not language ones (issue #23.4: val/dyck on the language axis gave ppt_dyck "saved +100 %")
    assert metric_axes(_data(), {}, metrics, {"depo"}) == {
        "val/pt": "pt", "val/depo": "depo", "val/stack": "stack", "depo/acc": "depo", "minimal_pairs/acc": "pt",
        "lm_eval/piqa/acc": "pt"}
    # a held-out loss per source sits on its source's axis, as val/<dataset> does (stack_vs_queue: its mean
    # over a language set and an untrained DEPO set was headlined on the language axis, and gave a "stable
    # gain" that was the reserved ids' embeddings, not language); the mean is not headlined
    assert metric_axes(_data(), {}, ["heldout/loss/depo", "heldout/loss/pt", "heldout/loss/stack", "heldout/loss"],
                       {"depo"}) == {"heldout/loss/depo": "depo", "heldout/loss/pt": "pt",
                                           "heldout/loss/stack": "stack", "heldout/loss": "pt"}
    from preschool.evals.heldout import Heldout

    assert Heldout.reported("loss/depo") and not Heldout.reported("loss") and not Heldout.reported("ppl/pt")
    # report.axes wins, longest prefix first
    assert metric_axes(_data(), {"depo": "pt", "depo/acc": "depo"}, ["depo/acc", "depo/nll"], {"depo"}) == \
        {"depo/acc": "depo", "depo/nll": "pt"}


def test_task_datasets_are_synthetic_sets_trained_after_language():
    from preschool.experiment import load_experiment

    exp = load_experiment(EXAMPLES / "ppt_timing_stack.yaml")
    assert task_datasets(exp.runs, exp.cfg.data) == {"depo"}  # stack runs before, inside and after PT across the arms
    exp = load_experiment(EXAMPLES / "quickstart.yaml")
    assert task_datasets(exp.runs, exp.cfg.data) == set()  # Dyck is pre-pretraining


def _pt(step, pt, sources, v):
    return Point(step, pt, None, sources, v)


def _run(points, higher=None, reported=()):
    """A collected run with these points (metric -> [Point]) and nothing else logged."""
    return SeedRun(run_dir="", done=True, total_tokens=0, ppt_tokens=0, doses={}, setups={},
                   higher_is_better=dict(higher or {}), reported=tuple(reported),
                   points={m: tuple(p) for m, p in points.items()}, nonfinite={})


def _curves(run, axes, stages=None):
    """The run's curves on ``axes`` as compute draws them, and the axes used."""
    used = used_axes(Collected({"a": {0: run}}), axes)
    return seed_result(run, used, stages), used


def _report(arms):
    """A computed report of nothing but these runs (arm -> seed -> SeedResult)."""
    return Report(names=list(arms), baseline=next(iter(arms)), stages={}, metric_names=[], headline=[], higher={},
                  arms=arms, table=[], axes={}, nonfinite=[], setups={}, after_stages=[], stable_gain=[],
                  token_efficiency=[], window=0.5)


def test_task_metric_is_drawn_against_the_tasks_own_tokens():
    # PT stage (steps 1-2), then a DEPO stage that adds no language tokens (steps 3-4)
    pts = [_pt(1, 100, {"pt": 100}, 0.1), _pt(2, 200, {"pt": 200}, 0.2),
           _pt(3, 200, {"pt": 200, "depo": 50}, 0.5), _pt(4, 200, {"pt": 200, "depo": 100}, 0.9)]
    res, used = _curves(_run({"depo/acc": pts, "val/pt": pts}), {"depo/acc": "depo", "val/pt": "pt"})
    c = res.curves
    assert c["depo/acc"] == [[0, 0.1], [0, 0.2], [50, 0.5], [100, 0.9]]  # the acquisition curve
    assert c["val/pt"] == [[100, 0.1], [200, 0.2], [200, 0.5], [200, 0.9]]
    assert used == {"depo/acc": "depo", "val/pt": "pt"}
    # zero language tokens is a value, not a missing one (a PPT stage's last checkpoint)
    zero, _ = _curves(_run({"val/pt": [point({"step": 2, "pt_tokens": 0, "tokens": 768}, 3.0)]}), {"val/pt": "pt"})
    assert zero.curves["val/pt"] == [[0, 3.0]]
    # runs without per-source counts fall back to language tokens, and say so
    old, used = _curves(_run({"depo/acc": [_pt(1, 100, None, 0.1)]}), {"depo/acc": "depo"})
    assert used == {"depo/acc": "pt"} and old.curves["depo/acc"] == [[100, 0.1]]


def test_downstream_average_and_targets():
    a = [_pt(1, 10, {}, 0.2), _pt(2, 20, {}, 0.4), _pt(3, 30, {}, 0.6)]
    b = [_pt(2, 20, {}, 0.8), _pt(3, 30, {}, 1.0)]
    runs = Collected({"x": {0: _run({"lm_eval/t1/acc": a, "lm_eval/t2/acc": b})}})
    avg = add_downstream_average(runs, ["lm_eval/t1/acc", "lm_eval/t2/acc"]).arms["x"][0].points[DOWNSTREAM]
    assert DOWNSTREAM not in runs.arms["x"][0].points  # a new record: the collected one is left as it was
    assert [(p.step, p.value) for p in avg] == [(2, pytest.approx(0.6)), (3, pytest.approx(0.8))]
    assert _target(None, a, "m") is None and _target(0.5, a, "m") == 0.5
    assert _target("baseline@2", a, "m") == 0.4  # the baseline's value at that step
    with pytest.raises(ConfigError, match="no checkpoint at step 7"):
        _target("baseline@7", a, "m")


# --- issue #23: end-of-stage values, downstream metrics, comparability

def _stage(name, data, counts_as_pt=True):
    return SimpleNamespace(name=name, datasets=[data], counts_as_pt=counts_as_pt)


def _sp(step, pt, sources, stage, v):
    return Point(step, pt, stage, sources, v)


def test_a_later_stage_does_not_overwrite_the_end_of_pretraining_value():
    # PT (steps 1-2), then DEPO (steps 3-4), which leaves language tokens where they were and moves val/pt
    pts = [_sp(1, 100, {"pt": 100}, "pt", 5.6), _sp(2, 200, {"pt": 200}, "pt", 5.185),
           _sp(3, 200, {"pt": 200, "depo": 50}, "depo", 5.21), _sp(4, 200, {"pt": 200, "depo": 100}, "depo", 5.232)]
    s, _ = _curves(_run({"val/pt": pts, "depo/acc": pts}), {"val/pt": "pt", "depo/acc": "depo"},
                   [_stage("pt", "pt"), _stage("depo", "depo", False)])
    assert s.curves["val/pt"] == [[100, 5.6], [200, 5.185]]  # the curve (and its final value) ends with PT
    assert s.final_stage["val/pt"] == "pt" and s.final_step["val/pt"] == 2
    assert s.stage_ends["val/pt"] == {"pt": 5.185, "depo": 5.232}  # DEPO's effect stays reachable
    # a metric of the DEPO task ends with the DEPO stage
    assert s.curves["depo/acc"][-1] == [100, 5.232] and s.final_stage["depo/acc"] == "depo"


def test_stage_doses_are_read_from_the_logged_token_accounts():
    from preschool.analysis.collect import stage_doses

    rows = [{"step": 2, "stage": "stack", "tokens_by_source": {"stack": 256}},
            {"step": 4, "stage": "pt_mixed", "tokens_by_source": {"stack": 300, "pt": 2000}},
            {"step": 6, "stage": "pt_mixed", "tokens_by_source": {"stack": 384, "pt": 3968}},
            {"step": 8, "tokens_by_stage": {"stack": 256, "pt_mixed": 4096, "depo": 512},
             "tokens_by_source": {"stack": 384, "pt": 3968, "depo": 512}}]
    assert stage_doses(rows, ["stack", "pt_mixed", "depo"]) == {
        "stack": {"stack": 256}, "pt_mixed": {"stack": 128, "pt": 3968}, "depo": {"depo": 512}}


def test_downstream_metrics_are_headlined_with_their_evaluators_direction(tmp_path):
    from preschool.analysis.compute import headline_metrics
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
    seed = _run({"lm_eval/piqa/acc": pts(0.6), "lm_eval/wikitext/word_perplexity": pts(80.0),
                 "minimal_pairs/acc": pts(0.7), "minimal_pairs/n_pairs": pts(9.0), "val/pt": pts(4.0)},
                higher={"lm_eval/" + m: r["higher_is_better"] for m, r in rows.items()}
                | {"minimal_pairs/acc": True, "minimal_pairs/n_pairs": True},
                reported=["lm_eval/" + m for m, r in rows.items() if r["reported"]] + ["minimal_pairs/acc"])
    headline, higher = headline_metrics(Collected({"a": {0: seed}}), sorted(seed.points))
    assert headline == ["val/pt", "lm_eval/piqa/acc", "lm_eval/wikitext/word_perplexity", "minimal_pairs/acc"]
    assert higher["lm_eval/wikitext/word_perplexity"] is False and higher["val/pt"] is False
    assert higher["lm_eval/piqa/acc"] is True


def test_downstream_average_takes_its_components_direction():
    a = [_pt(1, 10, {}, 30.0), _pt(2, 20, {}, 20.0)]
    arms = Collected({"x": {0: _run({"lm_eval/t1/word_perplexity": a, "lm_eval/t2/word_perplexity": a,
                                     "lm_eval/t3/acc": a},
                                    higher={"lm_eval/t1/word_perplexity": False, "lm_eval/t2/word_perplexity": False,
                                            "lm_eval/t3/acc": True})}})
    seed = add_downstream_average(arms, ["lm_eval/t1/word_perplexity", "lm_eval/t2/word_perplexity"]).arms["x"][0]
    assert seed.higher_is_better[DOWNSTREAM] is False and DOWNSTREAM in seed.reported
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
        return SeedResult("", curves={"minimal_pairs/acc/field3/syntax": [(1, 0.1), (2, syntax)],
                                      "minimal_pairs/acc/term/island_effects": [(2, island)],
                                      "minimal_pairs/acc": [(2, 0.5)]})

    rep = _report({"raw": {0: seed(0.6, 0.4), 1: seed(0.8, 0.6)}, "l2t": {0: seed(0.9, 0.7)}})
    fields = final_breakdown(rep, "field3")
    assert fields == {"raw": {"syntax": pytest.approx(0.7)}, "l2t": {"syntax": 0.9}}
    assert final_breakdown(rep, "term")["l2t"] == {"island_effects": 0.7}
    lines = breakdown_lines("Minimal pairs by field", "field", fields)
    assert lines[0] == "## Minimal pairs by field" and "| field | raw | l2t |" in lines
    assert "| syntax | 0.700 | 0.900 |" in lines


def test_minimal_pair_margins_get_their_own_breakdown_tables_beside_the_accuracies():
    """margin/term/* and margin/field3/* (issue #30: accuracy's continuous proxy) are tabled on their own,
    never mixed into the accuracy tables (nor margin_tokmean into the margin ones)."""
    from preschool.analysis.minimal_pairs_tables import Fields3Margin, PhenomenaMargin, final_breakdown

    curves = {"minimal_pairs/acc/term/binding": [(2, 0.5)], "minimal_pairs/margin/term/binding": [(1, 0.0), (2, 1.5)],
              "minimal_pairs/margin_tokmean/term/binding": [(2, 0.1)], "minimal_pairs/margin/field3/syntax": [(2, 2.0)]}
    rep = _report({"raw": {0: SeedResult("", curves=curves),
                           1: SeedResult("", curves={**curves, "minimal_pairs/margin/term/binding": [(2, 2.5)]})}})
    assert final_breakdown(rep, "term") == {"raw": {"binding": 0.5}}
    assert final_breakdown(rep, "term", "margin") == {"raw": {"binding": 2.0}}
    assert final_breakdown(rep, "field3", "margin") == {"raw": {"syntax": 2.0}}
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
    def ctx(final_step):
        seed = SeedResult(str(run), final_step=final_step)
        return SectionContext(tmp_path, {}, ["a", "b"], [0], "a", report=_report({"a": {0: seed}, "b": {}}),
                              evaluators={"verbatim": "verbatim", "verbatim_b": "verbatim", "val": "val"})

    assert verbatim_positions(ctx({"verbatim/x_perc": 8, "verbatim_b/x_perc": 4, "val/pt": 8})) == \
        {"a": {"list1": [2.0], "list2": [2.0]}}
    # two labels end at the same step: the last label by name
    assert verbatim_positions(ctx({"verbatim/x_perc": 8, "verbatim_b/x_perc": 8, "val/pt": 8})) == \
        {"a": {"list1": [2.0], "list2": [3.0]}}
    assert verbatim_positions(ctx({"val/pt": 12})) == {}  # no verbatim metric reached the report: nothing to draw


def test_token_efficiency_rows_follow_the_configured_crossing_rule_and_say_which():
    """A loss curve that touches the baseline's final value once and ends worse (a stable harm on the gain
    table) saves nothing under the default rule; `report.efficiency.crossing: first` counts it, and each
    row of the table names its rule (issue #31 item 6)."""
    from preschool.analysis.compute import efficiency_rows, stable_gains
    from preschool.analysis.standard_tables import efficiency_lines

    base = [[0, 6.0], [100, 5.0], [200, 4.6], [300, 4.4], [400, 4.3]]
    arm = [[0, 6.0], [100, 4.2], [200, 4.7], [300, 4.6], [400, 4.5]]
    pts = lambda c: tuple(Point(i, x, None, None, v) for i, (x, v) in enumerate(c))  # noqa: E731

    def arms():
        return {"pt_only": {0: SeedResult("", ppt_tokens=0, curves={"val/pt": base}, points={"val/pt": pts(base)})},
                "dyck": {0: SeedResult("", ppt_tokens=50, curves={"val/pt": arm}, points={"val/pt": pts(arm)})}}

    def spec(crossing):
        return SimpleNamespace(targets={}, crossing=crossing)

    gain = stable_gains(arms(), ["pt_only", "dyck"], "pt_only", ["val/pt"], {"val/pt": "pt"}, {"val/pt": False}, 0.5)
    assert gain[0].stable_harm
    names = ["pt_only", "dyck"]
    stays = efficiency_rows(spec("stays"), names, arms(), "pt_only", ["val/pt"], {"val/pt": "pt"}, {"val/pt": False})
    first = efficiency_rows(spec("first"), names, arms(), "pt_only", ["val/pt"], {"val/pt": "pt"}, {"val/pt": False})
    assert stays[0].crossing == "stays" and stays[0].reached == 0 and stays[0].saved_fraction is None
    assert first[0].crossing == "first" and first[0].reached == 1 and first[0].saved_fraction > 0
    row = [x for x in efficiency_lines(stays + first, "pt_only") if x.startswith("| dyck")]
    assert [r.split(" | ")[4] for r in row] == ["stays", "first"]


def test_the_crossing_rule_is_checked_on_load(tmp_path):
    from preschool.experiment import load_experiment

    with pytest.raises(ConfigError, match="report.efficiency.crossing"):
        load_experiment(EXAMPLES / "quickstart.yaml", overrides=["report.efficiency.crossing=last"])


def test_downstream_groups_average_the_category_means_as_verify_ppt():
    """verify-ppt's "average 49.4" is the mean of its four category scores (50.7, 50.1, 55.9, 40.8), not
    of the 10 tasks: named groups give each category a row (downstream/<group>) and downstream/avg their
    mean; `average: tasks` weighs every task alike (issue #31 item 2)."""
    from preschool.analysis.compute import headline_metrics
    from preschool.config import from_dict
    from preschool.experiment import EfficiencySpec

    scores = {"race": 0.507, "record": 0.507, "sciq": 0.60, "arc_easy": 0.50, "openbookqa": 0.403,
              "hellaswag": 0.559, "copa": 0.559, "piqa": 0.559, "social_iqa": 0.559, "lambada_openai": 0.408}
    groups = {"rc": ["race", "record"], "sciqa": ["sciq", "arc_easy", "openbookqa"],
              "cr": ["hellaswag", "copa", "piqa", "social_iqa"], "lm": ["lambada_openai"]}
    spec = from_dict(EfficiencySpec, {"downstream": {"groups": {g: [f"lm_eval/{t}/acc" for t in ts]
                                                                for g, ts in groups.items()}}})

    pts = {f"lm_eval/{t}/acc": [_pt(1, 10, {}, v)] for t, v in scores.items()}
    runs = Collected({"x": {0: _run(pts, higher={m: True for m in pts}, reported=list(pts))}})

    a = add_downstream_average(runs, spec.downstream)
    s = a.arms["x"][0]
    value = lambda m: s.points[m][0].value  # noqa: E731
    assert [round(value(f"downstream/{g}"), 4) for g in groups] == [0.507, 0.501, 0.559, 0.408]
    assert value(DOWNSTREAM) == pytest.approx(0.49375)
    headline, _ = headline_metrics(a, sorted(s.points))
    assert {"downstream/rc", "downstream/sciqa", "downstream/cr", "downstream/lm", DOWNSTREAM} <= set(headline)
    flat = add_downstream_average(runs, from_dict(EfficiencySpec, {"downstream": {"groups": spec.downstream.groups,
                                                                                  "average": "tasks"}}).downstream)
    assert flat.arms["x"][0].points[DOWNSTREAM][0].value == pytest.approx(sum(scores.values()) / 10)


@pytest.mark.parametrize("downstream, field", [
    ({"groups": {"rc": ["a/x"], "lm": ["a/x"]}}, "downstream.groups.lm"),
    ({"groups": {"avg": ["a/x"]}}, "downstream.groups.avg"),
    ({"groups": {"rc": []}}, "downstream.groups.rc"),
    ({"groups": {"rc": ["a/x"]}, "average": "median"}, "downstream.average"),
    ({"grups": {"rc": ["a/x"]}}, "downstream.grups"),
])
def test_bad_downstream_groups_name_the_field(downstream, field):
    from preschool.config import from_dict
    from preschool.experiment import EfficiencySpec

    with pytest.raises(ConfigError) as e:
        from_dict(EfficiencySpec, {"downstream": downstream})
    assert e.value.field == field
