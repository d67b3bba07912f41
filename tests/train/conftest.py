"""Fixtures for trainer tests: tiny learnable shard datasets (train/ + val/) written to tmp folders."""

from pathlib import Path

import numpy as np
import pytest

from preschool.data.shards import ShardWriter


def _write_dataset(root: Path, name: str, rows: int = 64, seq_len: int = 16, vocab: int = 64, offset: int = 0,
                  stride: int = 1, mask: bool = False, segments: bool = False, seed: int = 0) -> Path:
    """A dataset folder with train/ and val/: rows are arithmetic progressions mod ``vocab`` (learnable)."""
    folder = root / name
    rng = np.random.default_rng(seed)
    arrays = (["loss_mask"] if mask else []) + (["segments"] if segments else [])
    for split, n in (("train", rows), ("val", max(8, rows // 4))):
        with ShardWriter(folder / split, seq_len + 1, vocab, arrays=arrays) as w:
            for _ in range(n):
                start = int(rng.integers(vocab))
                row = (start + stride * np.arange(seq_len + 1)) % (vocab - offset) + offset
                extra = {}
                if mask:
                    extra["loss_mask"] = (np.arange(seq_len + 1) >= (seq_len + 1) // 2).astype(np.uint8)
                if segments:
                    extra["segments"] = (np.arange(seq_len + 1) >= (seq_len + 1) // 2).astype(np.uint16)
                w.add_rows(row, **extra)
    return folder


@pytest.fixture
def datasets(tmp_path):
    return {
        "text": _write_dataset(tmp_path / "data", "text", stride=1, seed=1),
        "synth": _write_dataset(tmp_path / "data", "synth", stride=3, seed=2, mask=True, segments=True),
    }


def _micro_cfg(**kw):
    base = dict(model={"preset": "micro", "overrides": {"hidden_size": 32, "intermediate_size": 64}},
                batch_size=4, lr=3e-3, log_every=1, eval_every=4, checkpoint_every=4, progress=False, val_rows=8,
                stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 8}])
    base.update(kw)
    return base


@pytest.fixture(scope="session")
def micro_cfg():
    """Factory: a dict TrainConfig for the micro model (batch 4, seq 16), overridable by keyword."""
    return _micro_cfg


@pytest.fixture
def write_dataset():
    """Factory: write a learnable dataset folder (train/ + val/), see ``_write_dataset``."""
    return _write_dataset


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(*args, nproc: int = 2, timeout: int = 900):
    """``python -m torch.distributed.run --nproc_per_node nproc *args`` (a script and its arguments, or
    ``-m module ...``) on CPU, one thread per process. On a timeout the whole process group is killed,
    workers included, before the error is raised."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                             "--master_port", str(_free_port()), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="session")
def torchrun():
    """Factory: ``torchrun(script_path, *args, nproc=2)`` -> CompletedProcess (gloo ranks on CPU)."""
    return _torchrun


@pytest.fixture(scope="module")
def module_datasets(tmp_path_factory):
    """The ``datasets`` pair, written once per test module (for module-scoped multi-run fixtures)."""
    root = tmp_path_factory.mktemp("data")
    return {"text": _write_dataset(root, "text", stride=1, seed=1),
            "synth": _write_dataset(root, "synth", stride=3, seed=2, mask=True, segments=True)}


class RoundingTolerance:
    """How far two fp32 runs of the same rows and learning rates may part when only the order of their
    float sums differs: FSDP, DDP and one process (gradients reduce-scattered per micro-batch, all-reduced
    per step, or summed in one process; the gradient norm summed per shard, then over ranks), another world
    size, or the fused loss beside the plain one. benchmarks/parallel_spread.py measures it.

    Most steps agree to an fp32 epsilon or two of the loss. But AdamW divides each update by the
    gradient's RMS, so an element whose gradient is a cancellation (mathematically zero or nearly so:
    the key projection's bias gets none, softmax ignoring a shift every key shares) takes a step of up
    to the learning rate in a direction rounding chose, and the runs then part by a jump the summed
    learning rate bounds: such an element's weight moves by at most about lr per update, and the loss
    by a share of that. So the bounds are

    - loss of a step, relative: ``FORWARD_EPS`` fp32 epsilons (the forward's own sums, the whole
      difference at step 1, when the weights are still equal) plus ``LOSS_PER_LR`` x the learning rate
      summed over the updates before it;
    - final weights, absolute: ``WEIGHT_PER_LR`` x the run's summed learning rate.

    Measured (benchmarks/parallel_spread.py: 8 seeds x the three slow-run configurations of
    test_fsdp.py, 2-rank FSDP vs 2-rank DDP vs one process, on an AMD EPYC family 26 with AVX-512):
    at step 1 at most 0.86 eps (1.0e-7); later at most 3.8e-4 of the loss per unit of summed learning
    rate (InfoNCE at lr 1e-2, seed 0: 3.55899 vs 3.55911 at step 10, the figures issue 40 saw on a
    Zen 4; the three-stage run at lr 3e-3 never parts by more than 1.5e-7 of its loss); the weights
    at most 0.018 per unit of summed learning rate (the old fixed 2e-5 held for seed 0 only: 5.8e-5
    at another). The bounds are 4x (step 1) and about 10x (later steps, weights) those, since other
    CPUs round other sums. They still catch what these comparisons are for: a 1 % larger learning
    rate moves the three-stage run's loss by 2.5e-4 to 4.3e-4 of itself at steps 2 to 4, 20x the
    bound there.
    """

    EPS = 2.0 ** -23  # fp32 machine epsilon
    FORWARD_EPS = 4
    LOSS_PER_LR = 4e-3
    WEIGHT_PER_LR = 0.2

    def loss_rtol(self, lr_before: float) -> float:
        """Relative tolerance of the loss of a step after updates whose learning rates sum to ``lr_before``."""
        return self.FORWARD_EPS * self.EPS + self.LOSS_PER_LR * lr_before

    def weight_atol(self, lr_sum: float) -> float:
        """Absolute tolerance of the weights after updates whose learning rates sum to ``lr_sum``."""
        return self.WEIGHT_PER_LR * lr_sum

    def assert_same_losses(self, rows: list[dict], ref: list[dict]) -> None:
        """Two runs' train rows (one per step: ``log_every: 1``) agree step by step within :meth:`loss_rtol`."""
        assert [r["step"] for r in ref] == list(range(1, len(ref) + 1)), "needs one train row per step"
        lr_before = 0.0
        for x, y in zip(rows, ref, strict=True):
            assert x["loss"] == pytest.approx(y["loss"], rel=self.loss_rtol(lr_before), abs=0), x["step"]
            lr_before += y["lr"]

    def assert_same_weights(self, weights: dict, ref: dict, ref_rows: list[dict]) -> None:
        """Two state dicts agree within :meth:`weight_atol` of the learning rates of ``ref_rows`` (one per step)."""
        import torch

        atol = self.weight_atol(sum(r["lr"] for r in ref_rows))
        assert sorted(weights) == sorted(ref)
        for k in ref:
            torch.testing.assert_close(weights[k], ref[k], atol=atol, rtol=0, msg=k)


@pytest.fixture(scope="session")
def rounding():
    """The :class:`RoundingTolerance` of runs that differ only in the order of their float sums."""
    return RoundingTolerance()
