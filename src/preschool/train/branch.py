"""A run that continues another run exactly: the branch of a shared prefix.

When two runs train the same leading stages (the same model, seed, data, schedule and settings:
experiment/branches.py decides), the second need not train them again. :func:`fork_run` gives the
second run's folder the first one's history up to the branch point: its checkpoints up to that step
(hard links where the file system allows, else copies) and its ``metrics.jsonl`` rows up to it, and
the trainer then resumes there as from any checkpoint. A resume is exact (same weights, optimizer,
schedule, data position and RNG), so the branch's checkpoints at and after the branch point equal,
byte for byte, those of the same run trained from step 0 (the trainer state by content: torch.save
writes a fresh serialization id into every file). The parent keeps the training state of its
checkpoint at the branch point (``Trainer(keep_state_at=...)``), which ``keep_optimizer_state`` would
otherwise prune.

The fork is idempotent and safe to kill: each checkpoint folder appears whole (``io.atomic_dir``),
``branch.json`` (parent, step) is written last, and a folder that holds a run of its own
(``config.yaml``) is never forked into. The files are shared read-only in practice: the trainer
replaces files (write to a temp, rename) or unlinks them, so neither run can change the other's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..errors import DataError
from ..io import atomic_dir, read_json, write_json, write_text
from ..layout import CKPT_STATE, checkpoint_dir, list_checkpoints, metrics_path, read_metrics, run_config_path

BRANCH_RECORD = "branch.json"


def branch_record(run_dir: str | Path) -> dict | None:
    """``{"parent": run folder, "step": N}`` of a run forked from another (None: trained from its start)."""
    path = Path(run_dir) / BRANCH_RECORD
    return read_json(path) if path.is_file() else None


def _link_tree(src: Path, dst: Path) -> None:
    """``dst`` (an existing empty folder) gets ``src``'s files: hard links, or copies across file systems."""
    for f in sorted(src.rglob("*")):
        target = dst / f.relative_to(src)
        if f.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(f, target)
        except OSError:
            shutil.copy2(f, target)


def fork_run(parent: str | Path, child: str | Path, step: int) -> bool:
    """Give run folder ``child`` the history of run folder ``parent`` up to ``step`` (module docstring);
    True when it did, False when ``child`` already holds a run of its own or is forked already.
    DataError naming the checkpoint when the parent's checkpoint at ``step`` has no training state."""
    parent, child = Path(parent), Path(child)
    if (child / BRANCH_RECORD).is_file() or run_config_path(child).is_file():
        return False
    src = checkpoint_dir(parent, step)
    if not (src / CKPT_STATE).is_file():
        raise DataError(f"{src}: no {CKPT_STATE} to branch from (the run that trains the shared prefix keeps it at "
                        "its branch points; was it trained by another command?)")
    for s, ckpt in list_checkpoints(parent, required=False):
        target = checkpoint_dir(child, s)
        if s > step or target.is_dir():
            continue
        with atomic_dir(target) as tmp:
            _link_tree(ckpt, tmp)
    rows = [r for r in read_metrics(metrics_path(parent)) if r.get("step", 0) <= step] \
        if metrics_path(parent).is_file() else []
    write_text(metrics_path(child), "".join(json.dumps(r) + "\n" for r in rows))
    write_json(child / BRANCH_RECORD, {"parent": str(parent), "step": step})
    return True
