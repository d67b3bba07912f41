"""One optimisation step, separate from the loop that feeds it: the package's only training step.

:class:`TrainStep` owns the model's parameters and the optimizer for the length of a step: it sets
the learning rate, runs forward and backward over the micro-batches it is given (the gradients
accumulate), takes the global gradient norm (clipping to ``grad_clip`` when it is > 0), and applies
the update only when both the summed loss values and the norm are finite. How a micro-batch becomes
a loss is the caller's ``loss_fn``; which batches, how many steps, what a skipped step means and
what gets logged are the caller's loop: the staged :class:`~preschool.train.trainer.Trainer`'s (which
the QA fine-tune, :mod:`preschool.train.finetune`, runs in as well).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Sequence

import torch


@dataclass
class StepResult:
    """What one step did: ``loss`` (the sum of ``loss_fn``'s reported values over the micro-batches,
    summed over ranks when the step has an ``all_reduce``; a float32 tensor on the step's device),
    ``grad_norm`` (the global norm before clipping) and ``applied`` (False: not finite, no update)."""

    loss: torch.Tensor
    grad_norm: torch.Tensor
    applied: bool


class TrainStep:
    """Forward/backward over micro-batches, clip, and a guarded optimizer step.

    ``no_sync(last_micro)`` gives the context each micro-batch's backward runs in (DDP skips its
    gradient all-reduce on all but the last); ``all_reduce`` sums the reported loss over ranks before
    the finiteness check, so every rank decides alike. ``optimizer`` may be replaced between steps
    (a stage that resets it)."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_clip: float,
                 no_sync: Callable[[bool], ContextManager[Any]] | None = None,
                 all_reduce: Callable[[torch.Tensor], Any] | None = None):
        self.model = model
        self.optimizer = optimizer
        self.grad_clip = grad_clip
        self._no_sync = no_sync or (lambda last_micro: contextlib.nullcontext())
        self._all_reduce = all_reduce

    def __call__(self, micro_batches: Sequence[Any], loss_fn: Callable[[Any], tuple[torch.Tensor, torch.Tensor]],
                 lr: float) -> StepResult:
        """One step at learning rate ``lr``. ``loss_fn(micro_batch) -> (loss to backpropagate, value to
        report)``; the caller scales each loss so their sum is the step's objective. The gradients are
        cleared before and after (a step never sees an earlier one's, and they hold no memory between steps)."""
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        device = next(self.model.parameters()).device
        total = torch.zeros((), dtype=torch.float32, device=device)
        n = len(micro_batches)
        for m, mb in enumerate(micro_batches):
            with self._no_sync(m == n - 1):
                loss, value = loss_fn(mb)
                loss.backward()
            total += value.detach()
        params = [p for p in self.model.parameters() if p.grad is not None]
        if self.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, self.grad_clip, foreach=True)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params], foreach=True)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP: the global norm
        if self._all_reduce is not None:
            self._all_reduce(total)
        # one host sync per step: with the loss reduced over ranks, every rank takes the same branch
        applied = bool(torch.isfinite(total) & torch.isfinite(norm))
        if applied:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(total, norm, applied)
