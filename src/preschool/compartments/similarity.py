"""Per-compartment validation loss and cross-compartment representation similarity.

Follows Howe & Wingate's diagnostics (vinhowe/compartmentalization
``experiment/evaluate_checkpoints_fineweb_dedup.py`` -> ``loss_compartment_i``,
and ``experiment/compute_cossim_sweep.py``; spec B.2, B.4):

- ``compartment_losses``: the same base val rows shifted into every
  compartment; mean next-token loss (fp32, over loss-mask targets) per
  compartment, plus their mean (the slowdown metric's loss).
- ``cross_compartment_similarity``: the same base batch in every compartment,
  the post-block states of ``layer`` (1-based; default n_layer // 2, the paper
  uses block 4 of 8), per-token cosine between matched positions for every
  pair of compartments, averaged; reported as a c x c matrix and its
  off-diagonal mean. The paper's value for well-aligned runs is ~0.99.

Offset presentation only (the compartment embedding reads compartments from ids).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .infonce import trunk_states


@torch.no_grad()
def compartment_losses(model, base_rows: np.ndarray, n_compartments: int, base_vocab: int,
                       loss_mask: np.ndarray | None = None, batch_size: int = 32) -> dict[str, float]:
    """{"loss/c<i>": mean loss of ``base_rows`` (n, row_len) shown in compartment i, "loss/mean": their mean}."""
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    rows = torch.as_tensor(np.asarray(base_rows, dtype=np.int64))
    mask = (torch.ones_like(rows, dtype=torch.float32) if loss_mask is None
            else torch.as_tensor(np.asarray(loss_mask), dtype=torch.float32))
    out = {}
    try:
        for i in range(n_compartments):
            tot, cnt = 0.0, 0.0
            for a in range(0, len(rows), batch_size):
                ids = (rows[a:a + batch_size] + i * base_vocab).to(dev)
                m = mask[a:a + batch_size, 1:].to(dev)
                logits = model(input_ids=ids[:, :-1], use_cache=False).logits.float()
                nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
                tot += float((nll * m).sum())
                cnt += float(m.sum())
            out[f"loss/c{i}"] = tot / max(cnt, 1.0)
    finally:
        model.train(was_training)
    out["loss/mean"] = float(np.mean([out[f"loss/c{i}"] for i in range(n_compartments)]))
    return out


@torch.no_grad()
def cross_compartment_similarity(model, base_ids: np.ndarray, n_compartments: int, base_vocab: int,
                                 layer: int = 0) -> dict:
    """{"mean": off-diagonal mean cosine, "matrix": c x c list, "layer": layer used}."""
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    layer = layer or max(1, len(model.base_model.layers) // 2)
    ids = torch.as_tensor(np.asarray(base_ids, dtype=np.int64), device=dev)
    try:
        states = [F.normalize(trunk_states(model, ids + i * base_vocab, layer).float(), dim=-1)
                  for i in range(n_compartments)]
    finally:
        model.train(was_training)
    mat = np.ones((n_compartments, n_compartments))
    for i in range(n_compartments):
        for j in range(i + 1, n_compartments):
            mat[i, j] = mat[j, i] = float((states[i] * states[j]).sum(-1).mean())
    off = mat[~np.eye(n_compartments, dtype=bool)]
    return {"mean": float(off.mean()) if off.size else 1.0, "matrix": mat.tolist(), "layer": layer}
