import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PRESCHOOL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real reference data (BLiMP, novels, verbatim lists), read by path; skip when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def stop_at():
    """``stop_at(n)``: a callback that ends training after step ``n``, as a killed run would end there
    (its checkpoints and metrics are what a resume starts from)."""
    from preschool.train.callbacks.base import Callback

    class StopAt(Callback):
        def __init__(self, step):
            self.at = step

        def on_step_end(self, trainer):
            if trainer.step == self.at:
                trainer.should_stop = True

    return StopAt


@pytest.fixture
def die_at_unit(monkeypatch):
    """``die_at_unit(JobClass, k)``: ``JobClass.run`` raises KeyboardInterrupt when it starts unit ``k``, as a
    prepare killed while building that unit; returns a function that puts the real ``run`` back."""

    def arm(job_cls, k):
        real = job_cls.run

        def run(self, i, payload, out):
            if i == k:
                raise KeyboardInterrupt
            return real(self, i, payload, out)

        monkeypatch.setattr(job_cls, "run", run)
        return lambda: monkeypatch.setattr(job_cls, "run", real)

    return arm


@pytest.fixture
def file_reads(monkeypatch):
    """What the corpus file sources read from now on: ``.opened``, the paths of the files they open (Parquet
    included), and ``.starts``, ``(path, byte offset)`` where each line-by-line read of a file began."""
    import types

    import pyarrow.parquet as pq

    from preschool.corpora.sources import FileSource

    seen = types.SimpleNamespace(opened=[], starts=[])
    real_open, real_pf, real_lines = FileSource.open_binary, pq.ParquetFile, FileSource.raw_lines

    def open_binary(path):
        seen.opened.append(Path(path))
        return real_open(path)

    def parquet_file(path, *a, **kw):
        seen.opened.append(Path(path))
        return real_pf(path, *a, **kw)

    def raw_lines(self, path, offset=0, lineno=1):
        seen.starts.append((Path(path), offset))
        return real_lines(self, path, offset, lineno)

    monkeypatch.setattr(FileSource, "open_binary", staticmethod(open_binary))
    monkeypatch.setattr(pq, "ParquetFile", parquet_file)
    monkeypatch.setattr(FileSource, "raw_lines", raw_lines)
    return seen
