"""The evaluator contract's declarations (issue #45 item 2): every built-in evaluator declares each reported
metric's direction and, where it has one, its chance level; a metric an evaluator declares nothing about (a
plug-in's diagnostic) is recorded with no direction, which reports show and never judge."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from preschool.evals import EVALUATORS
from preschool.evals.base import EvalResult, Evaluator

# evaluator -> metrics its reports headline -> (higher is better, chance level or None)
DECLARED = {
    "minimal_pairs": {"acc": (True, 0.5), "acc_tokmean": (True, 0.5), "acc/field3/syntax": (True, 0.5),
                      "margin": (True, None), "margin_tokmean": (True, None)},
    "blimp": {"acc": (True, 0.5), "margin": (True, None)},
    "depo": {"acc": (True, 0.1), "acc/k4": (True, 0.1), "nll": (False, None), "nll/k1": (False, None)},
    "heldout": {"loss/pt": (False, None), "loss": (False, None)},
    "verbatim": {"x_perc": (False, 100.0), "x_del": (False, 0.0), "retrieval_success": (True, 0.5),
                 "nll_list1": (False, None), "nll_list2": (False, None), "coarse_nll_full": (False, None),
                 "control/x_perc": (False, 100.0)},
    "qa_f1": {"f1": (True, 0.0), "em": (True, 0.0), "f1/type/2hop": (True, 0.0), "train_loss_first": (False, None),
              "train_loss_last": (False, None)},
    "lm_eval": {"piqa/acc": (True, 0.5), "hellaswag/acc_norm": (True, 0.25), "social_iqa/acc": (True, 1 / 3),
                "piqa/ll_correct": (True, None), "lambada_openai/acc": (True, None),
                "wikitext/word_perplexity": (False, None)},
}
PARAMS = {"depo": {"task": {"n_nodes": 10, "max_hops": 4}}}


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_built_in_evaluator_declares_each_reported_metrics_direction_and_chance(name):
    cls = EVALUATORS.get(name).cls
    for metric, (higher, chance) in DECLARED[name].items():
        assert cls.direction(metric) is higher, (name, metric)
        got = cls.chance_level(metric, PARAMS.get(name, {}))
        assert got == (pytest.approx(chance) if chance is not None else None), (name, metric)


def test_depo_chance_is_a_guess_among_the_graphs_nodes():
    depo = EVALUATORS.get("depo").cls
    assert depo.chance_level("acc", {"task": {"n_nodes": 8}}) == pytest.approx(1 / 8)
    # nodes: train scores graphs of 3..n_nodes nodes: the expectation of 1/n over them, above 1/n_nodes
    assert depo.chance_level("acc", {"task": {"n_nodes": 8}, "nodes": "train"}) > 1 / 8
    assert depo.chance_level("acc", {"task": {"n_nodes": 1}}) is None  # a task its config refuses: none to read


@dataclass
class _Cfg:
    def validate(self) -> None:
        pass


class _WeightRms(Evaluator):
    """A plug-in's diagnostic that declares nothing (CONTRIBUTING's evaluator recipe, before it says to)."""

    def evaluate(self, model, tokenizer) -> EvalResult:
        return EvalResult({"weight_rms": 0.0123})


def test_a_metric_without_a_declared_direction_is_recorded_without_one(tmp_path):
    from preschool.evals.runner import collect_results
    from preschool.layout import EVAL_SUMMARY, evals_dir

    run = tmp_path / "run"
    out = evals_dir(run, 10) / "weights"
    summary = _WeightRms(_Cfg()).run(None, None, out_dir=out)
    assert summary["higher_is_better"] == {"weight_rms": None} and summary["reported"] == ["weight_rms"]
    assert json.loads((out / EVAL_SUMMARY).read_text())["higher_is_better"] == {"weight_rms": None}
    (row,) = collect_results(run)
    assert row["metric"] == "weight_rms" and row["higher_is_better"] is None
    # a scorer that knows a metric's direction (lm-eval) still overrides the class's silence
    assert _WeightRms.direction("weight_rms") is None
