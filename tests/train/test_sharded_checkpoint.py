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


def _as_getattr(member) -> bytes:
    """The pickle CPython 3.11.2 writes for an enum member: ``getattr(EnumClass, name)``."""
    cls = type(member)
    return (b"\x80\x04cbuiltins\ngetattr\n" + f"c{cls.__module__}\n{cls.__qualname__}\n".encode()
            + pickle.dumps(member.name, protocol=4)[2:-1] + b"\x86R.")


def test_metadata_written_by_a_python_that_pickles_enum_members_by_getattr_reads(tmp_path):
    """Python 3.11.2 (Debian 12's python3.11) pickles DCP's memory-format enum as ``getattr(cls, name)``: that
    metadata reads (on 3.11.2 every FSDP checkpoint was refused as unreadable), and getattr reaches nothing
    but a member of DCP's own metadata enums."""
    import io

    from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING

    from preschool.errors import DataError
    from preschool.train.sharded_checkpoint import _MetadataUnpickler, read_metadata

    member = _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT
    assert _MetadataUnpickler(io.BytesIO(_as_getattr(member))).load() is member
    init_of_a_path = b"\x80\x04cbuiltins\ngetattr\ncpathlib\nPosixPath\nX\x08\x00\x00\x00__init__\x86R."
    class_of_the_enum = (b"\x80\x04cbuiltins\ngetattr\nctorch.distributed.checkpoint.metadata\n_MEM_FORMAT_ENCODING\n"
                         b"X\t\x00\x00\x00__class__\x86R.")
    for evil in (init_of_a_path, class_of_the_enum):
        with pytest.raises(pickle.UnpicklingError, match="is not part of torch's checkpoint metadata"):
            _MetadataUnpickler(io.BytesIO(evil)).load()
    path = tmp_path / ".metadata"
    path.write_bytes(init_of_a_path)
    with pytest.raises(DataError, match=r"getattr\(PosixPath, '__init__'\) is not part"):
        read_metadata(path)
