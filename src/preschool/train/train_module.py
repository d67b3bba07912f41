"""How a micro-batch becomes the loss a step backpropagates: the forward pass, the cross-entropy and the
callbacks' extra losses (:class:`TrainModule`).

Three parts of training, one file each: this module turns a micro-batch into a loss; the step
(:class:`~preschool.train.step.TrainStep`) accumulates the gradients of the micro-batches, clips them and
applies a guarded update; the loop (:class:`~preschool.train.trainer.Trainer`) says which batches, how many
steps and what gets checkpointed and logged.

The forward pass: document-masked attention where the run asks for it and the batch has segments, the
padding mask of padded rows (the QA fine-tune's: the padding is masked, as at generation), the hidden states
when a callback reads them, and no logits at all when a fused loss (:mod:`.loss`) reads the base model's final
hidden state itself. It runs under the run's autocast dtype, if any. The loss: the cross-entropy summed over
the micro-batch's label tokens (fused, or on the logits in fp32), times the caller's ``scale`` (which turns
it into the step's share of the global token mean), plus each callback's ``extra_loss`` weighted by the
caller's ``share`` (one micro-batch's part of the step).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F

from ..data.mixture import IGNORE_INDEX
from .attention import doc_attention_kwargs
from .callbacks import Callback
from .loss import FusedLoss


class TrainModule:
    """The forward pass and the loss of one micro-batch (see the module docstring).

    ``model``: the model the callbacks' extra losses and the document mask read (unwrapped); ``forward``: what
    runs the forward pass (the model, wrapped for DDP and compiled as the run asks); ``fused_loss``: the
    fused loss path installed on the model, or None for the cross-entropy on the logits; ``doc_attention``:
    whether a batch's ``segments`` mask attention between documents."""

    def __init__(self, model: torch.nn.Module, forward: Any, callbacks: Sequence[Callback], *,
                 device: torch.device, amp_dtype: torch.dtype | None, fused_loss: FusedLoss | None,
                 doc_attention: bool, needs_hidden: bool):
        self.model = model
        self.forward = forward
        self.callbacks = callbacks
        self.device = device
        self.amp_dtype = amp_dtype
        self.fused_loss = fused_loss
        self.doc_attention = doc_attention
        self.needs_hidden = needs_hidden
        self._no_logits = torch.empty(0, dtype=torch.long, device=device)  # one tensor: no per-step alloc

    def loss(self, mb: dict[str, torch.Tensor], scale: float, share: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss to backpropagate, summed cross-entropy to report)`` of the micro-batch ``mb``."""
        kw: dict[str, Any] = {"use_cache": False}
        if self.doc_attention and "segments" in mb:
            kw.update(doc_attention_kwargs(self.model, mb["segments"]))
        if "attention_mask" in mb:  # padded rows (a fine-tune's): the padding is masked, as at generation
            kw["attention_mask"] = mb["attention_mask"]
        if self.needs_hidden:
            kw["output_hidden_states"] = True
        if self.fused_loss is not None:
            # no logits from the model (an empty position list); FusedLoss reads the base model's
            # final (normed) hidden state itself (not output_hidden_states: its hooks break compiled blocks)
            kw["logits_to_keep"] = self._no_logits
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            if self.fused_loss is not None:  # computed inside the forward: the head weight is whole there
                with self.fused_loss.labels(mb["labels"]):
                    out = self.forward(input_ids=mb["input_ids"], **kw)
                ce = out.loss
            else:
                out = self.forward(input_ids=mb["input_ids"], **kw)
                logits = out.logits
                ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), mb["labels"].reshape(-1),
                                     ignore_index=IGNORE_INDEX, reduction="sum")
            loss = ce * scale
            for cb in self.callbacks:
                extra = cb.extra_loss(self.model, mb, out)
                if extra is not None:
                    loss = loss + extra * share
        return loss, ce
