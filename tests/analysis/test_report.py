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

