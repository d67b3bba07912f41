from preschool.analysis.report import _on_base_grid


def test_arm_curve_is_read_at_the_baseline_checkpoints():
    base = [(0, 1.0), (100, 2.0), (200, 3.0), (300, 4.0)]
    arm = [(50, 10.0), (150, 20.0), (250, 30.0)]  # a PPT stage shifted this arm's checkpoints
    xs, a, b = _on_base_grid(arm, base)
    assert xs == [100.0, 200.0]  # never extrapolated outside the arm's range
    assert a == [15.0, 25.0] and b == [2.0, 3.0]


def test_checkpoints_after_pt_collapse_to_the_latest():
    # a final non-PT stage (e.g. DEPO) adds checkpoints at the same PT-token count
    base = [(0, 1.0), (100, 2.0), (100, 2.5), (100, 2.7)]
    arm = [(0, 1.5), (100, 3.0), (100, 3.3)]
    xs, a, b = _on_base_grid(arm, base)
    assert xs == [0.0, 100.0] and a == [1.5, 3.3] and b == [1.0, 2.7]



# --- per-metric token axes (language tokens vs a synthetic task's own tokens)

from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402

from pathlib import Path  # noqa: E402

from preschool.analysis.report import (DOWNSTREAM, _point, _target, add_downstream_average, build_curves,  # noqa: E402
                                       metric_axes, task_datasets)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
from preschool.errors import ConfigError  # noqa: E402


def _cfg(axes=None):
    data = {"pt": SimpleNamespace(generator=None), "stack": SimpleNamespace(generator="stack"),
            "depo": SimpleNamespace(generator="depo")}
    return SimpleNamespace(data=data, report=SimpleNamespace(axes=axes or {}))


def test_each_metric_gets_its_own_axis():
    metrics = ["val/pt", "val/depo", "val/stack", "depo/acc", "minimal_pairs/acc", "lm_eval/piqa/acc"]
    # depo is a task stage (after PT); stack is pre-pretraining, read for retention on language tokens
    assert metric_axes(_cfg(), metrics, tasks={"depo"}) == {
        "val/pt": "pt", "val/depo": "depo", "val/stack": "pt", "depo/acc": "depo", "minimal_pairs/acc": "pt",
        "lm_eval/piqa/acc": "pt"}
    # report.axes wins, longest prefix first
    assert metric_axes(_cfg({"depo": "pt", "depo/acc": "depo"}), ["depo/acc", "depo/nll"], tasks={"depo"}) == \
        {"depo/acc": "depo", "depo/nll": "pt"}


def test_task_datasets_are_synthetic_sets_trained_after_language():
    from preschool.experiment import load_experiment

    cfg = load_experiment(EXAMPLES / "ppt_timing_stack.yaml")
    assert task_datasets(cfg) == {"depo"}  # stack runs before, inside and after PT across the arms
    assert task_datasets(load_experiment(EXAMPLES / "quickstart.yaml")) == set()  # Dyck is pre-pretraining


def _pt(step, pt, sources, v):
    return {"step": step, "pt": pt, "sources": sources, "value": v}


def test_task_metric_is_drawn_against_the_tasks_own_tokens():
    # PT stage (steps 1-2), then a DEPO stage that adds no language tokens (steps 3-4)
    pts = [_pt(1, 100, {"pt": 100}, 0.1), _pt(2, 200, {"pt": 200}, 0.2),
           _pt(3, 200, {"pt": 200, "depo": 50}, 0.5), _pt(4, 200, {"pt": 200, "depo": 100}, 0.9)]
    arms = {"a": {"seeds": {0: {"points": {"depo/acc": pts, "val/pt": pts}}}}}
    used = build_curves(arms, {"depo/acc": "depo", "val/pt": "pt"})
    c = arms["a"]["seeds"][0]["curves"]
    assert c["depo/acc"] == [[0, 0.1], [0, 0.2], [50, 0.5], [100, 0.9]]  # the acquisition curve
    assert c["val/pt"] == [[100, 0.1], [200, 0.2], [200, 0.5], [200, 0.9]]
    assert used == {"depo/acc": "depo", "val/pt": "pt"}
    # zero language tokens is a value, not a missing one (a PPT stage's last checkpoint)
    zero = {"a": {"seeds": {0: {"points": {"val/pt": [_point({"step": 2, "pt_tokens": 0, "tokens": 768}, 3.0)]}}}}}
    build_curves(zero, {"val/pt": "pt"})
    assert zero["a"]["seeds"][0]["curves"]["val/pt"] == [[0, 3.0]]
    # runs without per-source counts fall back to language tokens, and say so
    old = {"a": {"seeds": {0: {"points": {"depo/acc": [_pt(1, 100, None, 0.1)]}}}}}
    assert build_curves(old, {"depo/acc": "depo"}) == {"depo/acc": "pt"}


def test_downstream_average_and_targets():
    a = [_pt(1, 10, {}, 0.2), _pt(2, 20, {}, 0.4), _pt(3, 30, {}, 0.6)]
    b = [_pt(2, 20, {}, 0.8), _pt(3, 30, {}, 1.0)]
    arms = {"x": {"seeds": {0: {"points": {"lm_eval/t1/acc": a, "lm_eval/t2/acc": b}}}}}
    add_downstream_average(arms, ["lm_eval/t1/acc", "lm_eval/t2/acc"])
    avg = arms["x"]["seeds"][0]["points"][DOWNSTREAM]
    assert [(p["step"], p["value"]) for p in avg] == [(2, pytest.approx(0.6)), (3, pytest.approx(0.8))]
    assert _target(None, a, "m") is None and _target(0.5, a, "m") == 0.5
    assert _target("baseline@2", a, "m") == 0.4  # the baseline's value at that step
    with pytest.raises(ConfigError, match="no checkpoint at step 7"):
        _target("baseline@7", a, "m")
