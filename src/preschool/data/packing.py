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
    toks: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    segs: list[np.ndarray] = []
    have = 0
    seg_in_row = 0  # document counter, reset per row when emitting
    doc_no = 0
    for d in docs:
        ids = np.asarray(d.ids, dtype=np.int64)
        m = np.ones(len(ids), np.uint8) if d.loss_mask is None else np.asarray(d.loss_mask, np.uint8)
        if eos_id is not None:
            ids = np.append(ids, eos_id)
            m = np.append(m, m[-1] if len(m) else 1)
        st.documents += 1
        st.tokens_in += len(ids)
        toks.append(ids)
        masks.append(m)
        segs.append(np.full(len(ids), doc_no, np.int64))
        doc_no += 1
        have += len(ids)
        if have >= row_len * chunk_rows:
            block, rest = _cut(toks, masks, segs, row_len)
            toks, masks, segs = rest
            have = sum(len(t) for t in toks)
            st.rows += len(block["tokens"])
            yield block
    if have >= row_len:
        block, rest = _cut(toks, masks, segs, row_len)
        toks = rest[0]
        st.rows += len(block["tokens"])
        yield block
    st.dropped_tail_tokens += sum(len(t) for t in toks)
    del seg_in_row


def _cut(toks, masks, segs, row_len):
    t = np.concatenate(toks)
    m = np.concatenate(masks)
    s = np.concatenate(segs)
    n = len(t) // row_len
    cut = n * row_len
    tt = t[:cut].reshape(n, row_len)
    mm = m[:cut].reshape(n, row_len)
    ss = s[:cut].reshape(n, row_len)
    ss = ss - ss[:, :1]  # document index relative to the row's first document
    rest = ([t[cut:]], [m[cut:]], [s[cut:]]) if cut < len(t) else ([], [], [])
    return {"tokens": tt, "loss_mask": mm, "segments": ss.astype(np.uint16)}, rest


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
