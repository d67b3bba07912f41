"""Prefix-tree scoring: every distinct token prefix goes through the model once.

Minimal-pair sets are highly redundant at the token level: a pair's two
sentences share their beginning, and a BLiMP paradigm's 2,000 sentences come
from a few templates. Sorting all sentences and merging common prefixes into a
trie cuts the positions the model must run by 1.77x on the full BLiMP (1.40M
tokens -> 0.79M trie nodes with a 4k BPE), and the LM head -- the costliest
layer of a small model -- is only needed at nodes that have a child.

How one forward pass is laid out:

* each batch row holds the trie of a run of lexicographically consecutive
  sentences, one slot per trie node; ``position_ids`` is the node's depth, and a
  4D attention mask lets a node see exactly its ancestors and itself, so every
  node computes the same hidden state as the same token inside its own
  sentence (up to float summation order, ~1e-6 nats);
* within a row, slots are ordered [padding, leaves, internal nodes], so the
  logits needed are the last K slots of every row and the HF
  ``logits_to_keep=K`` argument skips the rest of the LM head;
* a sentence's log-prob is the sum of log p(child token | parent) along its
  path, accumulated in float64.

The layout needs a model that honours a custom 4D float mask and
``position_ids`` -- the HF decoder families listed in ``TREE_MODEL_TYPES`` with
eager or SDPA attention. ``supports_prefix_tree`` says whether a model
qualifies; other models are scored by the plain padded batches in
``minimal_pairs.score_token_ids``.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

# HF model families whose forward passes a custom 4D mask and position_ids through unchanged
# (verified for llama and qwen2 by tests/evals/test_prefix_tree.py; the others share their code).
TREE_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral"})
TREE_ATTENTION = frozenset({"eager", "sdpa"})


def supports_prefix_tree(model) -> bool:
    """True when ``model`` is an HF causal LM the tree layout is known to be exact for."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) not in TREE_MODEL_TYPES:
        return False
    if getattr(cfg, "_attn_implementation", "eager") not in TREE_ATTENTION:
        return False
    return "logits_to_keep" in inspect.signature(model.forward).parameters


@dataclass
class TreeRow:
    """The trie of a run of sorted sequences: one node per distinct prefix.

    ``parent[i]`` is -1 for a root (a first token); ``ends`` maps each sequence
    index to the node of its last token.
    """

    tokens: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    ends: list[tuple[int, int]] = field(default_factory=list)


def build_rows(seqs: Sequence[Sequence[int]], row_tokens: int) -> list[TreeRow]:
    """Tries of consecutive runs of the sorted ``seqs``, each of at most ``row_tokens`` nodes.

    A sequence longer than ``row_tokens`` gets a row of its own. Sequences of
    fewer than 2 tokens have nothing to score and are left out.
    """
    order = sorted((i for i in range(len(seqs)) if len(seqs[i]) >= 2), key=lambda i: list(seqs[i]))
    rows: list[TreeRow] = []
    row, path, prev = TreeRow(), [], ()
    for i in order:
        s = seqs[i]
        lcp = 0
        while lcp < min(len(s), len(prev)) and s[lcp] == prev[lcp]:
            lcp += 1
        if row.tokens and len(row.tokens) + len(s) - lcp > row_tokens:
            rows.append(row)
            row, path, lcp = TreeRow(), [], 0
        del path[lcp:]
        for d in range(lcp, len(s)):
            row.tokens.append(int(s[d]))
            row.parent.append(path[d - 1] if d else -1)
            row.depth.append(d)
            path.append(len(row.tokens) - 1)
        row.ends.append((i, path[len(s) - 1]))
        prev = s
    if row.tokens:
        rows.append(row)
    return rows


def _row_layout(row: TreeRow) -> tuple[np.ndarray, np.ndarray]:
    """(slot order of the nodes: leaves then internal nodes, number of internal nodes)."""
    n = len(row.tokens)
    internal = np.zeros(n, dtype=bool)
    par = np.asarray(row.parent)
    internal[par[par >= 0]] = True
    order = np.concatenate([np.flatnonzero(~internal), np.flatnonzero(internal)])
    return order, int(internal.sum())


def _ancestors(row: TreeRow) -> np.ndarray:
    """anc[i, j] = node j is node i or one of its ancestors (nodes are stored parents first)."""
    n = len(row.tokens)
    anc = np.zeros((n, n), dtype=bool)
    for i, p in enumerate(row.parent):
        if p >= 0:
            anc[i] = anc[p]
        anc[i, i] = True
    return anc


@dataclass(frozen=True)
class TreeBatch:
    """One forward pass of the tree layout, as arrays: what :func:`score_token_ids_tree` feeds the model
    (``ids``, ``pos``, the boolean mask of who sees whom, ``keep`` logits per row) and reads back (one edge per
    non-root node: row ``er``, kept slot ``ek``, token ``et``; ``owner``/``ends`` per row to sum paths)."""

    ids: np.ndarray
    pos: np.ndarray
    see_bits: np.ndarray  # the (rows, width, width) boolean mask, packed 8 to a byte along its last axis
    keep: int
    er: np.ndarray
    ek: np.ndarray
    et: np.ndarray
    rows: tuple[tuple[TreeRow, np.ndarray], ...]  # (row, its non-root nodes in storage order)


@functools.lru_cache(maxsize=2)
def tree_batches(seqs: tuple[tuple[int, ...], ...], batch_size: int, row_tokens: int,
                 pad_id: int) -> tuple[TreeBatch, ...]:
    """The forward passes that score ``seqs``: a pure function of its arguments, so it is built once for
    every checkpoint scored on the same sentences with the same tokenizer (a run's sweep). The masks are
    kept as bits: all of BLiMP's (0.79M trie nodes in rows of 128) take ~13 MB."""
    rows = build_rows(seqs, row_tokens)
    out, b = [], 0
    while b < len(rows):
        group, nseq = [], 0
        while b < len(rows) and (not group or nseq + len(rows[b].ends) <= batch_size):
            group.append(rows[b])
            nseq += len(rows[b].ends)
            b += 1
        layouts = [_row_layout(r) for r in group]
        width = max(len(r.tokens) for r in group)
        keep = max(1, max(k for _, k in layouts))
        ids = np.full((len(group), width), pad_id, dtype=np.int64)
        pos = np.zeros((len(group), width), dtype=np.int64)
        see = np.zeros((len(group), width, width), dtype=bool)
        see[:, np.arange(width), np.arange(width)] = True  # padding slots attend to themselves only
        er, ek, et, owned = [], [], [], []
        for r, (row, (order, _)) in enumerate(zip(group, layouts)):
            m = len(order)
            slot = np.empty(m, dtype=np.int64)
            slot[order] = np.arange(width - m, width)  # left padding, internal nodes last
            ids[r, slot] = row.tokens
            pos[r, slot] = row.depth
            anc = _ancestors(row)
            see[r, width - m:, width - m:] = anc[np.ix_(order, order)]
            # one edge per non-root node: log p(node token | parent node)
            par = np.asarray(row.parent)
            child = np.flatnonzero(par >= 0)
            er.append(np.full(len(child), r))
            ek.append(slot[par[child]] - (width - keep))
            et.append(np.asarray(row.tokens)[child])
            owned.append((row, child))
        out.append(TreeBatch(ids, pos, np.packbits(see, axis=-1), keep, np.concatenate(er), np.concatenate(ek), np.concatenate(et),
                             tuple(owned)))
    return tuple(out)


def score_token_ids_tree(model, seqs: Sequence[Sequence[int]], batch_size: int = 64, row_tokens: int = 128,
                         pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Same contract as ``minimal_pairs.score_token_ids``, computed over a prefix tree.

    ``batch_size`` bounds the sequences per forward pass (as in the plain
    scorer); ``row_tokens`` bounds the trie nodes per batch row (attention
    cost grows with its square).
    """
    import torch

    n = len(seqs)
    logp = np.zeros(n, dtype=np.float64)
    counts = np.array([max(len(s) - 1, 0) for s in seqs], dtype=np.int64)
    batches = tree_batches(tuple(tuple(int(t) for t in s) for s in seqs), batch_size, row_tokens, pad_id)
    first = next(model.parameters())
    device, dtype = first.device, first.dtype
    if not dtype.is_floating_point:
        dtype = torch.float32
    neg = torch.finfo(dtype).min  # an additive mask in the model's dtype: SDPA rejects a mismatched float mask
    with torch.inference_mode():
        for tb in batches:
            width = tb.ids.shape[1]
            see = np.unpackbits(tb.see_bits, axis=-1, count=width).astype(bool)
            mask = torch.zeros((len(tb.ids), 1, width, width), dtype=dtype)
            mask.masked_fill_(~torch.from_numpy(see)[:, None], neg)
            out = model(input_ids=torch.from_numpy(tb.ids).to(device), attention_mask=mask.to(device),
                        position_ids=torch.from_numpy(tb.pos).to(device), logits_to_keep=tb.keep)
            logits = (out.logits if hasattr(out, "logits") else out).float()  # (B, keep, V), fp32 always
            lse = torch.logsumexp(logits, dim=-1)
            er_t, ek_t, et_t = (torch.from_numpy(a).to(device) for a in (tb.er, tb.ek, tb.et))
            edge = (logits[er_t, ek_t, et_t] - lse[er_t, ek_t]).double().cpu().numpy()
            at = 0
            for row, child in tb.rows:
                cum = np.zeros(len(row.tokens), dtype=np.float64)
                e = edge[at:at + len(child)]
                at += len(child)
                # parents precede children, so one pass in storage order accumulates root-to-node sums
                for c, v in zip(child.tolist(), e.tolist()):
                    cum[c] = cum[row.parent[c]] + v
                for i, node in row.ends:
                    logp[i] = cum[node]
    return logp, counts
