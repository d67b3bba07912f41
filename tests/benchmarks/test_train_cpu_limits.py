"""benchmarks/train_cpu_limits.py's profile (also the source of train_throughput.py's kernel bound)."""

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_the_profile_records_only_steps_after_warm_up():
    """The first steps under torch's profiler run several times slower in a few large ops, so a share read
    from them is wrong: of the bare loop's steps only the last ``steps`` are in the profile."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from train_cpu_limits import profile_step
    finally:
        sys.path.pop(0)
    from preschool.train.model import ModelConfig, build_model

    model = build_model(ModelConfig(preset="micro"), 64, seed=0)
    rows = torch.randint(0, 64, (2, 17), generator=torch.Generator().manual_seed(0))
    prof = profile_step(model, lambda m, x: m(input_ids=x).logits, rows, steps=2)
    counts = {e.key: e.count for e in prof.key_averages()}
    optimizer_steps = [c for k, c in counts.items() if k.startswith("Optimizer.step#")]
    assert optimizer_steps == [2], counts.keys()
