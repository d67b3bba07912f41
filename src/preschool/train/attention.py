"""Attention within each packed document (``attention_reset_between_docs``), dense or through FlexAttention.

A packed row holds several documents; shard ``segments`` numbers them. With
``attention_reset_between_docs`` every position attends only to earlier
positions of its own document, and position ids restart at 0 per document.
Two ways to tell the HF model so, chosen by ``TrainConfig.doc_attention``:

- ``dense``: a boolean (B, 1, T, T) mask (:func:`doc_attention_mask`). Works with
  the ``sdpa`` and ``eager`` attention implementations on any device, but costs
  O(T^2) memory per row and sends SDPA to its slower masked kernels.
- ``flex``: the model runs HF's ``flex_attention`` implementation and gets a
  FlexAttention ``BlockMask`` (:func:`doc_block_mask`): fully masked 128 x 128
  blocks are skipped and no T x T tensor exists. Training needs CUDA: torch's
  FlexAttention has no backward on CPU (forward-only use on CPU works, after a
  torch.compile of the kernel that takes minutes there).
- ``auto``: ``flex`` on CUDA, ``dense`` elsewhere.

Both give the same logits (tests/train/test_attention.py compares them).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from ..errors import ConfigError

DocAttention = Literal["auto", "dense", "flex"]
FLEX_IMPL = "flex_attention"


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


def doc_block_mask(seg: torch.Tensor):
    """FlexAttention ``BlockMask`` for (B, T) ``seg``: causal and within the same segment, shared by all heads."""
    from torch.nn.attention.flex_attention import create_block_mask

    def same_doc_causal(b, h, q, kv):
        return (q >= kv) & (seg[b, q] == seg[b, kv])

    B, T = seg.shape
    return create_block_mask(same_doc_causal, B, None, T, T, device=seg.device)


def resolve_doc_attention(mode: str, device: torch.device) -> str:
    """``dense`` or ``flex`` for a training run on ``device`` (ConfigError for flex training on CPU)."""
    if mode == "auto":
        return "flex" if device.type == "cuda" else "dense"
    if mode == "flex" and device.type != "cuda":
        raise ConfigError("doc_attention", f"'flex' trains on CUDA only: torch's FlexAttention has no backward on "
                          f"{device.type}; use 'dense' (or 'auto')")
    return mode


def use_flex(model) -> None:
    """Switch an HF model to the ``flex_attention`` implementation (weights untouched)."""
    model.set_attn_implementation(FLEX_IMPL)


def enable_doc_attention(model, mode: str) -> None:
    """Ready ``model`` for per-document masks in ``mode`` (``dense`` or ``flex``, see :func:`resolve_doc_attention`).

    ``flex`` switches it to the flex implementation; ConfigError naming ``attention_reset_between_docs``
    when its attention implementation takes no such mask (``sdpa``, ``eager`` and flex do).
    """
    if mode == "flex":
        use_flex(model)
    impl = getattr(model.config, "_attn_implementation", None)
    if impl not in ("sdpa", "eager", FLEX_IMPL):
        raise ConfigError("attention_reset_between_docs",
                          f"not supported with attention implementation {impl!r} (needs sdpa, eager or flex)")


def doc_attention_kwargs(model, seg: torch.Tensor) -> dict[str, Any]:
    """``attention_mask`` and ``position_ids`` for an HF forward attending within documents only.

    The mask's form follows the model's attention implementation: a ``BlockMask``
    for ``flex_attention``, the dense 4D boolean mask otherwise.
    """
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    mask = doc_block_mask(seg) if impl == FLEX_IMPL else doc_attention_mask(seg)
    return {"attention_mask": mask, "position_ids": doc_positions(seg)}
