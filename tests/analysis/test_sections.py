"""Report sections: the registry names bad sections; the context lists only runs that logged something."""

from dataclasses import replace

import pytest

from preschool.analysis.sections import SECTIONS, SectionContext, build_section
from preschool.errors import ConfigError

# the standard tables, built-in sections that come first in this order (analysis/standard_tables.py)
STANDARD = ["overview", "nonfinite", "arms", "doses", "axes", "results", "final_stage", "after_stages", "difference",
            "efficiency"]


def test_context_lists_runs_with_metrics_in_seed_order(tmp_path):
    for arm, seed in (("a", 3), ("a", 0), ("b", 0)):
        run = tmp_path / "arms" / arm / f"seed{seed}"
        run.mkdir(parents=True)
        if arm == "a":
            (run / "metrics.jsonl").write_text('{"event": "val", "step": 0, "val/x": 1.0}\n')
    ctx = SectionContext(tmp_path, {"arms": [{"name": "a"}, {"name": "b", "stages": []}]}, ["a", "b"], [0, 3], "a")
    assert ctx.runs("a") == {0: tmp_path / "arms/a/seed0", 3: tmp_path / "arms/a/seed3"}
    assert ctx.runs("b") == {}  # a run folder that logged nothing yet
    assert ctx.arm_config("b") == {"name": "b", "stages": []} and ctx.plots == tmp_path / "plots"


def test_unknown_sections_and_bad_params_name_the_field():
    build_section("plateau", {})  # loads the plug-ins, which register their sections
    assert {"plateau", "slowdown", "similarity", "audit_gap"} <= set(SECTIONS.names())
    with pytest.raises(ConfigError, match=r"report\.sections\.slowdwn.*did you mean 'slowdown'"):
        build_section("slowdwn", {})
    with pytest.raises(ConfigError, match=r"report\.sections\.similarity\.rows"):
        build_section("similarity", {"rows": 0})


def test_sections_switch_on_by_their_evaluators_results_in_order_before_the_configured_ones(tmp_path):
    from preschool.analysis.sections import run_sections

    from preschool.analysis.records import Report, SeedResult

    curves = {"minimal_pairs/acc": [[1, 0.5]], "minimal_pairs/acc/term/island_effects": [[1, 0.6]]}
    seed = SeedResult(str(tmp_path / "arms/a/seed0"), curves=curves, final_step={m: 1 for m in curves})
    report = Report(names=["a"], baseline="a", stages={"a": []}, metric_names=sorted(curves), headline=[], higher={},
                    arms={"a": {0: seed}}, table=[], axes={}, nonfinite=[], setups={}, after_stages=[],
                    stable_gain=[], token_efficiency=[], window=0.5)
    ctx = SectionContext(tmp_path, {"name": "x", "arms": [{"name": "a"}]}, ["a"], [0], "a", report=report,
                         evaluators={"minimal_pairs": "minimal_pairs"})
    assert run_sections(SectionContext(tmp_path, {}, ["a"], [0], "a"), {}) == []  # no report: nothing switches on
    # the standard tables first (a table with no rows writes nothing), then the sections results switch on
    ran = run_sections(ctx, {})
    assert [r[0] for r in ran[:len(STANDARD)]] == STANDARD and all(r[2] is None for r in ran[:len(STANDARD)])
    assert ran[0][3][0] == "# x: report" and [r[0] for r in ran if not r[3]] == ["nonfinite", "doses", "after_stages",
                                                                                "difference", "efficiency"]
    (name, section, results, lines), = ran[len(STANDARD):]
    assert name == "phenomena" and section.results_key == "phenomena" and results == {"a": {"island_effects": 0.6}}
    assert "| island_effects | 0.600 |" in lines
    assert ctx.figures == [("minimal-pair accuracy by phenomenon (final checkpoint)",
                            "plots/minimal_pairs_by_phenomenon.png")]
    # what results.json holds of the report, for sections that read plain data
    plain = ctx.report.to_json()["arms"]["a"]["seeds"][0]
    assert plain["curves"] == curves and plain["final_step"] == seed.final_step and "points" not in plain
    # the field table and the verbatim plot join when their results exist; ordered by `order`, then name
    seed = replace(seed, curves={**curves, "minimal_pairs/acc/field3/syntax": [[1, 0.7]]})
    ctx = replace(ctx, report=replace(report, arms={"a": {0: seed}}),
                  evaluators={"minimal_pairs": "minimal_pairs", "verbatim": "verbatim"})
    assert [r[0] for r in run_sections(ctx, {})][len(STANDARD):] == ["phenomena", "fields3", "verbatim_positions"]
    with pytest.raises(ConfigError, match=r"report\.sections\.nope"):  # configured names come after, checked
        run_sections(ctx, {"nope": {}})
