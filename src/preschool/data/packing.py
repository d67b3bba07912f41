"""Pack tokenized documents into fixed-length rows.

Two packers, selectable by name:

- ``concat``: concatenate documents (each followed by EOS) and cut the stream
  into rows of ``row_len``; the trailing partial row is dropped and counted.
  This is how verify-ppt / nanotron pack natural text (no document masking).
- ``pad``: one document per row, truncated to ``row_len`` or right-padded with
  ``pad_id`` (padding carries no loss). Used by row-per-example tasks (Stack).

A document may carry a per-token loss mask (1 = predict this token); EOS
inherits the mask of the document's last token. Rows record a ``segments``
array (document index within the row) so a model can reset attention between
packed documents when asked to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Literal

import numpy as np

PackMode = Literal["concat", "pad"]


@dataclass
class PackStats:
    documents: int = 0
    tokens_in: int = 0
    rows: int = 0
    dropped_tail_tokens: int = 0
    truncated_documents: int = 0
    dropped_too_long: int = 0  # documents longer than a row, skipped (L2T greedy packer)
    padded_tokens: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class Doc:
    ids: np.ndarray
    loss_mask: np.ndarray | None = None


def pack(
    docs: Iterable[Doc],
    row_len: int,
    eos_id: int | None,
    mode: PackMode = "concat",
    pad_id: int = 0,
    stats: PackStats | None = None,
    chunk_rows: int = 1024,
) -> Iterator[dict[str, np.ndarray]]:
    """Yield blocks ``{"tokens", "loss_mask", "segments"}`` of shape (n, row_len).

    Deterministic: output depends only on the document order.
    """
    st = stats if stats is not None else PackStats()
    if mode == "pad":
        yield from _pack_pad(docs, row_len, eos_id, pad_id, st, chunk_rows)
        return
    packer = ConcatPacker(row_len, eos_id, st, flush_tokens=row_len * chunk_rows)
    for d in docs:
        block = packer.add(d)
        if block is not None:
            yield block
    block = packer.finish()
    if block is not None:
        yield block


class ConcatPacker:
    """Stateful concatenate-and-chunk packer: ``add`` documents, get back full rows.

    Rows are cut whenever at least ``flush_tokens`` tokens are buffered
    (``flush_tokens=row_len`` cuts as soon as one row is full); ``finish`` cuts
    the remaining full rows and counts the partial tail as dropped.
    """

    def __init__(self, row_len: int, eos_id: int | None, stats: PackStats | None = None, flush_tokens: int | None = None):
        self.row_len = row_len
        self.eos_id = eos_id
        self.stats = stats if stats is not None else PackStats()
        self.flush_tokens = flush_tokens or row_len
        self._toks: list[np.ndarray] = []
        self._masks: list[np.ndarray] = []
        self._segs: list[np.ndarray] = []
        self._have = 0
        self._doc_no = 0

    def add(self, d: Doc) -> dict[str, np.ndarray] | None:
        ids = np.asarray(d.ids, dtype=np.int64)
        m = np.ones(len(ids), np.uint8) if d.loss_mask is None else np.asarray(d.loss_mask, np.uint8)
        if self.eos_id is not None:
            ids = np.append(ids, self.eos_id)
            m = np.append(m, m[-1] if len(m) else 1)
        self.stats.documents += 1
        self.stats.tokens_in += len(ids)
        self._toks.append(ids)
        self._masks.append(m)
        self._segs.append(np.full(len(ids), self._doc_no, np.int64))
        self._doc_no += 1
        self._have += len(ids)
        if self._have >= self.flush_tokens:
            return self._cut()
        return None

    def finish(self) -> dict[str, np.ndarray] | None:
        block = self._cut() if self._have >= self.row_len else None
        self.stats.dropped_tail_tokens += self._have
        return block

    def _cut(self) -> dict[str, np.ndarray]:
        t = np.concatenate(self._toks)
        m = np.concatenate(self._masks)
        s = np.concatenate(self._segs)
        n = len(t) // self.row_len
        cut = n * self.row_len
        ss = s[:cut].reshape(n, self.row_len)
        ss = ss - ss[:, :1]  # document index relative to the row's first document
        self._toks, self._masks, self._segs = ([t[cut:]], [m[cut:]], [s[cut:]]) if cut < len(t) else ([], [], [])
        self._have = len(t) - cut
        self.stats.rows += n
        return {"tokens": t[:cut].reshape(n, self.row_len), "loss_mask": m[:cut].reshape(n, self.row_len),
                "segments": ss.astype(np.uint16)}


def _pack_pad(docs, row_len, eos_id, pad_id, st, chunk_rows):
    rows_t, rows_m = [], []
    for d in docs:
        ids = np.asarray(d.ids, dtype=np.int64)
        m = np.ones(len(ids), np.uint8) if d.loss_mask is None else np.asarray(d.loss_mask, np.uint8)
        if eos_id is not None:
            ids = np.append(ids, eos_id)
            m = np.append(m, m[-1] if len(m) else 1)
        st.documents += 1
        st.tokens_in += len(ids)
        if len(ids) > row_len:
            st.truncated_documents += 1
            ids, m = ids[:row_len], m[:row_len]
        pad = row_len - len(ids)
        st.padded_tokens += pad
        rows_t.append(np.concatenate([ids, np.full(pad, pad_id, np.int64)]))
        rows_m.append(np.concatenate([m, np.zeros(pad, np.uint8)]))
        if len(rows_t) >= chunk_rows:
            st.rows += len(rows_t)
            yield _pad_block(rows_t, rows_m)
            rows_t, rows_m = [], []
    if rows_t:
        st.rows += len(rows_t)
        yield _pad_block(rows_t, rows_m)


def _pad_block(rows_t, rows_m):
    t = np.stack(rows_t)
    return {"tokens": t, "loss_mask": np.stack(rows_m), "segments": np.zeros(t.shape, np.uint16)}
