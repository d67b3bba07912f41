"""Weights & Biases logging beside metrics.jsonl and TensorBoard (``train.wandb: {...}``; rank 0 only).

Enabled by a ``wandb`` block in the train config (``pip install 'preschool[wandb]'``)::

    train:
      wandb: {project: preschool, entity: my-team, mode: offline}

- One W&B run per trainer run folder. Its name is ``<experiment>/<arm>/seed<k>``
  when the folder is an experiment's ``<out>/arms/<arm>/seed<k>`` (the
  experiment being the ``<out>`` folder's name), else the folder's name;
  ``group`` defaults to the experiment, so a project page groups arms and seeds.
- The run's config is the run folder's ``config.yaml`` tree (train config,
  dataset paths and content hashes); ``config.yaml`` and, for experiment runs,
  the data manifest (``<out>/data/manifest.json``) are saved as run files.
- Every row the trainer logs (train, val, stage events) is logged under
  ``<event>/<key>`` at its optimizer step.
- The W&B run id is kept in ``<run>/wandb_id.txt``, so a resumed run continues
  the same W&B run (``resume="allow"``); rows W&B already has for steps after
  the resumed checkpoint are not re-sent (W&B keeps the first ones).
- ``mode``: ``online`` | ``offline`` (files under ``<run>/wandb/``, upload later
  with ``wandb sync``) | ``disabled``; unset, W&B's own setting (``WANDB_MODE``)
  applies.

Only rank 0 talks to W&B; other ranks do nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ...errors import MissingDependency
from ...layout import ARMS, WANDB_ID, data_manifest_path, run_config_path
from .base import Callback

if TYPE_CHECKING:  # pragma: no cover
    from ..configs import WandbConfig  # with the other train configs (importing them here would load torch)


def run_identity(out_dir: Path) -> tuple[str, str | None]:
    """(name, experiment) for a run folder: ``<exp>/<arm>/seed<k>`` under ``<exp>/arms/``, else its own name."""
    parts = out_dir.resolve().parts
    if len(parts) >= 4 and parts[-3] == ARMS and parts[-1].startswith("seed"):
        return f"{parts[-4]}/{parts[-2]}/{parts[-1]}", parts[-4]
    if len(parts) >= 3 and parts[-2] == ARMS:  # compartments: <out>/arms/<arm>
        return f"{parts[-3]}/{parts[-1]}", parts[-3]
    return out_dir.name, None


class WandbLogger(Callback):
    """Mirror the trainer's log rows to a W&B run (rank 0)."""

    def __init__(self, cfg: WandbConfig):
        self.cfg = cfg
        self.run = None

    def on_train_start(self, trainer) -> None:
        if not trainer.is_main:
            return
        try:
            import wandb
        except ImportError:
            raise MissingDependency("wandb", "wandb", "Weights & Biases logging (train.wandb)") from None
        from ...config import load_yaml

        out = trainer.out_dir
        id_file = out / WANDB_ID
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:16]
        id_file.write_text(run_id + "\n")
        name, experiment = run_identity(out)
        config = load_yaml(run_config_path(out)) if run_config_path(out).is_file() else {}
        self.run = wandb.init(project=self.cfg.project, entity=self.cfg.entity, name=self.cfg.name or name,
                              group=self.cfg.group or experiment, tags=list(self.cfg.tags), mode=self.cfg.mode,
                              id=run_id, resume="allow", dir=str(out), config=config)
        for f in self._attachments(out):
            self.run.save(str(f), base_path=str(f.parent.parent), policy="now")

    @staticmethod
    def _attachments(out: Path) -> list[Path]:
        files = [run_config_path(out)]
        parts = out.resolve().parts
        if ARMS in parts:  # an experiment run: its data manifest too
            exp = Path(*parts[:len(parts) - 1 - parts[::-1].index(ARMS)])
            files.append(data_manifest_path(exp))
        return [f for f in files if f.is_file()]

    def write_log(self, trainer, row: Mapping[str, Any]) -> None:
        if self.run is None:
            return
        ev = row.get("event", "log")
        scalars = {(k if "/" in k else f"{ev}/{k}"): v for k, v in row.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
        if scalars:
            self.run.log(scalars, step=int(row.get("step", trainer.step)))

    def on_train_end(self, trainer) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
