"""The report across a ladder's rungs: power-law fit and its refusal, seed resampling, crossings, decision table,
and a micro ladder run that ends in a report with the section."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from preschool.analysis.scaling import (bootstrap_over_seeds, crossing, crossing_interval, crossing_status,
                                        decision_table, fit_power_law, power_law, resample_label, same_sign,
                                        seed_means, seed_resamples, weighted_interval)

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


def test_the_decision_table_scores_every_metric_against_the_primary_ranking_at_the_largest_rung():
    # three arms; the primary metric at the largest rung (r1) ranks a > b (stable) and a > c (stable); b vs c is a
    # noisy target (None): no metric is scored on it, whatever it says
    values = {"primary": {"r0": {"a": 0.5, "b": 0.6, "c": 0.4}, "r1": {"a": 0.9, "b": 0.8, "c": 0.7}},
              "proxy": {"r0": {"a": 2.0, "b": 2.5, "c": 2.4}, "r1": {"a": 2.0, "b": 2.1, "c": 2.2}}}  # lower better
    target = {("a", "b"): "a", ("a", "c"): "a", ("b", "c"): None}
    t = decision_table(values, ["r0", "r1"], {"primary": True, "proxy": False}, target)
    # the proxy is judged against the primary's ranking, not its own: at r0 it ranks a first in both pairs
    assert t["proxy"]["r0"]["better"] == {"a vs b": "a", "a vs c": "a", "b vs c": "c"}
    assert (t["proxy"]["r0"]["agree"], t["proxy"]["r0"]["scored"]) == (2, 2)
    # the primary at the smaller rung: b beats a (wrong), a beats c (right); b vs c is not scored
    assert (t["primary"]["r0"]["agree"], t["primary"]["r0"]["scored"], t["primary"]["r0"]["share"]) == (1, 2, 0.5)
    # a tie or a missing value does not agree; with no stable target nothing is scored
    t = decision_table({"m": {"r0": {"a": 1.0, "b": 1.0}, "r1": {"a": 0.5}}}, ["r0", "r1"], {"m": True},
                       {("a", "b"): "a"})
    assert t["m"]["r0"]["agree"] == 0 and t["m"]["r1"]["better"] == {"a vs b": None}
    assert decision_table(values, ["r0"], {"primary": True, "proxy": False}, {("a", "b"): None}
                          )["proxy"]["r0"]["share"] is None


def test_a_crossing_is_stated_only_with_an_interval_inside_the_searched_range():
    lo, top, hi = 1.0, 10.0, 1000.0
    assert crossing_status(50.0, [20.0, 300.0], lo, top, hi) == "crossing"
    assert crossing_status(50.0, [20.0, math.inf], lo, top, hi) == "undetermined"  # some resamples never cross
    assert crossing_status(None, [math.inf, math.inf], lo, top, hi) == "none"
    assert crossing_status(None, [20.0, math.inf], lo, top, hi) == "undetermined"
    assert crossing_status(50.0, [1.0, 1000.0], lo, top, hi) == "undetermined"  # the interval spans the range
    # one seed: no interval, so a crossing past the largest rung is not stated; one inside the rungs is
    assert crossing_status(50.0, None, lo, top, hi) == "undetermined"
    assert crossing_status(5.0, None, lo, top, hi) == "crossing"
    # the interval over resamples: a resample whose curves do not cross counts as crossing past the range
    a = {"E": 1.0, "A": 1.0, "alpha": 0.5}
    crossing_at_4 = {"E": 0.5, "A": 2.0, "alpha": 0.5}
    never = {"E": 2.0, "A": 2.0, "alpha": 0.5}
    got = crossing_interval([(a, crossing_at_4), (a, never)], [0.5, 0.5], 1.0, 100.0, 0.95)
    assert got["share_crossing"] == 0.5 and got["interval"][0] == pytest.approx(4.0) and math.isinf(got["interval"][1])


# the audited ladder (docs/results/ladder_dyck, issue #41): val/pt final values per seed, non-embedding parameters
DYCK = {"r0": (74304, 1.626e12, [2.77199, 2.76414, 2.78069], [2.86345, 2.78307, 2.94704]),
        "r1": (197696, 7.642e12, [2.36830, 2.35394, 2.34835], [2.52680, 2.43339, 2.51449]),
        "r2": (323712, 1.935e13, [2.25468, 2.27412, 2.29155], [2.31429, 2.30019, 2.30652]),
        "r3": (591488, 5.848e13, [2.23576, 2.23139, 2.22977], [2.24584, 2.26019, 2.25290])}


def _dyck_ladder(seeds=(0, 1, 2), proxy=None):
    """The audited ladder as the report pipeline hands it to the section: one Rung record per rung (no runs);
    ``proxy``: rung -> (pt_only, ppt_dyck) values of a second metric (higher is better), the same for every seed."""
    from preschool.analysis.records import Gain, Report, Rung, RungArm

    rungs = []
    for name, (nonemb, flops, base, arm) in DYCK.items():
        arms = {}
        for a, vals in (("pt_only", base), ("ppt_dyck", arm)):
            extra = {} if proxy is None else {"proxy": proxy[name][a == "ppt_dyck"]}
            arms[a] = RungArm(flops=flops * (1.05 if a == "ppt_dyck" else 1.0), params=nonemb + 50000,
                              params_non_embedding=nonemb, finals={s: {"val/pt": vals[s], **extra} for s in seeds},
                              unfinished=[], no_flops=[], runs={})
        # the rung's one-SD checkpoint row (what the verify-ppt rule reads): a stable harm at every rung
        gain = Gain("ppt_dyck", "val/pt", "pt", -0.05, 0.01, 6, False, True, "stable harm", len(seeds), [])
        headline = ["val/pt"] + ([] if proxy is None else ["proxy"])
        rep = Report(names=["pt_only", "ppt_dyck"], baseline="pt_only", stages={}, metric_names=headline,
                     headline=headline, higher={"val/pt": False, "proxy": True}, arms={}, table=[], axes={},
                     nonfinite=[],
                     setups={}, after_stages=[], stable_gain=[gain], token_efficiency=[], window=0.5)
        rungs.append(Rung(name, arms, rep))
    return rungs


def _ladder_section(tmp_path, params=None, seeds=(0, 1, 2), proxy=None):
    from preschool.analysis.ladder import LadderSection, LadderSectionConfig
    from preschool.analysis.sections import SectionContext

    ctx = SectionContext(tmp_path, {"rung": "r3"}, ["pt_only", "ppt_dyck"], list(seeds), "pt_only",
                         ladder=_dyck_ladder(seeds, proxy))
    ctx.plots.mkdir(parents=True)
    res, lines = LadderSection(LadderSectionConfig(**(params or {}))).write(ctx)
    return res, "\n".join(lines)


def test_the_audited_ladder_says_only_what_its_seeds_allow(tmp_path):
    """Issue #41 items 1-3 on the committed ladder's numbers: the per-rung verdicts are seed-level (the harm is
    shown at r1 only), 12 of 12 seed pairs show harm, the slope per decade of parameters is computed and its
    interval holds 0 ("no trend shown", not "harm shrinks"), and the decision table flags r3's noisy target."""
    res, text = _ladder_section(tmp_path)
    g = res["metrics"]["val/pt"]["gains"]["ppt_dyck"]
    verdicts = {r: v["verdict"] for r, v in g["rungs"].items()}
    assert verdicts == {"r0": "no difference shown", "r1": "harm", "r2": "no difference shown",
                        "r3": "no difference shown"}
    assert all(v["rule"] == "seeds" for v in g["rungs"].values())
    assert g["rungs"]["r3"]["interval"] == pytest.approx([-0.0445, 0.0032], abs=5e-4)
    assert g["pairs"] == {"n": 12, "positive": 0, "negative": 12}
    t = g["trend"]
    assert t["slope"] == pytest.approx(0.0937, abs=5e-4) and t["interval"][0] < 0 < t["interval"][1]
    assert "no trend shown with 3 seeds" in t["words"] and "shrinks" not in text
    assert "(t over 3 per-seed slopes)" in t["words"]
    assert "12/12 < 0" in text and "-0.02067 [-0.0445, +0.00318] (n=3), 3/3 < 0: no difference shown" in text
    # the fits' intervals over 3 seeds' resamples are their range, and the report does not call them 95 %
    assert "range over the seed resamples (3 seeds: not a 95% interval)" in text
    dec = res["decisions"]
    assert dec["primary"] == "val/pt" and dec["target"] == "r3"
    assert dec["pairs"][0]["stable"] is False and "noisy target, not scored" in text
    assert "Two arms: one pair" in text and "No stable target: no metric is scored." in text
    # the plot's band over the seed resamples is in results.json, from the smallest rung past the largest
    band = res["metrics"]["val/pt"]["arms"]["pt_only"]["fit"]["band"]
    assert band["flops"][0] == pytest.approx(1.626e12) and all(lo <= hi for lo, hi in zip(band["lo"], band["hi"]))
    assert (tmp_path / res["metrics"]["val/pt"]["plot"]).is_file()
    # every stated crossing has its interval (or is undetermined / none)
    c = res["metrics"]["val/pt"]["crossings"]["ppt_dyck"]
    assert c["status"] in ("crossing", "none", "undetermined")
    if c["status"] == "crossing":
        assert c["interval"][0] is not None and c["interval"][1] is not None


def test_the_verify_ppt_within_run_rule_is_an_option_and_one_seed_has_no_seed_level_verdict(tmp_path):
    res, text = _ladder_section(tmp_path, {"rule": "verify-ppt"})
    cells = res["metrics"]["val/pt"]["gains"]["ppt_dyck"]["rungs"]
    assert {v["rule"] for v in cells.values()} == {"verify-ppt"} and cells["r3"]["verdict"] == "stable harm"
    assert "verify-ppt within-run rule" in text
    assert "over 6 checkpoint differences (3 seeds): stable harm (verify-ppt within-run rule)" in text
    # two seeds: a seed-level interval (t = 12.7: very wide), said so, not the one-SD row in its place
    res, text = _ladder_section(tmp_path / "two", seeds=(0, 1))
    cells = res["metrics"]["val/pt"]["gains"]["ppt_dyck"]["rungs"]
    assert {v["rule"] for v in cells.values()} == {"seeds"} and "(n=2: t = 12.7, a very wide interval)" in text
    assert all(v["interval"] is not None for v in cells.values())
    # one seed: no seed-level verdict, and the within-run row beside it, named as such
    res, text = _ladder_section(tmp_path / "one", seeds=(0,))
    cells = res["metrics"]["val/pt"]["gains"]["ppt_dyck"]["rungs"]
    assert {v["verdict"] for v in cells.values()} == {"one seed: no seed-level verdict"}
    assert "one seed: no seed-level verdict; -0.05 ± 0.01 over 6 checkpoint differences (1 seeds): stable harm " \
           "(verify-ppt within-run rule)" in text
    assert res["metrics"]["val/pt"]["gains"]["ppt_dyck"]["trend"]["verdict"] == "one seed"
    from preschool.analysis.sections import build_section
    from preschool.errors import ConfigError

    with pytest.raises(ConfigError, match=r"report\.sections\.ladder\.rule"):
        build_section("ladder", {"rule": "two-sd"})


def test_a_stable_target_scores_every_metric_against_the_primary_ranking(tmp_path):
    # a proxy (higher is better) that ranks ppt_dyck first at r0 and r3, pt_only first at r1 and r2; the primary
    # is the proxy itself here (its r3 ranking is the same for every seed: stable), scored at every smaller rung
    proxy = {"r0": (0.50, 0.60), "r1": (0.61, 0.55), "r2": (0.70, 0.65), "r3": (0.70, 0.75)}
    res, text = _ladder_section(tmp_path, {"primary": "proxy"}, proxy=proxy)
    dec = res["decisions"]
    assert dec["primary"] == "proxy" and dec["pairs"][0]["stable"] and dec["pairs"][0]["better"] == "ppt_dyck"
    agree = {r: v["agree"] for r, v in dec["metrics"]["proxy"].items()}
    assert agree == {"r0": 1, "r1": 0, "r2": 0, "r3": 1} and dec["metrics"]["val/pt"]["r3"]["better"] == \
        {"pt_only vs ppt_dyck": "pt_only"}  # val/pt ranks the other way: it predicts the proxy wrong at r3
    assert "| proxy | 1/1 | 0/1 | 0/1 | target |" in text and "| val/pt | 0/1 | 0/1 | 0/1 | 0/1 |" in text
    from preschool.errors import ConfigError

    with pytest.raises(ConfigError, match=r"report\.sections\.ladder\.primary.*'nope'"):
        _ladder_section(tmp_path / "bad", {"primary": "nope"}, proxy=proxy)


def test_seed_trends_and_intervals():
    from preschool.analysis.stats import seed_interval, seed_trend, trend_text

    x = [0.0, 1.0, 2.0]
    rising = np.array([[0.0, 1.0, 2.0], [0.1, 1.2, 2.1], [-0.1, 0.9, 2.2]])  # every seed's slope ~ +1
    t = seed_trend(x, rising)
    assert t["slope"] == pytest.approx(1.05) and t["verdict"] == "rises" and t["positive"] == 3
    # the interval is the per-rung rule's: the Student-t interval over the seeds' own slopes
    assert t["interval"] == pytest.approx(seed_interval(t["per_seed"])["interval"])
    mixed = np.array([[0.0, 1.0, 2.0], [0.0, -1.0, -2.0], [0.0, 0.5, 1.0]])
    assert seed_trend(x, mixed)["verdict"] == "no trend shown"
    assert trend_text(seed_trend(x, mixed), "decade", "up", "down") .endswith(": no trend shown with 3 seeds")
    assert seed_trend(x, rising[:1])["verdict"] == "one seed" and seed_trend([1.0], rising[:, :1])["verdict"] == \
        "one point"
    # a seed with a value at two points has its slope; one with a single point has none and is not counted
    t = seed_trend(x, np.array([[0.0, np.nan, 2.0], [0.0, 1.0, 2.0], [np.nan, np.nan, 5.0]]))
    assert t["slope"] == pytest.approx(1.0) and t["seeds"] == 2 and t["per_seed"][2] is None
    v = seed_interval([-0.0101, -0.0288, -0.0231])
    assert v["interval"] == pytest.approx([-0.0445, 0.0032], abs=5e-4) and v["verdict"] == "no difference shown"
    assert v["negative"] == 3 and seed_interval([0.10, 0.12, 0.11])["verdict"] == "above"
    # two seeds get their (very wide) interval; one gets none and no verdict
    two = seed_interval([-0.1, -0.2])
    assert two["interval"] == pytest.approx([-0.15 - 12.7062 * 0.05, -0.15 + 12.7062 * 0.05], abs=1e-4)
    assert two["verdict"] == "no difference shown" and seed_interval([-0.1])["verdict"] == "one seed"


def test_a_trend_is_worded_only_when_the_t_interval_over_the_seeds_slopes_excludes_zero():
    """Issue #45 item 1: three seeds' slopes all of one sign made a seed-bootstrap interval (the slopes' range)
    exclude 0, and the report said "grows"; the Student-t interval over those three slopes holds 0."""
    from preschool.analysis.stats import seed_trend

    x = [0.0, 1.0, 2.0]
    for slopes, interval in (([0.151, 0.013, 0.193], [-0.115, 0.352]),  # the Dyck ladder, minimal pairs
                             ([0.039, 0.031, 0.105], [-0.042, 0.160])):  # the compartments ladder's growth with c
        t = seed_trend(x, np.array([[s * xi for xi in x] for s in slopes]))
        assert t["interval"] == pytest.approx(interval, abs=1e-3) and t["verdict"] == "no trend shown"


def test_same_sign():
    assert same_sign([0.1, 0.2, None]) == "yes (+)" and same_sign([-0.1, -0.3]) == "yes (-)"
    assert same_sign([0.1, -0.1]) == "no" and same_sign([0.1, 0.0]) == "no" and same_sign([0.2, None]) == "–"


def test_a_micro_ladder_run_ends_in_a_report_with_the_ladder_section(tmp_path):
    """3 rungs x 2 arms x 1 seed of a micro model, minimal pairs scored: the ladder section has a table, a
    fit (3 rungs: just enough), the gain per rung with its verdict (one seed: the verify-ppt rule, named), the
    trend (one seed: none shown), the decision table and one plot per headline metric (its continuous proxies
    included), every number in results.json; the section read the rungs the report pipeline computed."""
    from preschool.cli import main
    from preschool.experiment import load_experiment

    out = tmp_path / "ladder"
    assert main(["run", str(ROOT / "tests/ladder_micro.yaml"), "--out", str(out), "--no-progress"]) == 0
    text = (out / "report.md").read_text()
    assert "## Scale ladder" in text and "### Decisions:" in text and "| seed pairs |" in text
    assert "is a guess" in text and "(verify-ppt within-run rule)" in text and "one seed: no interval" in text
    assert "one seed: no seed-level verdict" in text
    assert "The tables above (Results, differences, efficiency, other sections) are rung r2's." in text
    res = json.loads((out / "results.json").read_text())["sections"]["ladder"]
    assert [r["rung"] for r in res["rungs"]] == ["r0", "r1", "r2"]
    assert {"val/pt", "minimal_pairs/acc", "minimal_pairs/margin"} <= set(res["metrics"])
    m = res["metrics"]["val/pt"]
    flops = [p["flops"] for p in m["arms"]["pt_only"]["points"]]
    assert flops == sorted(flops) and all(p["n"] == 1 for p in m["arms"]["ppt"]["points"])
    assert "alpha" in m["arms"]["pt_only"]["fit"] and "E_interval" not in m["arms"]["pt_only"]["fit"]  # one seed
    assert set(m["gains"]["ppt"]["rungs"]) == {"r0", "r1", "r2"}
    r1 = m["gains"]["ppt"]["rungs"]["r1"]
    assert r1["rule"] == "seeds" and r1["verdict"] == "one seed: no seed-level verdict"
    assert r1["checkpoints"]["verdict"] in ("stable gain", "stable harm", "no stable difference")
    assert m["gains"]["ppt"]["trend"]["verdict"] == "one seed" and m["gains"]["ppt"]["pairs"]["n"] == 3
    assert res["decisions"]["target"] == "r2" and len(res["decisions"]["pairs"]) == 1
    assert res["decisions"]["primary"] == "val/pt" and set(res["decisions"]["metrics"]) == set(res["metrics"])
    for metric, d in res["metrics"].items():
        assert (out / d["plot"]).stat().st_size > 1000, metric
    # the section's context holds the rungs as computed records (no config objects); the largest rung's record
    # is the report the standard tables read, computed once
    from preschool.analysis.records import Rung
    from preschool.analysis.report import build_report, section_context

    top_view = load_experiment(ROOT / "tests/ladder_micro.yaml", [f"out={out}"]).report_view()
    rep = build_report(top_view.runs, top_view.cfg.report, top_view.cfg.data)
    ladder = section_context(top_view, rep).ladder
    assert [r.name for r in ladder] == ["r0", "r1", "r2"] and all(isinstance(r, Rung) for r in ladder)
    assert ladder[-1].report is rep and ladder[0].arms["ppt"].flops == res["rungs"][0]["arms"]["ppt"]["flops"]
    # the FLOPs each run's DONE records (the trainer's count) are what `preschool plan` prices for that rung
    from preschool.config import to_dict
    from preschool.plan import config_targets, training_flops

    exp = load_experiment(ROOT / "tests/ladder_micro.yaml", [f"out={out}"])
    for name, rung in zip(exp.ladder_rungs, res["rungs"]):
        for t in config_targets(exp, name, to_dict(exp.cfg.tokenizer)):
            assert rung["arms"][t.name]["flops"] == pytest.approx(training_flops(t), rel=1e-12), (name, t.name)
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


def test_the_default_primary_metric_is_on_the_language_axis(tmp_path):
    """A synthetic task's held-out loss (val/dyck: its own tokens' axis) sorts first among the headline metrics;
    the decisions still predict the language metric's ranking unless `primary` names another."""
    from dataclasses import replace

    from preschool.analysis.ladder import LadderSection
    from preschool.analysis.sections import SectionContext

    proxy = {r: (0.5, 0.6) for r in DYCK}
    rungs = []
    for r in _dyck_ladder(proxy=proxy):
        arms = {a: replace(d, finals={s: {"val/dyck": 1.0 + s, **v} for s, v in d.finals.items()})
                for a, d in r.arms.items()}
        rep = replace(r.report, headline=["val/dyck", *r.report.headline], axes={"val/dyck": "dyck"},
                      higher={**r.report.higher, "val/dyck": False})
        rungs.append(replace(r, arms=arms, report=rep))
    ctx = SectionContext(tmp_path, {"rung": "r3"}, ["pt_only", "ppt_dyck"], [0, 1, 2], "pt_only", ladder=rungs)
    ctx.plots.mkdir(parents=True)
    res, _ = LadderSection().write(ctx)
    assert list(res["metrics"])[0] == "val/dyck" and res["decisions"]["primary"] == "val/pt"


def test_a_rung_at_chance_is_not_testable_and_a_metric_without_a_direction_is_not_judged(tmp_path):
    """Issue #45 items 2-3 across a ladder: where no arm's seeds clear the metric's chance level the rung says "not
    testable at this scale" (not gain / harm); a metric whose evaluator declares no direction keeps its values and
    fits, and gets no gains, trend, crossing or decision."""
    from preschool.analysis.ladder import LadderSection, LadderSectionConfig
    from preschool.analysis.records import Report, Rung, RungArm
    from preschool.analysis.sections import SectionContext

    acc = {"pt_only": [0.50, 0.51, 0.49], "ppt_dyck": [0.52, 0.53, 0.505]}  # the arm 3/3 ahead, every arm at chance
    rungs = []
    for j, (name, (nonemb, flops, base, arm)) in enumerate(DYCK.items()):
        arms = {a: RungArm(flops=flops, params=nonemb, params_non_embedding=nonemb,
                           finals={s: {"val/pt": vals[s], "acc": acc[a][s] + (0.1 * j if j == 3 else 0.0),
                                       "rms": 0.01 * (j + s)} for s in range(3)},
                           unfinished=[], no_flops=[], runs={})
                for a, vals in (("pt_only", base), ("ppt_dyck", arm))}
        headline = ["val/pt", "acc", "rms"]
        rep = Report(names=["pt_only", "ppt_dyck"], baseline="pt_only", stages={}, metric_names=headline,
                     headline=headline, higher={"val/pt": False, "acc": True, "rms": None}, arms={}, table=[],
                     axes={}, nonfinite=[], setups={}, after_stages=[], stable_gain=[], token_efficiency=[],
                     window=0.5, chance={"acc": 0.5})
        rungs.append(Rung(name, arms, rep))
    ctx = SectionContext(tmp_path, {"rung": "r3"}, ["pt_only", "ppt_dyck"], [0, 1, 2], "pt_only", ladder=rungs)
    ctx.plots.mkdir(parents=True)
    res, lines = LadderSection(LadderSectionConfig()).write(ctx)
    cells = res["metrics"]["acc"]["gains"]["ppt_dyck"]["rungs"]
    assert [cells[r]["verdict"] for r in ("r0", "r1", "r2")] == ["not testable at this scale"] * 3
    # both arms 0.1 above chance at r3: testable, and the verdict is the seed-level one
    assert cells["r3"]["verdict"] == "gain" and cells["r3"]["testability"]["verdict"] == "testable"
    assert "### acc (higher is better; chance 0.5)" in "\n".join(lines)
    rms = res["metrics"]["rms"]
    assert rms["direction"] is None and rms["gains"] == {} and rms["crossings"] == {}
    assert "rms" not in res["decisions"]["metrics"] and "no declared direction: shown, not judged" in "\n".join(lines)
