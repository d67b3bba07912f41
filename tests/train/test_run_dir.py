"""The run-folder fingerprint (train/run_dir.py): a folder written in an older config spelling resumes."""

import pytest
import yaml

from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.train.configs import TrainConfig
from preschool.train.run_dir import check_run_dir, run_config_tree

STAGES = [{"name": "pt", "data": "text", "tokens": 640, "schedule": {"name": "wsd", "warmup": 0.05, "lr": 3e-4}},
          {"name": "ft", "data": "text", "tokens": 64, "schedule": "constant"}]


def _old_spelling(stage: dict) -> dict:
    """A stage as config.yaml recorded it before the schedule keys moved into `schedule:` (flat)."""
    flat = {k: v for k, v in stage.items() if k != "schedule"}
    sched = dict(stage["schedule"])
    return {**flat, "schedule": sched.pop("name"), **sched}


@pytest.fixture
def old_run(tmp_path):
    """(run folder written with the flat stage keys, its datasets) for the config of STAGES."""
    (tmp_path / "text").mkdir()
    datasets = {"text": tmp_path / "text"}
    tree = run_config_tree(from_dict(TrainConfig, {"stages": STAGES}), datasets, None)
    tree["train"]["stages"] = [_old_spelling(st) for st in tree["train"]["stages"]]
    assert tree["train"]["stages"][0]["warmup"] == 0.05 and tree["train"]["stages"][1]["schedule"] == "constant"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(tree))
    return tmp_path / "run", datasets


def test_a_run_written_with_flat_stage_schedule_keys_is_the_same_config(old_run):
    run, datasets = old_run
    check_run_dir(from_dict(TrainConfig, {"stages": STAGES}), run, datasets)  # no error: it may resume


def test_a_real_schedule_change_is_still_refused_naming_the_nested_field(old_run):
    run, datasets = old_run
    changed = [{**STAGES[0], "schedule": {**STAGES[0]["schedule"], "warmup": 0.1}}, STAGES[1]]
    with pytest.raises(ConfigError, match="was 0.05, now 0.1") as e:
        check_run_dir(from_dict(TrainConfig, {"stages": changed}), run, datasets)
    assert e.value.field == "train.stages[0].schedule.warmup"


def _drop_nested_fields(run):
    """Rewrite the run's config.yaml as code that had no stage ``embeddings_at_start``/``pt_sources`` and no
    model ``init_std`` would have written it (fields added later, at their defaults)."""
    tree = yaml.safe_load((run / "config.yaml").read_text())
    for st in tree["train"]["stages"]:
        del st["embeddings_at_start"], st["pt_sources"]
    del tree["train"]["model"]["init_std"], tree["train"]["batch_size"]
    (run / "config.yaml").write_text(yaml.safe_dump(tree))


def test_nested_fields_added_later_at_their_defaults_are_the_same_run(old_run):
    run, datasets = old_run
    _drop_nested_fields(run)
    check_run_dir(from_dict(TrainConfig, {"stages": STAGES}), run, datasets)  # no error: it may resume


@pytest.mark.parametrize("change, field_", [
    ({"stages": [{**STAGES[0], "embeddings_at_start": "reinit"}, STAGES[1]]}, "train.stages[0].embeddings_at_start"),
    ({"stages": STAGES, "model": {"init_std": 0.01}}, "train.model.init_std"),
    ({"stages": STAGES, "batch_size": 8}, "train.batch_size"),
])
def test_a_field_the_run_never_had_set_off_its_default_is_refused(old_run, change, field_):
    run, datasets = old_run
    _drop_nested_fields(run)
    with pytest.raises(ConfigError, match="differs from the run") as e:
        check_run_dir(from_dict(TrainConfig, change), run, datasets)
    assert e.value.field == field_
