"""The report across a ladder's rungs: power-law fit and its refusal, seed resampling, crossings, decision table,
and a micro ladder run that ends in a report with the section."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from preschool.analysis.ladder import (bootstrap_over_seeds, crossing, decision_table, fit_power_law, power_law,
                                       same_sign, seed_means, seed_resamples, weighted_interval)

ROOT = Path(__file__).resolve().parents[2]
COMPUTE = np.geomspace(1e12, 1e16, 5)


@pytest.mark.parametrize("E, A, alpha", [(2.0, 300.0, 0.25), (0.9, -40.0, 0.15), (3.5, 1e6, 0.5)])
def test_the_fit_recovers_known_parameters_from_a_noise_free_curve(E, A, alpha):
    y = E + A * COMPUTE ** -alpha  # a loss falling to E, or (A < 0) an accuracy rising to it
    f = fit_power_law(COMPUTE, y)
    assert f["E"] == pytest.approx(E, rel=1e-4) and f["alpha"] == pytest.approx(alpha, rel=1e-4)
    assert f["A"] == pytest.approx(A, rel=1e-3) and not f["at_bound"] and f["rungs"] == 5
    assert power_law(f, 1e18) == pytest.approx(E + A * 1e18 ** -alpha, rel=1e-4)


def test_the_fit_is_refused_with_fewer_rungs_than_parameters():
    f = fit_power_law(COMPUTE[:2], [3.0, 2.5])
    assert set(f) == {"refused", "rungs"} and "2 rung(s)" in f["refused"] and "3 parameters" in f["refused"]
    # a missing value (NaN) does not count as a rung
    assert "refused" in fit_power_law(COMPUTE[:3], [3.0, float("nan"), 2.5])
    assert "refused" not in fit_power_law(COMPUTE[:3], [3.0, 2.7, 2.5])


def test_three_seeds_are_resampled_exactly_and_the_interval_holds_the_truth():
    res = seed_resamples(3, 1000, 0)
    assert len(res) == 10 and sum(w for _, w in res) == pytest.approx(1.0)
    assert dict(res)[(0, 1, 2)] == pytest.approx(6 / 27) and dict(res)[(0, 0, 0)] == pytest.approx(1 / 27)
    assert len(seed_resamples(8, 200, 0)) == 200  # C(15, 8) = 6435 multisets: random draws instead
    # three seeds scattered around a known curve: the interval of alpha holds it, the point fit is near it
    rng = np.random.default_rng(0)
    truth = 2.0 + 300.0 * COMPUTE ** -0.25
    per_seed = truth[None, :] + rng.normal(0, 0.002, (3, COMPUTE.size))
    fits, weights = bootstrap_over_seeds(COMPUTE, per_seed)
    lo, hi = weighted_interval([f["alpha"] for f in fits], weights)
    assert lo < 0.25 < hi and hi - lo < 0.05
    assert weighted_interval([1.0, 2.0, 3.0], [0.2, 0.6, 0.2], 0.5) == [2.0, 2.0]
    # a seed without a finished run at a rung is left out of that rung's mean; a rung with none is NaN
    means = seed_means(np.array([[1.0, np.nan, np.nan], [3.0, 5.0, np.nan]]))
    assert means[:2].tolist() == [2.0, 5.0] and math.isnan(means[2])


def test_the_crossing_of_two_known_curves():
    a = {"E": 1.0, "A": 1.0, "alpha": 0.5}
    b = {"E": 0.5, "A": 2.0, "alpha": 0.5}  # 1 + C^-1/2 = 0.5 + 2 C^-1/2  <=>  C = 4
    assert crossing(a, b, 1.0, 100.0) == pytest.approx(4.0, rel=1e-6)
    assert crossing(a, b, 5.0, 100.0) is None  # past it: b stays below a


def test_the_decision_table_on_hand_made_results():
    # lower is better; the largest rung (r2) orders a < b < c
    values = {"r0": {"a": 3.0, "b": 3.1, "c": 2.9},   # a<b agrees, a<c does not, b<c does not
              "r1": {"a": 2.5, "b": 2.6, "c": 2.7},   # all three agree
              "r2": {"a": 2.0, "b": 2.1, "c": 2.2}}
    t = decision_table(values, ["r0", "r1", "r2"], higher=False)
    assert t["target"] == "r2"
    by_pair = {tuple(p["pair"]): p for p in t["pairs"]}
    assert by_pair[("a", "b")]["agree"] == {"r0": True, "r1": True}
    assert by_pair[("a", "c")]["better"] == {"r0": "c", "r1": "a", "r2": "a"}
    assert by_pair[("b", "c")]["agree"] == {"r0": False, "r1": True}
    assert t["share"] == {"r0": pytest.approx(1 / 3), "r1": 1.0}
    # higher is better flips every order; a tie at a rung, or a missing value, does not agree
    t = decision_table({"r0": {"a": 1.0, "b": 1.0}, "r1": {"a": 0.5}, "r2": {"a": 0.7, "b": 0.6}},
                       ["r0", "r1", "r2"], higher=True)
    assert t["pairs"][0]["better"] == {"r0": "tie", "r1": None, "r2": "a"} and t["share"] == {"r0": 0.0, "r1": 0.0}


def test_same_sign():
    assert same_sign([0.1, 0.2, None]) == "yes (+)" and same_sign([-0.1, -0.3]) == "yes (-)"
    assert same_sign([0.1, -0.1]) == "no" and same_sign([0.1, 0.0]) == "no" and same_sign([0.2, None]) == "–"


def test_a_micro_ladder_run_ends_in_a_report_with_the_ladder_section(tmp_path):
    """3 rungs x 2 arms x 1 seed of a micro model, minimal pairs scored: the ladder section has a table, a
    fit (3 rungs: just enough), the gain per rung with its verdict, the decision table and one plot per
    headline metric (its continuous proxies included), every number in results.json."""
    from preschool.cli import main

    out = tmp_path / "ladder"
    assert main(["run", str(ROOT / "tests/ladder_micro.yaml"), "--out", str(out), "--no-progress"]) == 0
    text = (out / "report.md").read_text()
    assert "## Scale ladder" in text and "Decisions:" in text and "same sign at every rung" in text
    assert "is a guess" in text
    assert "The tables above (Results, differences, efficiency, other sections) are rung r2's." in text
    res = json.loads((out / "results.json").read_text())["sections"]["ladder"]
    assert [r["rung"] for r in res["rungs"]] == ["r0", "r1", "r2"]
    assert {"val/pt", "minimal_pairs/acc", "minimal_pairs/margin"} <= set(res["metrics"])
    m = res["metrics"]["val/pt"]
    flops = [p["flops"] for p in m["arms"]["pt_only"]["points"]]
    assert flops == sorted(flops) and all(p["n"] == 1 for p in m["arms"]["ppt"]["points"])
    assert "alpha" in m["arms"]["pt_only"]["fit"] and "E_interval" not in m["arms"]["pt_only"]["fit"]  # one seed
    assert set(m["gains"]["ppt"]["rungs"]) == {"r0", "r1", "r2"}
    assert m["gains"]["ppt"]["rungs"]["r1"]["verdict"] in ("stable gain", "stable harm", "no stable difference")
    assert m["decisions"]["target"] == "r2" and len(m["decisions"]["pairs"]) == 1
    for metric, d in res["metrics"].items():
        assert (out / d["plot"]).stat().st_size > 1000, metric
    # the FLOPs each run's DONE records (the trainer's count) are what `preschool plan` prices for that rung
    from preschool.config import to_dict
    from preschool.experiment import load_experiment
    from preschool.plan import config_targets, training_flops

    for view, rung in zip(load_experiment(ROOT / "tests/ladder_micro.yaml", [f"out={out}"]).ladder_views(),
                          res["rungs"]):
        for t in config_targets(view, to_dict(view.tokenizer)):
            assert rung["arms"][t.name]["flops"] == pytest.approx(training_flops(t), rel=1e-12), (view.rung, t.name)
            assert rung["arms"][t.name]["params"] == t.desc["params_total"]
    # the standard tables read the largest rung's runs
    top = json.loads((out / "results.json").read_text())["arms"]["pt_only"]["seeds"]["0"]["run_dir"]
    assert Path(top) == out / "rungs" / "r2" / "arms" / "pt_only" / "seed0"
    assert not math.isnan(m["arms"]["ppt"]["points"][2]["mean"])


def test_the_section_named_without_a_ladder_says_so():
    from preschool.analysis.ladder import LadderSection
    from preschool.analysis.sections import SectionContext

    ctx = SectionContext(Path("."), {}, ["a", "b"], [0], "a")
    assert not LadderSection.applies(ctx)
    results, lines = LadderSection().write(ctx)
    assert results is None and "no `ladder:`" in "\n".join(lines)
