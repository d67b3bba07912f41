"""What the trainer shows the code it calls: callbacks see :class:`TrainerView`, checkpoint writing
and resuming see :class:`CheckpointedTrainer`.

Both are structural types (:class:`typing.Protocol`): the :class:`~preschool.train.trainer.Trainer`
satisfies them without naming them, and neither callbacks nor :mod:`.checkpoint` import the
trainer module, so ``train/`` has no import circle, type hints included (``tests/test_imports.py``).
A callback that needs something not listed here is asking for a new part of the public API: add it
here first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from .configs import StageConfig, TrainConfig
    from .parallel import Replicated
    from .stages import StagePlan


class TrainerView(Protocol):
    """The trainer as a callback sees it: the run's position, its model and data, and four methods."""

    cfg: TrainConfig
    out_dir: Path
    datasets: dict[str, Path]  # dataset name -> folder (train/, val/)
    tokenizer_dir: Path | None
    plan: StagePlan  # each stage's data, steps and token account
    model: Any  # the unwrapped HF model; on_model_built may replace it
    device: torch.device
    rank: int
    world: int
    is_main: bool
    micro: int  # rows per forward on this rank
    vocab_size: int
    amp_dtype: torch.dtype | None
    parallel: Replicated  # ``.sharded``: FSDP (every rank must run the same forwards)
    step: int
    stage_index: int
    stage_step: int
    tokens: int
    pt_tokens: int
    lr: float
    should_stop: bool  # set True to stop after this step (the run is not DONE; rerun resumes)
    resumed_from: Path | None
    last_val: dict[str, float]  # the newest validation row's values (the summary's ``val``)

    @property
    def stage(self) -> StageConfig: ...

    @property
    def stage_steps(self) -> list[int]: ...

    @property
    def total_steps(self) -> int: ...

    @property
    def stage_tokens(self) -> int: ...

    def token_account(self) -> dict[str, dict[str, int]]: ...

    def log(self, row: dict[str, Any]) -> None: ...

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor: ...

    def barrier(self) -> None: ...

    def save_checkpoint(self) -> Path: ...


class CheckpointedTrainer(TrainerView, Protocol):
    """What :mod:`.checkpoint` also reads and restores: the optimizer, paused groups and the trainer state."""

    optimizer: torch.optim.Optimizer
    groups: dict[str, dict[str, Any]]
    keep_state_at: frozenset[int]  # steps whose checkpoints keep their training state (branch points)

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, st: Mapping[str, Any]) -> None: ...
