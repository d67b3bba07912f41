"""`preschool plan` of a ladder: per rung x arm the FLOPs of one run, per rung and in total over every run."""

import re
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.config import load_yaml
from preschool.experiment import load_experiment
from preschool.plan import ladder_targets, training_flops

ROOT = Path(__file__).resolve().parents[1]


def test_a_ladder_plan_prices_every_rung_and_the_total(capsys):
    path = ROOT / "examples" / "paper" / "verify_ppt_ladder.yaml"
    assert main(["plan", str(path), "--gpus", "8", "--gpu", "h100-80gb"]) == 0
    out = capsys.readouterr().out
    rungs = ladder_targets(load_experiment(path), load_yaml(path)["tokenizer"])
    assert [r for r, _ in rungs] == ["r60m", "r125m", "r360m", "r1b"]
    per_rung = {r: sum(training_flops(a) * a.seeds for a in arms) for r, arms in rungs}
    for r, flops in per_rung.items():
        assert re.search("^  " + re.escape(f"{r}: {flops:.3g} FLOPs"), out, re.M), r
    assert f"total: {sum(per_rung.values()):.3g} FLOPs" in out and "for 24 runs" in out
    # the 1B rung: 20 PT tokens per non-embedding parameter of the llama-family gpt-1b (36 x 25,168,896 + 1,536:
    # the Qwen2 count less its QKV biases)
    (top,) = [arms for r, arms in rungs if r == "r1b"]
    assert top[0].stages[0].tokens == 20 * 906_081_792
    assert "| r1b | dyck | gpt-1b 36x1536 |" in out


def test_one_rung_is_planned_with_its_memory_per_mode(capsys):
    assert main(["plan", str(ROOT / "examples" / "ladder_dyck.yaml"), "--rung", "r3", "--gpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "(rung r3)" in out and "cpu-3x128" in out and "fsdp + ckpt" in out and "11.8M tokens" in out


@pytest.mark.parametrize("example", ["ladder_dyck", "ladder_compartments"])
def test_the_cpu_ladders_say_their_estimate_and_stay_near_three_hours(example):
    """The header states plan's estimate; at the rate the header's MFU assumes on one measured core the
    ladder's FLOPs stay within a few hours (the bound the examples are sized to)."""
    path = ROOT / "examples" / f"{example}.yaml"
    head = path.read_text().split("\nname:")[0]
    assert "preschool plan" in head and " h " in head
    rungs = ladder_targets(load_experiment(path), load_yaml(path)["tokenizer"])
    total = sum(training_flops(a) * a.seeds for _, arms in rungs for a in arms)
    assert total < 7e14  # ~3 h at the 6e10 FLOP/s measured for these shapes on one core (docs/ladder.md)


def test_a_rung_that_would_repeat_its_data_is_noted(capsys):
    path = ROOT / "examples" / "ladder_dyck.yaml"
    assert main(["plan", str(path), "--set", "data.pt.tokens=5000000", "--gpus", "1"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note")]
    # r2 trains 6.47M and r3 11.8M PT tokens per arm from 5M; r0 and r1 fit
    assert len(notes) == 4 and all("(r2)" in n or "(r3)" in n for n in notes)
    assert "note (r3): arm ppt_dyck stage pt: 11.8M tokens from data.pt of 5M: 2.4 epochs" in notes
