"""Contrastive cross-compartment alignment (InfoNCE) as an auxiliary loss.

Follows Howe & Wingate (vinhowe/compartmentalization ``src/infonce.py``,
``train.py``; spec B.5), "compartment" pair mode. The defaults are the paper's
objective; each departure we used before is an option:

- pairs (``spans: shards``, the paper): every call samples its own
  ``pair_batch`` spans of the training context length from the base-vocabulary
  training rows (random starts in the row stream) and renders all of them in
  one pair of distinct compartments i != j, drawn fresh per call.
  ``spans: batch`` (ours before) uses the plain rows of the current micro-batch
  instead (at most ``pair_batch`` of them; translation rows, which hold
  markers, are skipped) with a fresh pair per span;
- encoder: the LM trunk up to and including block ``layer`` (1-based). The
  default 0 means the reference's ``capture_layer = n_layer // 2``, a 0-based
  index, i.e. 1-based block ``n_layer // 2 + 1`` (the fifth of eight); no LM
  head; hidden states mean-pooled over the span (over non-pad positions when a
  mask is given) and L2-normalised;
- compartment embeddings: the paper's contrastive forward passes no
  compartment ids, so its compartment vectors are off the contrastive path
  while on the LM path (``compartment_embedding: false``, the default).
  ``true`` (ours before) keeps them on, so the aligned states are exactly those
  the LM path computes;
- loss: cosine-similarity matrix / ``temperature``, cross-entropy with the
  diagonal as targets, averaged over both directions (i->j and j->i);
- total loss = LM loss + ``weight`` * InfoNCE (the trainer scales it per
  micro-batch like the LM loss).

``span_len`` takes the first tokens of a span (0 = the whole training
context). Every draw comes from ``default_rng([seed, call, salt])`` and the call
counter is saved with the trainer state, so runs resume exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..data.shards import ShardSet
from ..errors import ConfigError
from ..seeds import INFONCE_PAIRS
from .configs import InfoNCEConfig  # torch-free home of the config (the planner reads it)
from .model import compartment_embedding_disabled

_SALT = INFONCE_PAIRS


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


def default_layer(n_layer: int) -> int:
    """The paper's capture layer as our 1-based block index: the reference's 0-based ``n_layer // 2``."""
    return min(n_layer, n_layer // 2 + 1)


def pair_loss(model, base_ids: torch.Tensor, n_compartments: int, base_vocab: int, cfg: InfoNCEConfig,
              rng: np.random.Generator) -> torch.Tensor:
    """InfoNCE over ``base_ids`` (n, T) rendered in random compartment pairs (offset presentation).

    ``spans: shards`` draws one pair (i, j) for the whole call, as the reference;
    ``spans: batch`` draws one per span.
    """
    if n_compartments < 2:
        raise ConfigError("infonce", "needs n_compartments >= 2")
    i, j = draw_pairs(1 if cfg.spans == "shards" else len(base_ids), n_compartments, rng)
    off_i = torch.as_tensor(i * base_vocab, device=base_ids.device).unsqueeze(1)
    off_j = torch.as_tensor(j * base_vocab, device=base_ids.device).unsqueeze(1)
    layer = cfg.layer or default_layer(len(model.base_model.layers))
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


class SpanPool:
    """Random fixed-length spans of the base-vocabulary training rows, read as one token stream.

    The reference samples its InfoNCE spans from the training shards at random
    starts (``CompartmentOriginalPool``); a span may cross a row boundary, as
    rows are consecutive chunks of the packed stream.
    """

    def __init__(self, shards, span_len: int):
        self.shards = shards if isinstance(shards, ShardSet) else ShardSet(Path(shards), verify="size")
        self.row_len = self.shards.row_len
        self.span_len = span_len or self.row_len - 1  # the training context: rows hold T + 1 tokens
        self.total = len(self.shards) * self.row_len
        if self.total < self.span_len + 1:
            raise ConfigError("infonce.span_len", f"{self.shards.path}: {self.total} tokens, fewer than one "
                                                  f"span of {self.span_len}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, span_len) int64 base ids from starts drawn uniformly over the stream."""
        starts = rng.integers(0, self.total - self.span_len, n)
        out = np.empty((n, self.span_len), dtype=np.int64)
        for k, s in enumerate(starts):
            first, last = int(s) // self.row_len, (int(s) + self.span_len - 1) // self.row_len
            stream = self.shards.rows(range(first, last + 1)).reshape(-1)
            off = int(s) - first * self.row_len
            out[k] = stream[off:off + self.span_len]
        return out


def _is_sharded(model) -> bool:
    try:
        from ..train.parallel import is_sharded
    except ImportError:  # trainer not installed: nothing is sharded
        return False
    return is_sharded(model)


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
    """Trainer callback adding ``weight * InfoNCE`` to the LM loss.

    ``train_shards`` (the base-vocabulary training rows) is required for
    ``spans: shards``; ``spans: batch`` reads the current micro-batch.
    """

    needs_hidden_states = False

    def __init__(self, cfg: InfoNCEConfig, n_compartments: int, base_vocab: int, train_shards=None):
        self.cfg = cfg
        self.c = n_compartments
        self.V = base_vocab
        self.calls = 0
        self.last: float | None = None
        self.pool = None
        if cfg.spans == "shards":
            if train_shards is None:
                raise ConfigError("infonce.spans", "'shards' needs the base training rows (train_shards)")
            self.pool = SpanPool(train_shards, cfg.span_len)

    def extra_loss(self, model, batch, outputs):
        if self.cfg.weight == 0 or self.c < 2:
            return None
        rng = np.random.default_rng([self.cfg.seed, self.calls, _SALT])
        weight = self.cfg.weight
        if self.pool is not None:
            device = batch["input_ids"].device
            base = torch.as_tensor(self.pool.sample(self.cfg.pair_batch, rng), device=device)
        else:
            base = base_rows_from_batch(batch["input_ids"], self.c, self.V, self.cfg.pair_batch, self.cfg.span_len)
            if base is None:
                if not _is_sharded(model):
                    return None
                # under FSDP the trunk forward is a collective every rank must make: run it on a stand-in, weight 0
                base, weight = torch.zeros((2, batch["input_ids"].shape[1]), dtype=torch.long,
                                           device=batch["input_ids"].device), 0.0
        if weight:  # a stand-in draws no pairs of the run's sequence
            self.calls += 1
        loss = pair_loss(model, base, self.c, self.V, self.cfg, rng)
        if weight:
            self.last = float(loss.detach())
        return weight * loss

    def on_log(self, trainer, row):
        if row.get("event") == "train" and self.last is not None:
            row.setdefault("infonce", self.last)

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = int(state.get("calls", 0))
