"""train/sharded_checkpoint.py's metadata reader: DCP's ``.metadata`` pickle unpickled with an allow-list."""

import pathlib
import pickle
import sys

import pytest


def _metadata(folder: pathlib.Path) -> pathlib.Path:
    """A DCP metadata pickle holding a path, as ``torch.distributed.checkpoint.save`` writes one."""
    from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

    path = folder / ".metadata"
    md = Metadata(state_dict_metadata={}, storage_meta=StorageMeta(checkpoint_id=folder))
    path.write_bytes(pickle.dumps(md))
    return path


def test_metadata_with_a_path_reads_where_pathlib_keeps_its_classes_in_a_submodule(tmp_path, monkeypatch):
    """Python 3.13 moved pathlib's classes to ``pathlib._local``, so the pickle names
    ``pathlib._local.PosixPath``: the allow-list holds the classes, not the names one Python gives them (on
    3.13 every FSDP checkpoint was refused as unreadable, and no run could resume)."""
    from preschool.train.sharded_checkpoint import read_metadata

    assert read_metadata(_metadata(tmp_path)).storage_meta.checkpoint_id == tmp_path
    # this Python laid out as 3.13's: the same classes, pickled under the submodule's name
    monkeypatch.setitem(sys.modules, "pathlib._local", pathlib)
    for cls in (pathlib.PurePath, pathlib.PurePosixPath, pathlib.Path, pathlib.PosixPath):
        monkeypatch.setattr(cls, "__module__", "pathlib._local")
    (tmp_path / "b").mkdir()
    path = _metadata(tmp_path / "b")
    assert b"pathlib._local" in path.read_bytes()
    assert read_metadata(path).storage_meta.checkpoint_id == tmp_path / "b"


def test_metadata_naming_anything_else_in_pathlib_is_refused(tmp_path):
    from preschool.errors import DataError
    from preschool.train.sharded_checkpoint import read_metadata

    path = tmp_path / ".metadata"
    # a pathlib name DCP never writes (Path, whose call makes whatever class this system's paths have)
    path.write_bytes(b"\x80\x02cpathlib\nPath\n.")
    with pytest.raises(DataError, match=r"pathlib\.Path is not part of torch's checkpoint metadata"):
        read_metadata(path)
