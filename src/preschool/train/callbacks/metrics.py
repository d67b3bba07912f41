"""Metrics log: every row the trainer logs goes to ``metrics.jsonl`` (and TensorBoard if enabled).

Rows are appended and flushed as they come (rank 0 only). On resume, rows
newer than the checkpoint being resumed are dropped first (they were written
after it by the interrupted run and will be produced again), so the file
reads as one uninterrupted run.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ...errors import MissingDependency
from ...io import write_errors_named, write_text
from ...layout import metrics_path, read_metrics
from .base import Callback


class MetricsLogger(Callback):
    """Append rows to ``<out>/metrics.jsonl``; mirror scalars to TensorBoard when ``tensorboard: true``."""

    def __init__(self):
        self._fh = None
        self._tb = None

    def on_train_start(self, trainer) -> None:
        if not trainer.is_main:
            return
        path = metrics_path(trainer.out_dir)
        if path.is_file():  # read_metrics drops a last row cut short by a crash
            keep = [row for row in read_metrics(path)
                    if row.get("step", 0) <= trainer.step and trainer.resumed_from is not None]
            write_text(path, "".join(json.dumps(row) + "\n" for row in keep))
        self._fh = open(path, "a", encoding="utf-8")
        if trainer.cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise MissingDependency("tensorboard", "tensorboard", "TensorBoard logging") from None
            self._tb = SummaryWriter(str(trainer.out_dir / "tensorboard"), purge_step=trainer.step or None)

    def write_log(self, trainer, row: Mapping[str, Any]) -> None:
        if self._fh is None:
            return
        with write_errors_named(self._fh.name):  # a full disk: a one-line error naming metrics.jsonl
            self._fh.write(json.dumps(dict(row)) + "\n")
            self._fh.flush()
        if self._tb is not None:
            ev = row.get("event", "log")
            for k, v in row.items():
                if isinstance(v, (int, float)) and k != "step":
                    tag = k if "/" in k else f"{ev}/{k}"
                    self._tb.add_scalar(tag, v, row.get("step", trainer.step))

    def on_train_end(self, trainer) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None
