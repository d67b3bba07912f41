import pytest
import torch

from preschool.errors import DataError
from preschool.train.checkpoint import (STATE_FILE, STATE_KEYS, quiet_hf_progress, read_checkpoint,
                                        record_checksums, resumable_checkpoints)
from preschool.train.trainer import train


def test_checkpoints_with_a_trainer_state_newest_first_and_what_they_hold(tmp_path, datasets, micro_cfg):
    run = tmp_path / "r"
    train(micro_cfg(checkpoint_every=2, keep_optimizer_state=2, eval_every=0), run, datasets)  # 8 steps
    ck = run / "checkpoints"
    assert resumable_checkpoints(run) == [ck / "step-00000008", ck / "step-00000006"]  # older ones pruned
    assert resumable_checkpoints(run, upto=7) == [ck / "step-00000006"]
    weights, st = read_checkpoint(ck / "step-00000006")
    assert set(STATE_KEYS) <= set(st) and st["step"] == 6 and st["stage_step"] == 6
    assert "model.embed_tokens.weight" in weights
    (ck / "step-00000006" / STATE_FILE).unlink()
    assert resumable_checkpoints(run, upto=7) == []


def test_a_state_file_that_is_not_a_trainer_state_is_refused(tmp_path, datasets, micro_cfg):
    run = tmp_path / "r"
    train(micro_cfg(checkpoint_every=4, eval_every=0), run, datasets)
    state = run / "checkpoints" / "step-00000008" / STATE_FILE
    st = torch.load(state, weights_only=True)
    del st["rng"]
    torch.save(st, state)
    record_checksums(state.parent)  # edited on purpose, not damaged: the checksums agree
    with pytest.raises(DataError, match=f"{state}: unreadable trainer state \\(not a preschool trainer state\\)"):
        read_checkpoint(state.parent)


@pytest.mark.parametrize("enabled", [True, False])
def test_quiet_hf_progress_restores_the_callers_setting(enabled):
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    try:
        (hf_logging.enable_progress_bar if enabled else hf_logging.disable_progress_bar)()
        with quiet_hf_progress():
            assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.is_progress_bar_enabled() == enabled
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()
