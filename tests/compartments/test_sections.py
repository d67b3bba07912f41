"""The compartments report sections across a ladder (issue #41 item 8): does slowdown grow with c at every rung,
and does that growth change with size? Run folders written by hand: each run's val loss is a known curve whose
steps are stretched by c^g, so the slowdown of c against c = 1 is c^g at every loss."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from preschool.analysis.records import Report, Rung, RungArm
from preschool.analysis.sections import SectionContext, build_section
from preschool.layout import data_dir, run_dir

COUNTS = {"c1": 1, "c2": 2, "c4": 4, "c8": 8}
SEEDS = [0, 1, 2]
STEPS = np.unique(np.geomspace(1, 20000, 160).round())


def _loss(step: np.ndarray, k: float) -> np.ndarray:
    """A loss falling from 7.5 to 1.5; ``k`` stretches its steps (twice the k: twice the steps to any loss)."""
    return 1.5 + 6.0 / (1.0 + step / k)


def _write_run(path: Path, k: float) -> None:
    path.mkdir(parents=True)
    with open(path / "metrics.jsonl", "w") as f:
        for s, loss in zip(STEPS, _loss(STEPS, k)):
            f.write(json.dumps({"event": "val", "step": int(s), "val/c0": float(loss)}) + "\n")


def _ladder(out: Path, growth: list[float], jitter) -> SectionContext:
    """A ladder of len(growth) rungs (1e4, 1e5, ... non-embedding parameters) with arms c1..c8 x 3 seeds; at rung j
    arm c's seed s needs ``c ** growth[j] * (1 + jitter(s, j, c))`` times c1's steps to reach any loss."""
    config = {"arms": [{"name": a, "stages": [{"name": "train", "data": f"base_{a}"}]} for a in COUNTS],
              "data": {f"base_{a}": {"kind": "compartmented", "source": "base"} for a in COUNTS},
              "rung": f"r{len(growth) - 1}"}
    for a, c in COUNTS.items():
        man = data_dir(out) / f"base_{a}" / "train" / "manifest.json"
        man.parent.mkdir(parents=True)
        man.write_text(json.dumps({"compartments": {"presentation": {"n_compartments": c, "base_vocab": 64,
                                                                     "mode": "offset"},
                                                    "config": {"translation": {"fraction": 0.0}}}}))
    rungs = []
    for j, g in enumerate(growth):
        name, arms = f"r{j}", {}
        for a, c in COUNTS.items():
            runs = {}
            for s in SEEDS:
                runs[s] = str(run_dir(out, a, s, name))
                _write_run(Path(runs[s]), 10.0 * c ** g * (1.0 + (jitter(s, j, c) if c > 1 else 0.0)))
            arms[a] = RungArm(flops=1e9 * 10 ** j, params=10 ** (j + 4) + 5000, params_non_embedding=10 ** (j + 4),
                              finals={s: {} for s in SEEDS}, unfinished=[], no_flops=[], runs=runs)
        rep = Report(names=list(COUNTS), baseline="c1", stages={}, metric_names=[], headline=[], higher={}, arms={},
                     table=[], axes={}, nonfinite=[], setups={}, after_stages=[], stable_gain=[],
                     token_efficiency=[], window=0.5)
        rungs.append(Rung(name, arms, rep))
    ctx = SectionContext(out, config, list(COUNTS), SEEDS, "c1", ladder=rungs)
    ctx.plots.mkdir(parents=True)
    return ctx


def _write(ctx: SectionContext) -> tuple[dict, str]:
    res, lines = build_section("slowdown", {"targets": [5.0, 3.0]}).write(ctx)
    return res, "\n".join(lines)


def test_slowdown_growing_with_c_more_at_larger_rungs_is_reported_with_intervals(tmp_path):
    # growth exponent 0.5, 0.8, 1.1 across the rungs, each seed a little off (a few percent)
    ctx = _ladder(tmp_path, [0.5, 0.8, 1.1], lambda s, j, c: 0.02 * math.sin(3 * s + 5 * j + c))
    res, text = _write(ctx)
    lad = res["ladder"]
    assert lad["compartments"] == COUNTS and [r["rung"] for r in lad["rungs"]] == ["r0", "r1", "r2"]
    for r, g in zip(lad["rungs"], [0.5, 0.8, 1.1]):
        # the slowdown of c8 at loss 3 is 8^g (to a few percent: linear interpolation, the jitter)
        assert r["slowdown"]["3.0"]["c8"]["summary"]["mean"] == pytest.approx(8 ** g, rel=0.05)
        assert r["slowdown"]["3.0"]["c1"]["summary"]["mean"] == 1.0
        for key in ("5.0", "3.0", "median"):
            t = r["growth"][key]
            assert t["verdict"] == "rises" and t["interval"][0] > 0 and t["seeds"] == 3, (r["rung"], key)
    for key in ("5.0", "3.0", "median"):
        assert lad["with_size"][key]["verdict"] == "rises", key
    assert "### Slowdown across the ladder" in text and "grows with c" in text
    assert "the growth with c increases with size" in text
    assert text.count("no change with size shown") == 0


def test_the_same_growth_at_every_size_shows_no_change_with_size(tmp_path):
    # growth exponent 0.8 at every rung; the seeds' jitter goes up with size for one seed, down for another
    ctx = _ladder(tmp_path, [0.8, 0.8, 0.8], lambda s, j, c: 0.03 * (s - 1) * (j - 1) * math.log2(c) / 3)
    res, text = _write(ctx)
    assert all(r["growth"]["3.0"]["verdict"] == "rises" for r in res["ladder"]["rungs"])
    assert res["ladder"]["with_size"]["3.0"]["verdict"] == "no trend shown"
    assert "no change with size shown with 3 seeds" in text


def test_no_ladder_table_without_a_ladder_or_a_second_compartment_count(tmp_path):
    ctx = _ladder(tmp_path, [0.8, 0.8], lambda s, j, c: 0.0)
    one_rung = SectionContext(ctx.out, ctx.config, ctx.arms, SEEDS, "c1", ladder=ctx.ladder[:1])
    res, text = _write(one_rung)
    assert "ladder" not in res and "across the ladder" not in text
    only_c1 = SectionContext(ctx.out, ctx.config, ["c1"], SEEDS, "c1", ladder=ctx.ladder)
    assert "ladder" not in _write(only_c1)[0]


def test_a_seed_whose_largest_c_never_reaches_the_loss_is_left_out_of_the_growth(tmp_path):
    # at r0, c8 of seed 2 is so slow that it never comes down to loss 3 within the steps logged: that seed's
    # growth at loss 3 would lack its slowest arm (biased low), so it is left out; the other seeds still count
    ctx = _ladder(tmp_path, [0.8, 0.8], lambda s, j, c: 400.0 if (s, j, c) == (2, 0, 8) else 0.01 * s)
    res, text = _write(ctx)
    r0 = res["ladder"]["rungs"][0]
    assert r0["slowdown"]["3.0"]["c8"]["summary"]["n"] == 2 and r0["growth"]["3.0"]["seeds"] == 2
    assert r0["growth"]["5.0"]["seeds"] == 3 and res["ladder"]["rungs"][1]["growth"]["3.0"]["seeds"] == 3


@pytest.mark.parametrize("name, params", [("slowdown", {"targets": [5.0, 3.0]}), ("plateau", {})])
def test_a_section_renders_the_same_from_its_stored_inputs_without_the_runs(name, params, tmp_path):
    """`preschool report --from-results` (issue #41 item 4): what the section read of the run folders is kept in
    results.json (`sections.<name>.inputs`), so a re-render with no run folder and no prepared data writes the
    same results and the same lines, the ladder's growth with c across rungs included."""
    import shutil
    from dataclasses import replace

    from preschool.layout import RUNGS

    ctx = _ladder(tmp_path / "out", [0.5, 0.8, 1.1], lambda s, j, c: 0.02 * math.sin(3 * s + 5 * j + c))
    res, lines = build_section(name, params).write(ctx)
    assert "inputs" in res
    stored = {"sections": {name: json.loads(json.dumps(res))}}
    shutil.rmtree(ctx.out / RUNGS)
    shutil.rmtree(ctx.data_dir)
    again = SectionContext(ctx.out, ctx.config, ctx.arms, SEEDS, "c1", stored=stored,
                           ladder=[replace(r, arms={a: replace(e, runs={}) for a, e in r.arms.items()})
                                   for r in ctx.ladder])
    section = build_section(name, params)
    assert section.stored_gap(stored) is None
    res2, lines2 = section.write(again)
    assert lines2 == lines and json.loads(json.dumps(res2)) == stored["sections"][name]
    # a results.json from before the inputs were kept: the re-render says so instead of guessing
    old = {"sections": {name: {k: v for k, v in res.items() if k != "inputs"}}}
    assert f"sections.{name}.inputs" in section.stored_gap(old)
