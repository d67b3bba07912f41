"""The trainer's extension point: lifecycle hooks plus an auxiliary-loss hook.

Everything beyond "forward, backward, step" (validation, checkpoints, metrics
files, the progress bar, extra loss terms from other packages) is a
:class:`Callback`. Hooks receive the trainer as a
:class:`~preschool.train.protocol.TrainerView` (``step``, ``stage``, ``stage_index``,
``stage_step``, ``stage_steps``, ``tokens``, ``pt_tokens``, ``stage_tokens``, ``lr``,
``model`` (the unwrapped HF model), ``cfg``, ``out_dir``, ``is_main``,
``rank``/``world``, ``plan`` (the :class:`~preschool.train.stages.StagePlan`), ``log(row)``,
``all_reduce``, ``barrier``, ``save_checkpoint``); callbacks never import the trainer module.

Order per optimizer step: forward/backward of every micro-batch (calling
``extra_loss``), optimizer step, then ``on_step_end``.

A row passed to ``trainer.log`` goes through two phases, so the order of the
callback list never decides what is written:

1. ``on_log(trainer, row)`` of every callback: *contribute* -- add your own
   values to the row (e.g. the InfoNCE callback adds ``infonce``); write nothing.
2. ``write_log(trainer, row)`` of every callback: *write* -- the row is complete
   and read-only (a mapping proxy); the metrics file, TensorBoard, W&B and the
   progress bar all write here, so they all see the same values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    import torch

    from ..configs import StageConfig
    from ..protocol import TrainerView


class Callback:
    """Base class; override the hooks you need. Callbacks run in list order."""

    #: set True to receive ``outputs.hidden_states`` in ``extra_loss`` (costs memory)
    needs_hidden_states: bool = False

    def on_model_built(self, trainer: "TrainerView") -> None:
        """After the fresh model is built and moved to the device, before the optimizer is made and any
        checkpoint is loaded: edit ``trainer.model`` in place or replace it (same parameter names as
        its checkpoints), e.g. to add parameters or load other weights. The trainer then puts the model,
        whatever dtype it comes in, in the run's parameter dtype (``precision``)."""

    def on_train_start(self, trainer: "TrainerView") -> None: ...

    def on_stage_start(self, trainer: "TrainerView", stage: "StageConfig") -> None: ...

    def on_step_end(self, trainer: "TrainerView") -> None: ...

    def on_stage_end(self, trainer: "TrainerView", stage: "StageConfig") -> None: ...

    def on_train_end(self, trainer: "TrainerView") -> None: ...

    def on_log(self, trainer: "TrainerView", row: dict[str, Any]) -> None:
        """Phase 1 of a log row: add keys to ``row`` (``row.setdefault(key, value)``); write nothing here."""

    def write_log(self, trainer: "TrainerView", row: "Mapping[str, Any]") -> None:
        """Phase 2 of a log row: ``row`` is complete (every ``on_log`` has run) and read-only; write it out."""

    def extra_loss(self, model: Any, batch: dict[str, "torch.Tensor"], outputs: Any) -> "torch.Tensor | None":
        """An extra loss term for this micro-batch (its mean over the micro-batch), or None.

        ``batch`` holds ``input_ids``, ``labels``, ``loss_mask``, ``source`` (and
        ``segments``) as tensors on the training device; ``outputs`` is the HF
        model output (``logits``; ``hidden_states`` when ``needs_hidden_states``).
        The trainer weights it by the micro-batch's share of the rank's batch,
        so the step's gradient is that of the batch mean, whatever the
        accumulation. Prefer working from ``outputs`` over a second forward.
        """
        return None

    def state_dict(self) -> dict[str, Any]:
        """State saved in checkpoints (trainer_state.pt) and restored on resume: tensors, numbers,
        strings and lists/dicts of them only (the file is read back with ``weights_only=True``)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
