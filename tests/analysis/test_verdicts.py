"""Issue #45: the verdicts of every report. Seed-level effects with a Student-t interval and their n in every
report (not only ladders), "one seed: no seed-level verdict", the verify-ppt within-run rule beside them with the
n it pooled, "not testable at this scale" where no arm clears its metric's chance level, equivalence against a
stated margin, metrics without a declared direction shown and not judged, and token-efficiency savings with
their seed interval or no number."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from preschool.analysis.compute import NOT_JUDGED, NOT_TESTABLE, efficiency_rows, stable_gains
from preschool.analysis.margins import EquivalenceSpec
from preschool.analysis.records import Point, SeedResult
from preschool.analysis.standard_tables import difference_cells, efficiency_lines

XS = [0, 100, 200, 300, 400, 500]


def _run(values: list[float], ppt: int = 0) -> SeedResult:
    curve = [[x, v] for x, v in zip(XS, values)]
    return SeedResult("", ppt_tokens=ppt, curves={"m": curve},
                      points={"m": tuple(Point(i, x, None, None, v) for i, (x, v) in enumerate(curve))})


def _arms(base: dict, arm: dict) -> dict:
    return {"base": {s: _run(v) for s, v in base.items()}, "arm": {s: _run(v) for s, v in arm.items()}}


def _gain(arms, higher=True, chance=None, margins=None):
    (g,) = stable_gains(arms, ["base", "arm"], "base", ["m"], {"m": "pt"}, {"m": higher}, 0.5,
                        {"m": chance} if chance is not None else {}, EquivalenceSpec(margins=margins or {}))
    return g


def _curve(end: float, seed: int, slope: float = 0.1) -> list[float]:
    """A rising accuracy curve ending near ``end`` (a little noise per seed and checkpoint)."""
    rng = np.random.default_rng(seed)
    return [round(end - slope * (5 - i) / 5 + float(rng.normal(0, 0.002)), 6) for i in range(6)]


def test_an_ordinary_experiment_gets_the_seed_level_verdict_and_the_within_run_rule_beside_it():
    """Issue #45 item 2: the difference table's verdict is the t interval over the seed pairs' window means, n
    stated; the one-SD rule is labelled the verify-ppt within-run rule with the checkpoints x seeds it pooled."""
    base = {s: _curve(0.70, s) for s in range(3)}
    arm = {s: [v + 0.03 + 0.004 * s for v in _curve(0.70, 10 + s)] for s in range(3)}
    g = _gain(_arms(base, arm))
    effects = [float(np.mean([a - b for a, b in zip(arm[s][3:], base[s][3:])])) for s in range(3)]
    assert g.per_seed == pytest.approx({str(s): e for s, e in enumerate(effects)})
    assert g.seed_level["n"] == 3 and g.seed_level["mean"] == pytest.approx(np.mean(effects))
    assert g.seed_verdict == "gain" and g.seed_level["interval"][0] > 0
    assert g.n == 9 and g.seeds == 3 and g.verdict == "stable gain"  # 3 checkpoints x 3 seeds, pooled
    cells = difference_cells(g)
    assert cells[0].endswith("(n=3)") and cells[1] == "3/3 > 0" and cells[2] == "gain"
    assert "n = 9 checkpoint differences from 3 seeds: stable gain" in cells[4]


def test_one_seed_has_no_seed_level_verdict_even_when_its_checkpoints_agree():
    """Issue #45 item 2: one seed's two checkpoints were called a "stable gain" (n = 2: minimal-pair accuracy
    +0.0073, SD 0.0006); with one seed the report has no seed-level verdict and says so."""
    arms = {"base": {0: SeedResult("", curves={"m": [[0, 0.50], [100, 0.505], [200, 0.512], [300, 0.5135]]})},
            "arm": {0: SeedResult("", curves={"m": [[0, 0.50], [100, 0.51], [200, 0.5197], [300, 0.5202]]})}}
    g = _gain(arms, chance=0.5)
    assert g.n == 2 and g.verdict == "stable gain"  # the within-run rule, as before: its own column
    assert g.seed_verdict == "one seed: no seed-level verdict" and g.seed_level["interval"] is None
    assert "one seed" in difference_cells(g)[0] and difference_cells(g)[2] == "one seed: no seed-level verdict"


def test_accuracies_within_noise_of_chance_are_not_testable_with_the_numbers_given():
    """Issue #45 item 3: BLiMP accuracies 0.505 / 0.516 got verdicts; every arm at chance is not testable."""
    base = {s: [0.5, 0.5, 0.501, 0.503, 0.505, v] for s, v in enumerate([0.505, 0.498, 0.512])}
    arm = {s: [0.5, 0.5, 0.503, 0.510, 0.514, v] for s, v in enumerate([0.516, 0.502, 0.521])}
    g = _gain(_arms(base, arm), chance=0.5)
    assert g.seed_verdict == NOT_TESTABLE and g.testability["verdict"] == "not testable"
    assert g.testability["arms"]["arm"]["interval"][0] < 0.5  # its own t interval holds chance
    # an arm that clears chance makes the comparison testable, and its verdict is the seed-level one
    learnt = {s: [v + 0.2 for v in vals] for s, vals in arm.items()}
    g2 = _gain(_arms(base, learnt), chance=0.5)
    assert g2.testability["verdict"] == "testable" and g2.seed_verdict == "gain"
    # a loss (no chance level) is always judged
    assert _gain(_arms(base, arm)).testability is None


def test_a_metric_without_a_declared_direction_is_shown_not_judged():
    """Issue #45 item 5: a plug-in diagnostic (weight RMS) came out as "+0.0003 stable gain" and got a token
    efficiency target; without a declared direction it has no verdict and no efficiency row."""
    arms = _arms({0: _curve(0.1, 0)}, {0: _curve(0.1003, 1)})
    g = _gain(arms, higher=None)
    assert g.seed_verdict == NOT_JUDGED and g.mean is None
    assert difference_cells(g)[2] == "shown, not judged: its evaluator declares no direction"
    spec = SimpleNamespace(targets={}, crossing="stays")  # report.efficiency
    assert efficiency_rows(spec, ["base", "arm"], arms, "base", ["m"], {"m": "pt"}, {"m": None}) == []


def test_an_equivalence_claim_needs_the_90_percent_interval_inside_the_margin():
    """Issue #45 item 4: "no difference" is equivalent within ±m, different, or inconclusive, against the margin
    the report config gives (default: 2 % of the baseline's final value)."""
    base = {s: [3.0, 2.8, 2.7, 2.6, 2.55, 2.5] for s in range(3)}
    arm = {s: [v + d for v in base[s]] for s, d in enumerate([0.01, -0.012, 0.004])}
    g = _gain(_arms(base, arm), higher=False)
    assert g.seed_verdict == "no difference shown"
    assert g.equivalence["margin"] == pytest.approx(0.05) and "2% of the baseline's final 2.5" in g.equivalence["how"]
    assert g.equivalence["verdict"] == "equivalent" and "equivalent within ±0.05" in difference_cells(g)[3]
    tight = _gain(_arms(base, arm), higher=False, margins={"m": 0.005})
    assert tight.equivalence["verdict"] == "inconclusive" and "inconclusive" in difference_cells(tight)[3]
    with pytest.raises(Exception, match="equivalence.*default|default"):
        EquivalenceSpec(default="-2%").validate()


def _efficiency(reach: list[bool], seeds=(0, 1, 2)):
    base = {s: [0.5, 0.6, 0.7, 0.75, 0.78, 0.80] for s in seeds}
    arm = {s: ([0.5, 0.7, 0.8 + 0.01 * s, 0.82, 0.83, 0.85] if reach[i] else [0.5, 0.55, 0.6, 0.62, 0.63, 0.64])
           for i, s in enumerate(seeds)}
    arms = {"base": {s: _run(v) for s, v in base.items()}, "arm": {s: _run(v, ppt=20) for s, v in arm.items()}}
    spec = SimpleNamespace(targets={}, crossing="stays")  # report.efficiency
    (e,) = efficiency_rows(spec, ["base", "arm"], arms, "base", ["m"], {"m": "pt"}, {"m": True})
    return e, [x for x in efficiency_lines([e], "base") if x.startswith("| arm | m |")][0]


def test_token_efficiency_savings_carry_their_seed_interval_or_are_not_a_number():
    """Issue #45 item 6: "+49.6 % in 2 of 3 seeds" was printed with no interval."""
    e, row = _efficiency([True, True, True])
    assert e.saved["fraction"]["n"] == 3 and e.saved["fraction"]["interval"] is not None
    assert e.saved["fraction"]["mean"] == pytest.approx(e.saved_fraction)
    assert "(n=3)" in row.split(" | ")[9] and "[" in row.split(" | ")[9]
    e, row = _efficiency([True, False, False])
    assert e.reached == 1 and "one seed: no interval" in row.split(" | ")[9] and "%" not in row.split(" | ")[9]


def test_curves_of_a_metric_with_a_chance_level_draw_the_chance_line(tmp_path, monkeypatch):
    import preschool.analysis.plots as plots

    drawn = {}
    real = plots.save_figure

    def keep(fig, path):
        drawn["lines"] = [tuple(line.get_ydata()) for ax in fig.axes for line in ax.get_lines()]
        return real(fig, path)

    monkeypatch.setattr(plots, "save_figure", keep)
    plots.plot_metric_vs_tokens({"a": [(0, 0.5), (10, 0.6)]}, tmp_path / "p.png", chance=0.5)
    assert (0.5, 0.5) in drawn["lines"]


def test_a_metric_on_an_axis_the_baseline_never_trains_on_is_not_compared():
    """A synthetic task's loss on its own token axis (val/stack vs STACK tokens) when the baseline trains no
    STACK: every baseline checkpoint sits at 0 of that axis, so there is no window to compare over. An arm
    that trained language before its STACK stage also has checkpoints at 0 (ppt_timing_tree's insert arms);
    reading them against the baseline's compared two language-trained models and gave verdicts. No row."""
    zero = [[0, v] for v in (8.6, 9.6, 12.6, 12.1)]
    arm = [[0, 9.0], [0, 10.5], [15_360, 6.0], [30_720, 4.7], [30_720, 10.4]]

    def seed(curve):
        return SeedResult("", ppt_tokens=0, curves={"m": curve},
                          points={"m": tuple(Point(i, x, None, None, v) for i, (x, v) in enumerate(curve))})

    arms = {"base": {s: seed(zero) for s in range(3)}, "arm": {s: seed(arm) for s in range(3)}}
    assert stable_gains(arms, ["base", "arm"], "base", ["m"], {"m": "stack"}, {"m": False}, 0.5) == []
