import json
import math

import numpy as np
import pytest

from preschool.compartments.slowdown import (Curve, interpolate_step, overlap, plateau,
                                             read_val_curve, slowdown_at_targets, slowdown_curve)
from preschool.errors import DataError

STEPS = np.array([1, 2, 4, 8, 16, 32, 64, 128])
LOSS = np.array([9.0, 8.0, 7.0, 6.0, 5.0, 4.5, 4.2, 4.0])


def test_identical_runs_give_one_everywhere():
    base = Curve(STEPS, LOSS)
    res = slowdown_curve(base, Curve(STEPS, LOSS))
    assert len(res) == len(STEPS)
    assert all(r["slowdown"] == pytest.approx(1.0) for r in res)


def test_exactly_twice_slower_gives_two():
    base = Curve(STEPS, LOSS)
    res = slowdown_curve(base, Curve(2 * STEPS, LOSS))
    assert len(res) == len(STEPS) and all(r["slowdown"] == pytest.approx(2.0) for r in res)
    at = slowdown_at_targets(base, Curve(2 * STEPS, LOSS), [6.5, 4.5, 3.0])
    assert at["6.5"]["slowdown"] == pytest.approx(2.0) and at["4.5"]["base_step"] == pytest.approx(32)
    assert at["3.0"] is None  # never reached


def test_non_overlapping_ranges_are_empty():
    base = Curve(STEPS, LOSS)
    assert overlap(base, Curve(STEPS, LOSS + 10)) is None
    assert slowdown_curve(base, Curve(STEPS, LOSS + 10)) == []
    assert slowdown_curve(base, Curve([], [])) == []


def test_interpolation_hand_values():
    c = Curve([10, 20, 40], [6.0, 4.0, 4.0])
    assert interpolate_step(c, 5.0) == pytest.approx(15.0)
    assert interpolate_step(c, 4.0) == pytest.approx(20.0)  # first bracketing pair wins
    assert interpolate_step(Curve([10, 20], [4.0, 4.0]), 4.0) == pytest.approx(15.0)  # equal losses -> midpoint
    assert interpolate_step(c, 7.0) is None
    # only checkpoints inside the overlap count; step 0 is skipped
    run = Curve([0, 30, 60, 90], [9.0, 5.0, 4.5, 3.0])
    res = slowdown_curve(c, run)
    assert [r["step"] for r in res] == [30, 60]
    assert res[0]["slowdown"] == pytest.approx(30 / 15) and res[1]["slowdown"] == pytest.approx(60 / 17.5)


def test_plateau_and_read(tmp_path):
    arm = tmp_path / "arm"
    arm.mkdir()
    rows = [{"event": "train", "step": 1, "loss": 9}, {"event": "val", "step": 1, "val/c0": 5.0, "val/c1": 7.0},
            {"event": "val", "step": 4, "val/c0": 3.0, "val/c1": 4.0}]
    (arm / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    c = read_val_curve(arm)
    np.testing.assert_allclose(c.losses, [6.0, 3.5])
    assert plateau({1: c, 2: Curve([], [])})[1] == 3.5 and math.isnan(plateau({2: Curve([], [])})[2])
    (arm / "metrics.jsonl").write_text("{bad\n" + json.dumps(rows[1]) + "\n")
    with pytest.raises(DataError, match="metrics.jsonl:1"):
        read_val_curve(arm)
