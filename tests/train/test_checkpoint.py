import pytest
import torch

from preschool.errors import DataError
from preschool.train.checkpoint import (STATE_FILE, STATE_KEYS, quiet_hf_progress, read_checkpoint,
                                        record_checksums, resumable_checkpoints)
from preschool.train.trainer import cuda_rng_state, restore_cuda_rng, train


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


def _cuda_rng_untouchable(monkeypatch):
    """A machine whose CUDA is available as far as torch says, whose CUDA RNG a CPU run must not touch (asking
    for it initializes CUDA: a context on the GPU for a run that does not use it)."""
    def touched(*a, **k):
        raise AssertionError("a CPU run touched the CUDA RNG")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for name in ("get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all"):
        monkeypatch.setattr(torch.cuda, name, touched)


def test_a_cpu_run_on_a_gpu_machine_keeps_no_cuda_rng_and_resumes_past_one(tmp_path, datasets, micro_cfg, stop_at,
                                                                           monkeypatch):
    """A CPU run's checkpoint holds no CUDA RNG state, and it resumes from a trainer state that holds every GPU's
    (what a CUDA run's rank 0 wrote before) without touching CUDA."""
    _cuda_rng_untouchable(monkeypatch)
    run = tmp_path / "r"
    cfg = micro_cfg(device="cpu", eval_every=0)
    train(cfg, run, datasets, callbacks=[stop_at(4)])
    state = run / "checkpoints" / "step-00000004" / STATE_FILE
    st = torch.load(state, weights_only=True)
    assert st["rng"]["cuda"] is None
    st["rng"]["cuda"] = [torch.zeros(16, dtype=torch.uint8) for _ in range(8)]
    torch.save(st, state)
    record_checksums(state.parent)
    assert train(cfg, run, datasets)["resumed_from"]


def test_a_cuda_run_keeps_its_own_gpus_rng_and_resumes_on_fewer_gpus(monkeypatch):
    """A CUDA run keeps the RNG state of the GPU it trains on (not every visible GPU's: on an 8-GPU node every
    rank read all eight) and restores it onto the GPU it resumes on, so a resume with fewer GPUs visible (DCP
    reshards onto another world size) does not index a GPU that is not there. A state written before, one per
    visible GPU, restores its first (rank 0's GPU)."""
    got, put = [], []
    monkeypatch.setattr(torch.cuda, "get_rng_state",
                        lambda device="cuda": got.append(device) or torch.full((16,), 7, dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device="cuda": put.append((state.clone(), device)))
    for name in ("get_rng_state_all", "set_rng_state_all"):
        monkeypatch.setattr(torch.cuda, name, lambda *a, **k: pytest.fail(f"torch.cuda.{name} reads every GPU"))
    gpu3, gpu0 = torch.device("cuda", 3), torch.device("cuda", 0)
    saved = cuda_rng_state(gpu3)
    assert got == [gpu3] and torch.equal(saved, torch.full((16,), 7, dtype=torch.uint8))
    restore_cuda_rng(saved, gpu0)
    assert len(put) == 1 and put[0][1] == gpu0 and torch.equal(put[0][0], saved)
    restore_cuda_rng([torch.full((16,), k, dtype=torch.uint8) for k in range(8)], gpu0)
    assert len(put) == 2 and put[1][1] == gpu0 and torch.equal(put[1][0], torch.zeros(16, dtype=torch.uint8))
    restore_cuda_rng(None, gpu0)  # a CPU run's checkpoint resumed on a GPU: the run's seed stands
    restore_cuda_rng(saved, torch.device("cpu"))
    assert cuda_rng_state(torch.device("cpu")) is None and len(put) == 2 and len(got) == 1
