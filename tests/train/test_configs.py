"""Run configs (train/configs.py): ``reserved_ids: auto`` resolved from the shard manifests."""

import pytest

from preschool.errors import ConfigError
from preschool.io import write_json
from preschool.train.configs import StageConfig, TrainConfig, resolve_reserved_ids


def test_reserved_ids_auto_reads_the_range_from_the_shard_manifests(tmp_path):
    for name, rng in (("text", None), ("dyck", [300, 308]), ("stack", [300, 316])):
        write_json(tmp_path / name / "train" / "manifest.json", {"reserved_ids": rng})
    cfg = TrainConfig(stages=[StageConfig(name="s", data="text", tokens=64)], reserved_ids="auto")
    ds = {n: tmp_path / n for n in ("text", "dyck", "stack")}
    assert resolve_reserved_ids(cfg, ds).reserved_ids == [300, 316]
    assert resolve_reserved_ids(TrainConfig(stages=cfg.stages, reserved_ids=[1, 2]), ds).reserved_ids == [1, 2]
    with pytest.raises(ConfigError, match="reserved_ids.*none of the datasets"):
        resolve_reserved_ids(cfg, {"text": tmp_path / "text"})


def _train(stages, **kw):
    from preschool.config import from_dict

    return from_dict(TrainConfig, {"stages": stages, **kw})


NEW = [{"name": "pt", "data": "raw", "tokens": 3e6, "schedule": {"name": "wsd", "lr": 3e-4, "warmup": 0.05,
                                                                  "min_lr_ratio": 0.0, "wsd_decay": 0.2}},
       {"name": "ft", "data": "qa", "tokens": 1e5, "schedule": "constant"}]
# the flat spelling of earlier versions: the same two stages
OLD = [{"name": "pt", "data": "raw", "tokens": 3e6, "schedule": "wsd", "lr": 3e-4, "warmup": 0.05,
        "min_lr_ratio": 0.0, "wsd_decay": 0.2},
       {"name": "ft", "data": "qa", "tokens": 1e5, "schedule": "constant"}]


def test_stage_schedule_is_nested_and_a_bare_name_is_its_shape_with_defaults():
    import warnings

    from preschool.train.schedules import ScheduleConfig

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the current spelling, shorthand included, does not warn
        cfg = _train(NEW)
    assert cfg.stages[0].schedule == ScheduleConfig(name="wsd", lr=3e-4, warmup=0.05, min_lr_ratio=0.0, wsd_decay=0.2)
    assert cfg.stages[1].schedule == ScheduleConfig(name="constant")
    assert cfg.stages[1].schedule.resolved(cfg.lr).lr == cfg.lr  # lr unset: the run's


def test_flat_stage_schedule_keys_load_to_the_same_config_with_a_warning():
    with pytest.warns(FutureWarning, match=r"stages\[0\]\.warmup -> stages\[0\]\.schedule\.warmup") as rec:
        old = _train(OLD)
    assert old == _train(NEW)
    assert len(rec) == 1 and "stages[0].lr -> stages[0].schedule.lr" in str(rec[0].message)
    assert "stages[1]" not in str(rec[0].message)  # `schedule: constant` alone is the current shorthand


def test_a_key_both_flat_and_in_schedule_is_refused_naming_it():
    with pytest.raises(ConfigError, match="both here and as stages.0..schedule.warmup") as e:
        _train([{"name": "pt", "data": "raw", "tokens": 64, "warmup": 2, "schedule": {"warmup": 3}}])
    assert e.value.field == "stages[0].warmup"


@pytest.mark.parametrize("schedule", [5, [1], True])
def test_a_schedule_that_is_no_mapping_is_named_beside_flat_keys_too(schedule):
    """The bad value is the schedule, with or without an old flat key beside it (not 'unknown key warmup')."""
    for flat in ({}, {"warmup": 0.1}):
        with pytest.raises(ConfigError, match="expected a mapping") as e:
            _train([{"name": "pt", "data": "raw", "tokens": 64, "schedule": schedule, **flat}])
        assert e.value.field == "stages[0].schedule"


@pytest.mark.parametrize("schedule, field_, msg", [
    ({"warmup": -1}, "stages[0].schedule.warmup", "must be >= 0"),
    ({"name": "cosin"}, "stages[0].schedule.name", "did you mean 'cosine'"),
    ({"lr": 0}, "stages[0].schedule.lr", "must be > 0"),
    ({"warm_up": 1}, "stages[0].schedule.warm_up", "did you mean 'warmup'"),
])
def test_schedule_errors_name_the_nested_field(schedule, field_, msg):
    with pytest.raises(ConfigError, match=msg) as e:
        _train([{"name": "pt", "data": "raw", "tokens": 64, "schedule": schedule}])
    assert e.value.field == field_


def test_stages_of_a_group_must_share_the_schedule_compared_with_lr_resolved():
    def stages(b):
        return [{"name": "a", "data": "raw", "tokens": 64, "group": "pt", "schedule": {"warmup": 2}},
                {"name": "s", "data": "syn", "tokens": 64, "schedule": {"warmup": 9}},
                {"name": "b", "data": "raw", "tokens": 64, "group": "pt", "schedule": b}]

    _train(stages({"warmup": 2, "lr": 1e-3}), lr=1e-3)  # lr unset and lr = the run's are one schedule
    with pytest.raises(ConfigError, match="share one schedule; differs from stages.0.") as e:
        _train(stages({"warmup": 3}))
    assert e.value.field == "stages[2].schedule.warmup"
