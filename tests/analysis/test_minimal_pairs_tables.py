"""The minimal-pair report sections: identical-sentence pairs are said in the report (issue #45 item 7)."""

from __future__ import annotations

from preschool.analysis.records import Report, SeedResult
from preschool.analysis.sections import SectionContext, run_sections


def _report(structural: float | None) -> Report:
    curves = {"minimal_pairs/acc": [[0, 0.5], [100, 0.6]]}
    if structural is not None:
        curves["minimal_pairs/ties_structural"] = [[0, structural], [100, structural]]
    arms = {a: {0: SeedResult("", curves=dict(curves))} for a in ("base", "arm")}
    return Report(names=["base", "arm"], baseline="base", stages={"base": [], "arm": []}, metric_names=sorted(curves),
                  headline=["minimal_pairs/acc"], higher={"minimal_pairs/acc": True}, arms=arms, table=[], axes={},
                  nonfinite=[], setups={"minimal_pairs": "preset lm_eval"}, after_stages=[], stable_gain=[],
                  token_efficiency=[], window=0.5)


def _sections(tmp_path, rep):
    ctx = SectionContext(tmp_path, {"name": "t"}, rep.names, [0], "base", report=rep,
                         evaluators={"minimal_pairs": "minimal_pairs"})
    ctx.plots.mkdir(parents=True, exist_ok=True)
    return {name: (results, lines) for name, _, results, lines in run_sections(ctx, {})}


def test_structural_ties_are_said_in_the_report(tmp_path):
    got = _sections(tmp_path / "a", _report(1.0))
    results, lines = got["structural_ties"]
    assert results == {"minimal_pairs": 1}
    text = "\n".join(lines)
    assert "1 pair with the same sentence as good and bad" in text and "left out of `minimal_pairs/ties`" in text
    # none (or runs from before the count): no section
    assert "structural_ties" not in _sections(tmp_path / "b", _report(0.0))
    assert "structural_ties" not in _sections(tmp_path / "c", _report(None))
