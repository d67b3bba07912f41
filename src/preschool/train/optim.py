"""The project's one optimizer recipe: AdamW with decay on matrices only.

Parameter groups: weight decay on every trainable tensor with ``ndim >= 2``
except the input/output embeddings (unless ``decay_embeddings``, as the HF
Trainer does); norms and biases (1-D) do not decay unless ``decay_all``
(Nanotron's ``weight_decay_exclude_named_params: null``, verify-ppt: every
parameter decays, one group). Used by the staged trainer, and so by the fine-tune of
``train/finetune.py`` (the QA evaluator's), which sets ``decay_embeddings`` as the HF Trainer does.
"""

from __future__ import annotations


def adamw(model, lr: float, weight_decay: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
          decay_embeddings: bool = False, decay_all: bool = False):
    import torch

    emb = {id(model.get_input_embeddings().weight)}
    out = model.get_output_embeddings()
    if out is not None:
        emb.add(id(out.weight))
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if decay_all or p.ndim >= 2 and (decay_embeddings or id(p) not in emb) else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused AdamW (one kernel per step; CPU support since torch 2.4) is ~2x the foreach path on CPU
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, foreach=True)
