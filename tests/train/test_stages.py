import json

import numpy as np
import pytest

from preschool.config import from_dict
from preschool.errors import ConfigError, DataError
from preschool.train.configs import TrainConfig
from preschool.train.stages import StagePlan, model_vocab_size


def plan_of(micro_cfg, datasets, stages, vocab=64, **kw):
    return StagePlan(from_dict(TrainConfig, micro_cfg(stages=stages, **kw)), datasets, vocab)


def test_group_stages_share_a_schedule_and_continue_the_first_stage_stream(datasets, micro_cfg):
    # batch 4 x seq 16 = 64 tokens a step
    plan = plan_of(micro_cfg, datasets, [
        {"name": "pt1", "data": "text", "tokens": 64 * 3, "group": "pt"},
        {"name": "syn", "data": "synth", "tokens": 64 * 2 - 1, "counts_as_pt": False},
        {"name": "pt2", "data": "text", "tokens": 64 * 4, "group": "pt"},
        {"name": "pt3", "data": {"text": 1, "synth": 1}, "tokens": 64, "group": "pt"}])
    assert plan.steps == [3, 2, 4, 1] and plan.total_steps == 10  # a started step counts whole
    assert plan.group_steps == {"pt": 8}
    assert [plan.schedule_steps(i) for i in range(4)] == [8, 2, 8, 8]
    assert [plan.group_resumes_later(i) for i in range(4)] == [True, False, True, False]
    # pt2 reads pt1's data: it continues pt1's sample order; pt3 (other data) draws its own
    assert plan.continues_stream == [False, False, True, False]
    idx = np.arange(3 * 4, 5 * 4)
    assert all((plan.mixtures[2].load(idx)[k] == plan.mixtures[0].load(idx)[k]).all() for k in ("input_ids", "labels"))
    assert plan.source_tokens(3, 1) == {"text": 32, "synth": 32}
    assert [plan.step_pt_tokens(i, 0) for i in range(4)] == [64, 0, 64, 64]  # no generator wrote either: both count
    assert plan.stream_base == [0, 0, 3, 0]
    assert plan.token_account(2, 1) == {"tokens_by_stage": {"pt1": 192, "syn": 128, "pt2": 64},
                                        "tokens_by_source": {"text": 256, "synth": 128}}


def test_building_the_plan_checks_names_and_vocab_before_training(datasets, micro_cfg):
    with pytest.raises(ConfigError, match=r"stages\[1\]\.data: unknown dataset 'nope' \(known: synth, text\)"):
        plan_of(micro_cfg, datasets, [{"name": "a", "data": "text", "tokens": 64},
                                      {"name": "b", "data": {"text": 1, "nope": 1}, "tokens": 64}])
    with pytest.raises(DataError, match="stage 'a': shards use vocab_size 64 > model vocab 32"):
        plan_of(micro_cfg, datasets, [{"name": "a", "data": "text", "tokens": 64}], vocab=32)


def test_model_vocab_is_the_largest_manifest(tmp_path, datasets, write_dataset):
    bigger = write_dataset(tmp_path / "data", "bigger", vocab=80)
    assert model_vocab_size(datasets, None) == 64
    assert model_vocab_size({**datasets, "bigger": bigger}, None) == 80
    assert json.loads((bigger / "train" / "manifest.json").read_text())["vocab_size"] == 80
    with pytest.raises(DataError, match="no tokenizer given and no dataset manifest"):
        model_vocab_size({"empty": tmp_path / "nothing"}, None)
