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
