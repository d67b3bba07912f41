"""Contrastive cross-compartment alignment (InfoNCE) as an auxiliary loss.

Follows Howe & Wingate (vinhowe/compartmentalization ``src/infonce.py``,
``train.py``; spec B.5), "compartment" pair mode:

- pairs: ``pair_batch`` base-vocabulary spans, each rendered in two distinct
  compartments i != j drawn fresh per span and per call;
- encoder: the LM trunk up to and including block ``layer`` (1-based; default
  n_layer // 2), no LM head; hidden states mean-pooled over the span (over
  non-pad positions when a mask is given) and L2-normalised;
- loss: cosine-similarity matrix / ``temperature``, cross-entropy with the
  diagonal as targets, averaged over both directions (i->j and j->i);
- total loss = LM loss + ``weight`` * InfoNCE (the trainer scales it per
  micro-batch like the LM loss).

Spans come from the training batch itself (plain rows are decoded back to the
base vocabulary; translation rows, which contain markers, are skipped), so no
second data pool is needed; the paper samples from the training shards, which
has the same distribution. The first ``span_len`` tokens of a row are used (0 =
the whole row).

Decision on compartment embeddings: the paper's contrastive forward passes no
compartment ids, so its compartment vectors are *off* the contrastive path
while on the LM path. We default to ``compartment_embedding: true`` - the
aligned states are exactly those the LM path computes, so the alignment cannot
be satisfied on inputs the LM never sees - and ``false`` reproduces the paper.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..config import check
from ..errors import ConfigError

_SALT = zlib.crc32(b"infonce-pairs")


@dataclass
class InfoNCEConfig:
    """The contrastive auxiliary loss (defaults: the paper's tau=0.1, lambda=1, n=32, middle layer)."""

    weight: float = 1.0
    temperature: float = 0.1
    pair_batch: int = 32
    layer: int = 0  # 1-based block index; 0 = n_layer // 2
    span_len: int = 0  # tokens per span; 0 = the whole row
    compartment_embedding: bool = True  # False = the paper (no compartment vectors on the contrastive path)
    seed: int = 0

    def validate(self) -> None:
        check(self.weight >= 0, "weight", f"must be >= 0, got {self.weight}")
        check(self.temperature > 0, "temperature", f"must be > 0, got {self.temperature}")
        check(self.pair_batch >= 2, "pair_batch", f"needs >= 2 pairs for negatives, got {self.pair_batch}")
        check(self.layer >= 0, "layer", f"must be >= 0 (0 = middle), got {self.layer}")
        check(self.span_len >= 0, "span_len", f"must be >= 0, got {self.span_len}")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """Symmetric InfoNCE between row-paired embeddings ``a``, ``b`` of shape (n, d)."""
    a = F.normalize(a.float(), dim=-1)
    b = F.normalize(b.float(), dim=-1)
    sim = a @ b.T / temperature
    target = torch.arange(len(a), device=a.device)
    return 0.5 * (F.cross_entropy(sim, target) + F.cross_entropy(sim.T, target))


def mean_pool(h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over positions of (n, T, d) states, counting only ``mask == 1`` positions when given."""
    if mask is None:
        return h.mean(1)
    m = mask.to(h.dtype).unsqueeze(-1)
    return (h * m).sum(1) / m.sum(1).clamp(min=1)


class _Stop(Exception):
    pass


def trunk_states(model, input_ids: torch.Tensor, layer: int, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Hidden states after block ``layer`` (1-based) of a HF decoder, without running later blocks or the head."""
    base = model.base_model
    layers = base.layers
    if not 1 <= layer <= len(layers):
        raise ConfigError("infonce.layer", f"must be in [1, {len(layers)}], got {layer}")
    box = {}

    def grab(module, args, output):
        box["h"] = output[0] if isinstance(output, (tuple, list)) else output
        raise _Stop

    handle = layers[layer - 1].register_forward_hook(grab)
    try:
        base(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    except _Stop:
        pass
    finally:
        handle.remove()
    return box["h"]


def draw_pairs(n: int, n_compartments: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Compartments (i, j), i != j, uniform over ordered pairs, for each of ``n`` spans."""
    i = rng.integers(0, n_compartments, n)
    j = (i + rng.integers(1, n_compartments, n)) % n_compartments
    return i, j


def pair_loss(model, base_ids: torch.Tensor, n_compartments: int, base_vocab: int, cfg: InfoNCEConfig,
              rng: np.random.Generator) -> torch.Tensor:
    """InfoNCE over ``base_ids`` (n, T) rendered in random compartment pairs (offset presentation)."""
    from .model import compartment_embedding_disabled

    if n_compartments < 2:
        raise ConfigError("infonce", "needs n_compartments >= 2")
    i, j = draw_pairs(len(base_ids), n_compartments, rng)
    off_i = torch.as_tensor(i * base_vocab, device=base_ids.device).unsqueeze(1)
    off_j = torch.as_tensor(j * base_vocab, device=base_ids.device).unsqueeze(1)
    layer = cfg.layer or max(1, len(model.base_model.layers) // 2)
    ids = torch.cat([base_ids + off_i, base_ids + off_j])
    if cfg.compartment_embedding:
        h = trunk_states(model, ids, layer)
    else:
        with compartment_embedding_disabled(model):
            h = trunk_states(model, ids, layer)
    pooled = mean_pool(h)
    n = len(base_ids)
    return info_nce(pooled[:n], pooled[n:], cfg.temperature)


def base_rows_from_batch(input_ids: torch.Tensor, n_compartments: int, base_vocab: int, k: int,
                         span_len: int = 0) -> torch.Tensor | None:
    """Up to ``k`` plain rows of a compartmented batch, decoded to base ids; None if fewer than 2."""
    marker = n_compartments * base_vocab
    plain = ~(input_ids == marker).any(1)
    rows = input_ids[plain][:k]
    if span_len:
        rows = rows[:, :span_len]
    if len(rows) < 2:
        return None
    return rows % base_vocab


def _callback_base():
    try:
        from ..train.callbacks.base import Callback
    except ImportError:  # trainer not installed: a plain object with the same hook names
        class Callback:  # type: ignore[no-redef]
            needs_hidden_states = False

            def state_dict(self):
                return {}

    return Callback


class InfoNCECallback(_callback_base()):
    """Trainer callback adding ``weight * InfoNCE`` to the LM loss (spans from the current micro-batch)."""

    needs_hidden_states = False

    def __init__(self, cfg: InfoNCEConfig, n_compartments: int, base_vocab: int):
        self.cfg = cfg
        self.c = n_compartments
        self.V = base_vocab
        self.calls = 0
        self.last: float | None = None

    def extra_loss(self, model, batch, outputs):
        if self.cfg.weight == 0 or self.c < 2:
            return None
        base = base_rows_from_batch(batch["input_ids"], self.c, self.V, self.cfg.pair_batch, self.cfg.span_len)
        if base is None:
            return None
        rng = np.random.default_rng([self.cfg.seed, self.calls, _SALT])
        self.calls += 1
        loss = pair_loss(model, base, self.c, self.V, self.cfg, rng)
        self.last = float(loss.detach())
        return self.cfg.weight * loss

    def on_log(self, trainer, row):
        if row.get("event") == "train" and self.last is not None:
            row.setdefault("infonce", self.last)

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = int(state.get("calls", 0))
