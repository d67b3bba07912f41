"""Report sections: the registry names bad sections; the context lists only runs that logged something."""

import pytest

from preschool.analysis.sections import SECTIONS, SectionContext, build_section
from preschool.errors import ConfigError


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
