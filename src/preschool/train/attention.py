"""Attention within documents of a packed row (``attention_reset_between_docs``).

A row's ``segments`` array numbers the documents packed into it. Training,
validation and the ``heldout`` evaluator build the same mask and position ids
from it, so a model is scored exactly as it was trained.
"""

from __future__ import annotations

import torch


def doc_positions(seg: torch.Tensor) -> torch.Tensor:
    """Position ids restarting at 0 at each new segment of a row."""
    T = seg.shape[1]
    ar = torch.arange(T, device=seg.device).expand_as(seg)
    start = torch.ones_like(seg, dtype=torch.bool)
    start[:, 1:] = seg[:, 1:] != seg[:, :-1]
    first = torch.where(start, ar, torch.zeros_like(ar)).cummax(dim=1).values
    return ar - first


def doc_attention_mask(seg: torch.Tensor) -> torch.Tensor:
    """Boolean (B, 1, T, T) mask: causal and within the same segment (document)."""
    T = seg.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=seg.device).tril()
    same = seg[:, :, None] == seg[:, None, :]
    return (causal[None] & same)[:, None]
