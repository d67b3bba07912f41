"""Sharded training state for ``parallel: fsdp``: Distributed Checkpoint folders that load on any world size.

A checkpoint ``checkpoints/step-XXXXXXXX/`` of an FSDP run holds:

- the plain HF folder (``config.json``, ``model.safetensors``, tokenizer
  files): the weights gathered whole onto rank 0, what evaluators and users
  load with ``from_pretrained``;
- ``meta.json`` and ``trainer_state.pt`` (rank 0): counters, schedule and data
  position, rank 0's RNG state, callback states, paused groups' positions -
  everything but the sharded tensors (``optimizer`` is None there);
- ``sharded/``: a ``torch.distributed.checkpoint`` (DCP) folder - ``.metadata``
  plus one ``__<rank>_0.distcp`` per rank - holding the model, the AdamW
  state and every paused group's AdamW state, keyed by parameter name with
  global shapes, so DCP reshards them onto whatever world size loads them;
  and ``manifest.json``: byte size and sha256 of every file there (each rank
  hashes the file it wrote), the world size and step that wrote it.

A resume checks every file against its recorded sha256 before DCP reads any
of them (:func:`verify_files`: the ranks share the hashing), then reads the
``.metadata`` pickle through an unpickler that builds only DCP's metadata
classes, and non-tensor entries with ``weights_only`` (:func:`load`): DCP's own
reader would unpickle both without restriction.

The whole step folder is atomic: all ranks write into one temp folder beside
it, and rank 0 renames it into place once every rank has finished
(:func:`collective_atomic_dir`; on a cluster the run folder must be on a
file system every node sees, as DCP itself requires).
"""

from __future__ import annotations

import contextlib
import copy
import enum
import io
import pathlib
import pickle
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch

from ..errors import DataError
from ..io import atomic_dir, quiet_unpickler, read_json, sha256_file, write_json
from ..layout import CKPT_SHARDED, CKPT_SHARDED_MANIFEST
from .parallel import _dist

SHARDED_DIR = CKPT_SHARDED
MANIFEST = CKPT_SHARDED_MANIFEST


@contextlib.contextmanager
def collective_atomic_dir(path: Path) -> Iterator[Path]:
    """``io.atomic_dir`` shared by all ranks: rank 0 makes the temp folder, every rank writes into it,
    and rank 0 renames it onto ``path`` after a barrier. Every rank must enter and leave it together."""
    dist = _dist()
    rank = dist.get_rank() if dist else 0
    with contextlib.ExitStack() as stack:
        box: list[Any] = [str(stack.enter_context(atomic_dir(path))) if rank == 0 else None]
        if dist:
            dist.broadcast_object_list(box, src=0)
        yield Path(box[0])
        if dist:
            dist.barrier()  # every rank's files are in place before rank 0 renames the folder


def save(folder: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
         group_optim: Mapping[str, dict], step: int) -> None:
    """Write the sharded state into ``folder`` (created; collective: every rank calls it)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": msd, "optimizer": osd}
    if group_optim:
        state["groups"] = dict(group_optim)
    dcp.save(state, checkpoint_id=str(folder))
    _write_manifest(folder, step)


def _write_manifest(folder: Path, step: int) -> None:
    dist = _dist()
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist else (0, 1)
    # each rank hashes the file it wrote, in parallel; rank 0 adds the metadata
    mine = {f.name: {"bytes": f.stat().st_size, "sha256": sha256_file(f)}
            for f in sorted(folder.glob(f"__{rank}_*.distcp"))}
    parts: list[Any] = [None] * world
    if dist:
        dist.all_gather_object(parts, mine)
    else:
        parts = [mine]
    if rank == 0:
        files: dict[str, dict] = {}
        for p in parts:
            files.update(p)
        meta = folder / ".metadata"
        files[meta.name] = {"bytes": meta.stat().st_size, "sha256": sha256_file(meta)}
        write_json(folder / MANIFEST, {"format": "torch.distributed.checkpoint", "torch": torch.__version__,
                                       "world_size": world, "step": step, "files": dict(sorted(files.items()))})


def check_intact(ckpt: Path) -> dict:
    """The manifest of ``ckpt``'s sharded state, after checking every file it lists is there with its size
    (cheap; :func:`verify_hashes` checks the contents)."""
    folder = Path(ckpt) / SHARDED_DIR
    man = _read_manifest(folder)
    check_sizes([(folder / n, i) for n, i in man["files"].items()])
    return man


def manifest_entries(ckpt: Path) -> list[tuple[Path, dict]]:
    """``(file, {"bytes", "sha256"})`` of every file ``ckpt``'s sharded manifest lists."""
    folder = Path(ckpt) / SHARDED_DIR
    return [(folder / n, i) for n, i in _read_manifest(folder)["files"].items()]


def _read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    if not path.is_file():
        raise DataError(f"{folder}: no {MANIFEST} (not a sharded checkpoint, or cut short while writing)")
    try:
        man = read_json(path)
        if not all(isinstance(i["bytes"], int) and isinstance(i["sha256"], str) for i in man["files"].values()):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise DataError(f"{path}: unreadable manifest (damaged checkpoint)") from None
    return man


def check_sizes(entries: list[tuple[Path, dict]]) -> None:
    """DataError naming the first of ``entries`` (``(file, {"bytes": ...})``) missing or of another size."""
    for f, info in entries:
        if not f.is_file() or f.stat().st_size != info["bytes"]:
            have = f.stat().st_size if f.is_file() else "missing"
            raise DataError(f"{f}: {have} bytes, {info['bytes']} when it was written (damaged checkpoint)")


def verify_files(entries: list[tuple[Path, dict]]) -> None:
    """Check ``entries`` (``(file, {"bytes", "sha256"})``) by size, then by sha256; DataError naming the
    first that differs, raised on every rank alike.

    Collective under ``torch.distributed``: rank r hashes every W-th file from the r-th, so each file is
    read once per resume whatever the world size, and the ranks agree on the verdict.
    """
    check_sizes(entries)
    dist = _dist()
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist else (0, 1)
    bad = next((i for i in range(rank, len(entries), world)
                if sha256_file(entries[i][0]) != entries[i][1]["sha256"]), None)
    verdicts: list[Any] = [bad]
    if dist:
        verdicts = [None] * world
        dist.all_gather_object(verdicts, bad)
    found = [i for i in verdicts if i is not None]
    if found:
        raise DataError(f"{entries[min(found)][0]}: sha256 differs from the one recorded when it was written "
                        "(damaged checkpoint)")


def verify_hashes(ckpt: Path) -> None:
    """Raise DataError naming the first file of ``ckpt``'s sharded state whose sha256 differs from the manifest."""
    verify_files(manifest_entries(ckpt))


# what a DCP .metadata pickle may build: DCP's metadata classes and the few torch/pathlib values they hold
_METADATA_MODULES = ("torch.distributed.checkpoint.metadata",)
_METADATA_NAMES = {("torch.distributed.checkpoint.filesystem", "_StorageInfo"), ("torch", "Size"),
                   ("torch.serialization", "_get_layout"), ("collections", "OrderedDict")}
# the path classes themselves, whatever module a Python names them by (pathlib up to 3.12, pathlib._local in 3.13)
_PATH_CLASSES = (pathlib.PosixPath, pathlib.PurePosixPath, pathlib.WindowsPath, pathlib.PureWindowsPath)


def _enum_member(cls: Any, name: Any) -> Any:
    """What ``builtins.getattr`` may do in DCP metadata: name a member of one of DCP's metadata enums (some
    Pythons, 3.11.2 among them, pickle an enum member as ``getattr(EnumClass, name)``). Nothing else."""
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum) and cls.__module__ in _METADATA_MODULES
            and isinstance(name, str) and name in cls.__members__):
        raise pickle.UnpicklingError(f"getattr({getattr(cls, '__qualname__', type(cls).__name__)}, {name!r}) "
                                     "is not part of torch's checkpoint metadata")
    return cls[name]


class _MetadataUnpickler(pickle.Unpickler):
    """Builds DCP metadata only: any other global in the pickle (a function to call, a class to make) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("builtins", "getattr"):
            return _enum_member
        obj = super().find_class(module, name) if module.startswith(("torch", "pathlib", "collections")) else None
        # a class defined there, not one it imports (Enum, typing's): calling those could build anything
        allowed = (module, name) in _METADATA_NAMES or (module == "torch" and isinstance(obj, torch.dtype)) or \
            (module in _METADATA_MODULES and isinstance(obj, type) and obj.__module__ == module) or \
            (module.startswith("pathlib") and any(obj is c for c in _PATH_CLASSES))
        if not allowed:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of torch's checkpoint metadata")
        return obj


def read_metadata(path: Path) -> Any:
    """A DCP ``.metadata`` file, unpickled with :class:`_MetadataUnpickler`; DataError naming it when it
    holds anything else (or is damaged)."""
    from torch.distributed.checkpoint.metadata import Metadata

    try:
        with open(path, "rb") as fh:
            md = _MetadataUnpickler(fh).load()
    except Exception as e:  # UnpicklingError (refused or damaged), EOFError, ValueError, ...
        why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise DataError(f"{path}: unreadable checkpoint metadata ({why})") from None
    if not isinstance(md, Metadata):
        raise DataError(f"{path}: unreadable checkpoint metadata (not torch distributed checkpoint metadata)")
    return md


def _safe_reader(folder: Path) -> Any:
    """DCP's file reader, with the metadata read by :func:`read_metadata` instead of plain ``pickle``."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class Reader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            rank = kwargs.get("rank")
            md = read_metadata(Path(self._get_metadata_path(rank)))
            if getattr(md, "storage_meta", None) is None:
                md.storage_meta = StorageMeta()
            md.storage_meta.load_id = self.load_id
            return md

    return Reader(str(folder))


def _safe_planner(folder: Path) -> Any:
    """DCP's load planner, with non-tensor entries (AdamW's hyper-parameters, ...) read by
    ``torch.load(weights_only=True)``: DCP's own planner unpickles them without restriction."""
    from torch.distributed.checkpoint import DefaultLoadPlanner
    from torch.distributed.checkpoint.planner import ReadItem

    class Planner(DefaultLoadPlanner):
        def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
            try:
                with quiet_unpickler():
                    obj = torch.load(value, weights_only=True)
            except pickle.UnpicklingError:
                raise DataError(f"{folder}: entry {read_item.dest_index.fqn} holds objects other than tensors "
                                "and plain data (refused, since unpickling them could run code)") from None
            value = io.BytesIO()
            torch.save(obj, value)  # plain data now: the parent's unrestricted load of it puts it in its place
            value.seek(0)
            super().load_bytes(read_item, value)

    return Planner()


def load(ckpt: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
         group_names: list[str]) -> dict[str, dict]:
    """Load the model and optimizer from ``ckpt``'s sharded state, resharded onto this world size
    (collective); returns the paused groups' optimizer states by group name. A file DCP cannot read,
    or an entry it would have to unpickle beyond plain data, is a DataError on every rank (the model's
    tensors may then hold part of it: load another checkpoint over them)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    check_intact(ckpt)
    # templates with the live structure and shardings (a fresh optimizer gets zero moments first)
    msd, osd = get_state_dict(model, optimizer)
    groups = {g: copy.deepcopy(osd) for g in group_names}
    state: dict[str, Any] = {"model": msd, "optimizer": osd}
    if groups:
        state["groups"] = groups
    folder = Path(ckpt) / SHARDED_DIR
    try:
        dcp.load(state, storage_reader=_safe_reader(folder), planner=_safe_planner(folder))
    except CheckpointException as e:  # what DCP raises on every rank when one failed (a BaseException)
        exc = e.failures[min(e.failures)][0]
        if isinstance(exc, DataError):
            raise exc from None
        if isinstance(exc, pickle.UnpicklingError):  # a tensor entry's torch.load(weights_only=True) refused it;
            # torch's message goes on to suggest weights_only=False, the very thing not to do here
            raise DataError(f"{folder}: a tensor entry holds objects other than tensors and plain data "
                            "(refused, since unpickling them could run code)") from None
        raise DataError(f"{folder}: unreadable sharded state ({type(exc).__name__}: "
                        f"{(str(exc).splitlines() or [''])[0][:200]})") from None
    set_state_dict(model, optimizer, model_state_dict=msd, optim_state_dict=osd)
    return groups
