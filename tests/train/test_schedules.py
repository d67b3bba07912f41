import pytest

from preschool.errors import ConfigError
from preschool.config import from_dict
from preschool.train.schedules import ScheduleConfig, log_spaced_steps, lr_at, warmup_steps


def curve(n, **kw):
    cfg = ScheduleConfig(**kw)
    cfg.validate()
    return [lr_at(s, n, cfg) for s in range(n)]


def test_cosine_warmup_peak_floor():
    c = curve(100, name="cosine", lr=1.0, warmup=0.1, min_lr_ratio=0.1)
    assert c[0] == pytest.approx(0.1) and c[9] == pytest.approx(1.0)
    assert all(a < b for a, b in zip(c[:10], c[1:10]))
    assert all(a >= b for a, b in zip(c[10:], c[11:]))
    assert c[-1] == pytest.approx(0.1)
    assert min(c) >= 0.1 - 1e-12


def test_wsd_holds_then_decays_over_fraction():
    c = curve(100, name="wsd", lr=2.0, warmup=5, min_lr_ratio=0.0, wsd_decay=0.2)
    assert c[4] == pytest.approx(2.0)
    assert all(v == pytest.approx(2.0) for v in c[5:80])
    assert c[80] < 2.0 and c[-1] == pytest.approx(0.0)
    lin = curve(100, name="wsd", lr=1.0, warmup=0, min_lr_ratio=0.5, wsd_decay=0.5, wsd_decay_shape="linear")
    diffs = [a - b for a, b in zip(lin[50:], lin[51:])]
    assert max(diffs) == pytest.approx(min(diffs))  # linear ramp
    assert lin[-1] == pytest.approx(0.5)


def test_constant_and_warmup_units():
    c = curve(10, name="constant", lr=3.0, warmup=4)
    assert c[:4] == pytest.approx([0.75, 1.5, 2.25, 3.0]) and c[4:] == pytest.approx([3.0] * 6)
    assert warmup_steps(1000, 0.05) == 50 and warmup_steps(1000, 50) == 50 and warmup_steps(10, 0) == 0


def test_bad_values_name_field():
    with pytest.raises(ConfigError, match="min_lr_ratio"):
        from_dict(ScheduleConfig, {"min_lr_ratio": 2})
    with pytest.raises(ConfigError, match="name"):
        from_dict(ScheduleConfig, {"name": "cosin"})


def test_log_spaced_steps_dense_early_sparse_late():
    s = sorted(log_spaced_steps(1000, 4))
    assert s == [1, 2, 3, 6, 10, 18, 32, 56, 100, 178, 316, 562, 1000]
    assert sorted(log_spaced_steps(5, 2)) == [1, 3] and log_spaced_steps(0, 4) == set()


def test_linear_is_hf_linear_with_warmup():
    cfg = ScheduleConfig(name="linear", lr=1.0, warmup=2, min_lr_ratio=0.0)
    # HF get_linear_schedule_with_warmup: step/warmup during warm-up (here (step+1)/w), then (total-step)/(total-w)
    assert [round(lr_at(s, 6, cfg), 6) for s in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]


def test_lr_unset_means_the_runs_lr_and_lr_at_refuses_it_unresolved():
    cfg = ScheduleConfig(name="constant")
    assert cfg.lr is None and cfg.resolved(3e-4).lr == 3e-4
    assert ScheduleConfig(lr=1e-2).resolved(3e-4).lr == 1e-2  # a schedule's own lr wins
    assert lr_at(0, 10, cfg.resolved(3e-4)) == 3e-4
    with pytest.raises(ValueError, match="schedule.lr is unset"):
        lr_at(0, 10, cfg)
