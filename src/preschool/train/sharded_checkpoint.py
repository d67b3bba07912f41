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

The whole step folder is atomic: all ranks write into one temp folder beside
it, and rank 0 renames it into place once every rank has finished
(:func:`collective_atomic_dir`; on a cluster the run folder must be on a
file system every node sees, as DCP itself requires).
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch

from ..errors import DataError
from ..io import atomic_dir, read_json, sha256_file, write_json
from .parallel import _dist

SHARDED_DIR = "sharded"
MANIFEST = "manifest.json"


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
    """The manifest of ``ckpt``'s sharded state, after checking every file it lists is there with its size.

    Sizes, not hashes: a resume on N ranks would otherwise read every shard N
    times; ``verify_hashes`` does the full check.
    """
    folder = Path(ckpt) / SHARDED_DIR
    path = folder / MANIFEST
    if not path.is_file():
        raise DataError(f"{folder}: no {MANIFEST} (not a sharded checkpoint, or cut short while writing)")
    man = read_json(path)
    for name, info in man["files"].items():
        f = folder / name
        if not f.is_file() or f.stat().st_size != info["bytes"]:
            have = f.stat().st_size if f.is_file() else "missing"
            raise DataError(f"{f}: {have} bytes, manifest says {info['bytes']} (damaged checkpoint)")
    return man


def verify_hashes(ckpt: Path) -> None:
    """Raise DataError naming the first file of ``ckpt``'s sharded state whose sha256 differs from the manifest."""
    man = check_intact(ckpt)
    folder = Path(ckpt) / SHARDED_DIR
    for name, info in man["files"].items():
        if sha256_file(folder / name) != info["sha256"]:
            raise DataError(f"{folder / name}: sha256 differs from {MANIFEST} (damaged checkpoint)")


def load(ckpt: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
         group_names: list[str]) -> dict[str, dict]:
    """Load the model and optimizer from ``ckpt``'s sharded state, resharded onto this world size
    (collective); returns the paused groups' optimizer states by group name."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    check_intact(ckpt)
    # templates with the live structure and shardings (a fresh optimizer gets zero moments first)
    msd, osd = get_state_dict(model, optimizer)
    groups = {g: copy.deepcopy(osd) for g in group_names}
    state: dict[str, Any] = {"model": msd, "optimizer": osd}
    if groups:
        state["groups"] = groups
    dcp.load(state, checkpoint_id=str(Path(ckpt) / SHARDED_DIR))
    set_state_dict(model, optimizer, model_state_dict=msd, optim_state_dict=osd)
    return groups
