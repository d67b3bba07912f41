"""A run's checkpoint folders: write one, resume from the newest intact one, prune old training state.

``checkpoints/step-XXXXXXXX/`` (layout in docs/interfaces.md) holds the HF model
(``save_pretrained``, safetensors), the tokenizer files, ``meta.json`` (the
position and the token account) and ``trainer_state.pt``
(:meth:`Trainer.state_dict <preschool.train.trainer.Trainer.state_dict>`:
optimizer, schedule and data position, RNG, callback states). Under
``parallel: fsdp`` the model and optimizer states are also written sharded,
by every rank, into ``sharded/`` (:mod:`.sharded_checkpoint`), which is what a
resume loads them from. The folder appears atomically, whole or not at all.

``checksums.json`` records the byte size and sha256 of every file of the
folder (``sharded/``'s files through ``sharded/manifest.json``, whose own
hash it records). A resume checks them all before anything is deserialised
(:func:`verify_checkpoint`) and falls back to the previous checkpoint, naming
the file, when one differs or is not listed; checkpoints written before ``checksums.json``
existed are loaded unverified, with a warning (the sharded state of an FSDP one
still is: its manifest always had hashes). Nothing is unpickled beyond tensors
and plain data: ``trainer_state.pt`` with ``weights_only=True``, the DCP
``.metadata`` through an unpickler of DCP's metadata classes only. Matching
checksums prove only that nobody changed a file since its hashes were recorded,
so the trainer state must also have the shape the trainer writes and its
folder's step (:func:`check_state`); one that does not is passed over too.

Only the newest ``keep_optimizer_state`` checkpoints keep their training state
(``trainer_state.pt`` and ``sharded/``); older ones stay loadable HF folders, but for the branch points
a run is told to keep (``Trainer(keep_state_at=...)``: other runs continue from them, train/branch.py).
A checkpoint write cut short leaves its hidden temp folder (``.step-XXXXXXXX.*.tmp``,
holding ``io.atomic_dir``'s record of its writer); the next run in the same folder
deletes those whose writer is gone (:func:`remove_interrupted_writes`), and nothing else.
The trainer's own fields are read and written through its public API
(``state_dict``/``load_state_dict``, ``model``, ``optimizer``, ``groups``, ...).
"""

from __future__ import annotations

import contextlib
import pickle
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..errors import DataError
from ..io import PARTIAL_MARK, quiet_unpickler, read_json, remove_dead_temps, sha256_file, torch_save, write_json
from ..layout import (CKPT_CHECKSUMS, CKPT_META, CKPT_STATE, CKPT_WEIGHTS, checkpoint_dir, checkpoint_temp_dirs,
                      checkpoints_dir, list_checkpoints, step_of)
from . import sharded_checkpoint

if TYPE_CHECKING:  # pragma: no cover
    from .protocol import CheckpointedTrainer

STATE_FILE = CKPT_STATE
CHECKSUMS = CKPT_CHECKSUMS
# what every trainer_state.pt holds (Trainer.state_dict); a file without one of them is not a trainer state
STATE_KEYS = ("step", "stage_index", "stage_step", "tokens", "pt_tokens", "sched_base", "data_base",
              "optimizer", "groups", "acc", "rng")


@contextlib.contextmanager
def quiet_hf_progress():
    """No HF "Writing model shards" bars mid-run; restores the caller's setting."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def quiet_hf_logging():
    """HF's warnings silenced (errors still shown) inside the block; restores the caller's level."""
    import logging

    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def save_checkpoint(trainer: CheckpointedTrainer) -> Path:
    """Write ``checkpoints/step-XXXXXXXX`` of the trainer's current step atomically; returns its path.

    Collective: every rank calls it (rank 0 writes the files, every rank its part of ``sharded/``).
    Afterwards the training state of checkpoints older than the newest ``keep_optimizer_state`` is deleted.
    """
    path = checkpoint_dir(trainer.out_dir, trainer.step)
    state = trainer.state_dict()  # every rank: its .item() is a no-op sync that keeps the ranks in step
    weights = trainer.parallel.full_state_dict(trainer.model)  # FSDP: a collective gathering onto rank 0
    with sharded_checkpoint.collective_atomic_dir(path) as tmp:
        if trainer.parallel.sharded:
            sharded_checkpoint.save(tmp / sharded_checkpoint.SHARDED_DIR, trainer.model, trainer.optimizer,
                                    {k: g["optim"] for k, g in trainer.groups.items()}, trainer.step)
        if trainer.is_main:
            with quiet_hf_progress():
                trainer.model.save_pretrained(tmp, safe_serialization=True, state_dict=weights)
            if trainer.tokenizer_dir is not None:
                for f in trainer.tokenizer_dir.iterdir():
                    if f.is_file():
                        shutil.copy2(f, tmp / f.name)
            write_json(tmp / CKPT_META, {"step": trainer.step, "stage": trainer.stage.name,
                                           "stage_index": trainer.stage_index, "tokens": trainer.tokens,
                                           "pt_tokens": trainer.pt_tokens, "stage_tokens": trainer.stage_tokens,
                                           **trainer.token_account()})
            torch_save(state, tmp / STATE_FILE)
            record_checksums(tmp)
    keep = trainer.cfg.keep_optimizer_state
    if trainer.is_main and keep != "all":
        # counted back from this one (a newer, damaged checkpoint skipped on resume is replaced later)
        for old in resumable_checkpoints(trainer.out_dir, upto=trainer.step)[1 if keep == "last" else keep:]:
            if step_of(old) in trainer.keep_state_at:  # a branch point: other runs continue from it (train/branch.py)
                continue
            # files first: cut short in between, the folder is no resume candidate (no trainer state) rather
            # than one whose checksums leave its state unlisted
            (old / STATE_FILE).unlink()
            shutil.rmtree(old / sharded_checkpoint.SHARDED_DIR, ignore_errors=True)
            _drop_checksums(old, [STATE_FILE, sharded_checkpoint.SHARDED_DIR])
    trainer.barrier()
    return path


def resume(trainer: CheckpointedTrainer, upto: int | None = None) -> Path | None:
    """Load the newest intact checkpoint of ``trainer.out_dir`` (up to step ``upto``) into the trainer;
    returns it (None: none yet).

    A damaged checkpoint is reported on stderr (path and reason) and the previous one tried; DataError
    when checkpoints exist but none is intact. The model and optimizer must already be built (and sharded).
    Collective: every rank calls it.
    """
    damaged = []
    for ckpt in resumable_checkpoints(trainer.out_dir, upto=upto):
        try:
            weights, st = read_checkpoint(ckpt, sharded=trainer.parallel.sharded)
            if trainer.parallel.sharded:  # weights and optimizer states from the DCP folder, resharded to this world
                optims = sharded_checkpoint.load(ckpt, trainer.model, trainer.optimizer, sorted(st["groups"]))
                for k, g in st["groups"].items():
                    g["optim"] = optims[k]
            else:
                tied = _ties(trainer.model, trainer.cfg.model.tie_embeddings)
                _load_weights(trainer.model, ckpt, weights, tied=tied)
            _load_state(trainer, st, ckpt / STATE_FILE)
        except DataError as e:  # the next one tried loads every tensor and counter again, over whatever this one left
            damaged.append(str(e))
            if trainer.is_main:
                print(f"[preschool] {e}; trying the previous checkpoint", file=sys.stderr, flush=True)
            continue
        # torch's load_state_dict moves the moments next to their parameters today; this keeps them off the
        # CPU whatever version loads them (the AdamW "step" counts stay where torch put them)
        for s in trainer.optimizer.state.values():
            for k, v in s.items():
                if isinstance(v, torch.Tensor) and k != "step":
                    s[k] = v.to(trainer.device)
        return ckpt
    if damaged:
        raise DataError(f"no intact checkpoint to resume from in {checkpoints_dir(trainer.out_dir)} "
                        f"({'; '.join(damaged)}); delete the damaged checkpoint folders to restart the run from step 0")
    return None


def _load_state(trainer: CheckpointedTrainer, st: dict, spath: Path) -> None:
    """``trainer.load_state_dict(st)``; DataError naming ``spath`` when the trainer cannot take it (a state
    of the right shape for another run: other parameter groups, a stage this run does not have)."""
    try:
        trainer.load_state_dict(st)
    except Exception as e:
        raise DataError(f"{spath}: trainer state does not fit this run ({type(e).__name__}: "
                        f"{(str(e).splitlines() or [''])[0][:200]})") from None


def resumable_checkpoints(out_dir: Path, upto: int | None = None) -> list[Path]:
    """Checkpoints of the run in ``out_dir`` (up to step ``upto``) that hold a trainer state, newest first."""
    return [p for s, p in reversed(list_checkpoints(out_dir, required=False))
            if (upto is None or s <= upto) and (p / STATE_FILE).is_file()]


def read_checkpoint(ckpt: Path, sharded: bool = False) -> tuple[dict[str, torch.Tensor] | None, dict[str, Any]]:
    """``(weights, trainer state)`` of a checkpoint folder, or DataError naming the damaged file.

    Every file is checked against ``checksums.json`` first (:func:`verify_checkpoint`; collective).
    The trainer state is read with ``weights_only=True``: tensors and plain containers only,
    so a ``trainer_state.pt`` from elsewhere cannot run code when unpickled. ``sharded``: the
    weights come from the DCP folder later (None here).
    """
    verify_checkpoint(ckpt, sharded)
    wpath, spath = ckpt / CKPT_WEIGHTS, ckpt / STATE_FILE
    weights = None
    if sharded:  # refused here, where a damaged checkpoint is passed over, rather than inside DCP's load
        sharded_checkpoint.read_metadata(ckpt / sharded_checkpoint.SHARDED_DIR / ".metadata")
    else:
        weights = _read_weights(wpath)
    try:
        with quiet_unpickler():
            st = torch.load(spath, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's message suggests weights_only=False: the very thing not to do here
        raise DataError(f"{spath}: unreadable trainer state (it holds objects other than tensors and plain data; "
                        "refused, since unpickling them could run code)") from None
    except Exception as e:  # EOFError/RuntimeError (truncated)
        raise DataError(f"{spath}: unreadable trainer state ({str(e).splitlines()[0][:200]})") from None
    if not isinstance(st, dict) or any(k not in st for k in STATE_KEYS):
        raise DataError(f"{spath}: unreadable trainer state (not a preschool trainer state)")
    check_state(st, spath, step_of(ckpt))
    return weights, st


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_state(st: dict, spath: Path, step: int | None) -> None:
    """DataError naming ``spath`` unless the trainer state ``st`` has the shape :meth:`Trainer.state_dict
    <preschool.train.trainer.Trainer.state_dict>` gives it and the step of its folder (``step``).

    Plain data passes ``weights_only``, so a state of any shape can arrive with matching checksums: a
    negative step would resume "before" every logged row and end DONE with metrics.jsonl emptied, a
    string for the RNG state would stop the resume with a traceback. Refused here, the previous
    checkpoint is tried instead."""
    def bad(why: str) -> DataError:
        return DataError(f"{spath}: trainer state does not fit this run ({why})")

    if step is not None and (not _count(st["step"]) or st["step"] != step):
        raise bad(f"it says step {st['step']!r}, but {spath.parent.name} holds step {step}")
    for k in ("stage_index", "stage_step", "tokens", "pt_tokens", "sched_base", "data_base"):
        if not _count(st[k]):
            raise bad(f"{k} is {st[k]!r}, not a count")
    opt, groups, acc, rng = st["optimizer"], st["groups"], st["acc"], st["rng"]
    if opt is not None and not (isinstance(opt, dict) and isinstance(opt.get("state"), dict)
                                and isinstance(opt.get("param_groups"), list)):
        raise bad("optimizer is not an optimizer state")
    if not isinstance(groups, dict) or not all(
            isinstance(g, dict) and _count(g.get("pos")) and _count(g.get("samples")) for g in groups.values()):
        raise bad("groups are not paused optimizer groups")
    if not isinstance(acc, dict) or not isinstance(acc.get("loss_sum"), (int, float)):
        raise bad("acc is not a loss account")
    if not isinstance(rng, dict) or not isinstance(rng.get("torch"), torch.Tensor) or rng["torch"].dtype != torch.uint8:
        raise bad("rng holds no torch generator state")
    cuda = rng.get("cuda")  # None (a CPU run), the GPU's state, or (written before) one per GPU rank 0 saw
    if cuda is not None and not all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8
                                    for t in (cuda if isinstance(cuda, list) else [cuda])):
        raise bad("rng holds no CUDA generator state")
    if not isinstance(st.get("callbacks", []), list):
        raise bad("callbacks is not a list of callback states")


def _listed_files(folder: Path) -> list[str]:
    """The files of a checkpoint folder that ``checksums.json`` lists (relative, sorted): every file but
    itself and ``sharded/``'s, which ``sharded/manifest.json`` (listed) records."""
    out = []
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder).as_posix()
        if not f.is_file() or rel in (CHECKSUMS, PARTIAL_MARK) or \
                (rel.startswith(f"{sharded_checkpoint.SHARDED_DIR}/") and f.name != sharded_checkpoint.MANIFEST):
            continue
        out.append(rel)
    return out


def record_checksums(folder: Path) -> None:
    """Write ``folder/checksums.json``: byte size and sha256 of every file :func:`_listed_files` names."""
    files = {rel: {"bytes": (folder / rel).stat().st_size, "sha256": sha256_file(folder / rel)}
             for rel in _listed_files(folder)}
    write_json(folder / CHECKSUMS, {"format": "preschool checkpoint", "files": files})


def _drop_checksums(ckpt: Path, names: list[str]) -> None:
    """Remove the entries of files about to be pruned (``names``: files or folders) from ``checksums.json``."""
    path = ckpt / CHECKSUMS
    if path.is_file():
        man = read_json(path)
        man["files"] = {k: v for k, v in man["files"].items() if not any(k == n or k.startswith(f"{n}/") for n in names)}
        write_json(path, man)


def checksum_entries(ckpt: Path) -> list[tuple[Path, dict]] | None:
    """``(file, {"bytes", "sha256"})`` of every file ``ckpt/checksums.json`` lists (None: no such file:
    a checkpoint written before checksums were recorded); DataError when it is unreadable."""
    path = ckpt / CHECKSUMS
    if not path.is_file():
        return None
    try:
        files = read_json(path)["files"]
        entries = [(ckpt / rel, info) for rel, info in files.items()]
        if not all(isinstance(i["bytes"], int) and isinstance(i["sha256"], str) and ".." not in Path(r).parts
                   and not Path(r).is_absolute() for r, i in files.items()):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise DataError(f"{path}: unreadable checksums (damaged checkpoint)") from None
    return entries


def verify_checkpoint(ckpt: Path, sharded: bool = False) -> None:
    """Check every file of ``ckpt`` (and, ``sharded``, of its DCP folder) against the sha256 recorded when
    it was written; DataError naming the first that differs or is missing. Collective under
    torch.distributed (the ranks share the hashing). A checkpoint without ``checksums.json`` (written
    before there were any) gets a warning on stderr and only its sharded state checked."""
    entries = checksum_entries(ckpt)
    if entries is None:
        dist = sharded_checkpoint._dist()
        if not dist or dist.get_rank() == 0:
            print(f"[preschool] {ckpt}: no {CHECKSUMS} (written by an older preschool): its files are not verified"
                  + (" but for sharded/" if sharded else ""), file=sys.stderr, flush=True)
        entries = []
    else:  # a file it does not list would be read unverified: "files": {} must not pass a flipped weights file
        listed = {f for f, _ in entries}
        unlisted = [rel for rel in _listed_files(ckpt) if ckpt / rel not in listed]
        if unlisted:
            raise DataError(f"{ckpt}: {', '.join(unlisted)} not listed in {CHECKSUMS}, so not verified (a file "
                            "added to the checkpoint, or a checksums file that lists too little)")
    if sharded:  # checksums.json lists sharded/manifest.json, whose hashes the shards are checked against
        entries = entries + sharded_checkpoint.manifest_entries(ckpt)
    sharded_checkpoint.verify_files(entries)


def remove_interrupted_writes(out_dir: Path) -> list[Path]:
    """Delete the temp folders that checkpoint writes of this run left when their process died; returns them.

    Only folders named like a step folder's temp (``layout.checkpoint_temp_dirs``) whose writer's record
    says it ran on this host and is gone are removed (``io.remove_dead_temps``); a write still going on,
    one from another host and anything else in ``checkpoints/`` are left alone.
    """
    removed = []
    for target in sorted({checkpoints_dir(out_dir) / t.name.split(".")[1] for t in checkpoint_temp_dirs(out_dir)}):
        for tmp in remove_dead_temps(target):
            removed.append(tmp)
            print(f"[preschool] removed {tmp} (a checkpoint write that was cut short)", file=sys.stderr, flush=True)
    return removed


def _ties(model: torch.nn.Module, default: bool) -> bool:
    """Whether ``model`` ties its head to its input embeddings (its HF config says; a model the trainer was
    given need not be ``cfg.model``'s shape)."""
    return bool(getattr(getattr(model, "config", None), "tie_word_embeddings", default))


def load_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """Load the weights of checkpoint ``ckpt`` into ``model`` (not sharded), every file checked against
    ``checksums.json`` first; DataError naming the file that differs or does not fit."""
    verify_checkpoint(ckpt)
    _load_weights(model, ckpt, _read_weights(ckpt / CKPT_WEIGHTS), tied=_ties(model, False))


def _read_weights(wpath: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(wpath))
    except Exception as e:  # SafetensorError (truncated, bad header) or OSError: damaged either way
        raise DataError(f"{wpath}: damaged checkpoint weights ({str(e).splitlines()[0]})") from None


def _load_weights(model: torch.nn.Module, ckpt: Path, weights: dict[str, torch.Tensor], tied: bool) -> None:
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # tied heads are saved once; anything else missing is an error
    missing = [k for k in missing if not (tied and k == "lm_head.weight")]
    if missing or unexpected:
        raise DataError(f"{ckpt}: checkpoint does not match the model (missing {missing}, unexpected {unexpected})")
    if tied:
        model.tie_weights()
