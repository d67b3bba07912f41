"""tqdm progress bar over all optimizer steps of the run: stage, loss, global tokens/s, MFU (on a GPU in the
table of train/flops.py) and ETA (rank 0)."""

from __future__ import annotations

from .base import Callback


class ProgressBar(Callback):
    """One bar for the whole run; postfix refreshed at each train log row."""

    def __init__(self):
        self._bar = None

    def on_train_start(self, trainer) -> None:
        if not trainer.is_main:
            return
        from tqdm.auto import tqdm

        self._bar = tqdm(total=trainer.total_steps, initial=trainer.step, unit="step", dynamic_ncols=True,
                         desc=trainer.out_dir.name)

    def on_step_end(self, trainer) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def write_log(self, trainer, row) -> None:
        if self._bar is not None and row.get("event") == "train":
            extra = {"mfu": f"{100 * row['mfu']:.0f}%"} if "mfu" in row else {}
            # tokens/s is the whole job's (every rank), MFU the job's share of its devices' peak
            self._bar.set_postfix(stage=row["stage"], loss=f"{row['loss']:.3f}",
                                  tok_s=f"{row['tokens_per_s']:.0f}", **extra, refresh=False)

    def on_train_end(self, trainer) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
