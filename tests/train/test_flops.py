"""The measured matmul peak (the MFU denominator on a machine without a datasheet figure)."""

from preschool.train import flops


def test_peak_is_the_fastest_of_interleaved_sweeps_over_every_shape(monkeypatch):
    """One slow spell (a neighbour, a clock ramp) must not lower the denominator and inflate every MFU:
    each shape is measured once per sweep, sweeps are interleaved, and the peak is the fastest rate of all."""
    shapes = flops.CPU_SHAPES
    fast = shapes[2]
    calls = []

    def rate(device, m, k, n, seconds=0.3, dtype="float32"):
        calls.append((m, k, n))
        sweep = (len(calls) - 1) // len(shapes)
        return 150e9 if ((m, k, n) == fast and sweep == 1) else 110e9  # only the second sweep is undisturbed

    monkeypatch.setattr(flops, "matmul_rate", rate)
    peak, shape = flops.peak_matmul_flops("cpu", sweeps=3)
    assert calls == list(shapes) * 3
    assert (peak, shape) == (150e9, fast)
