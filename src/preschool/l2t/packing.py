"""Packing L2T samples (and raw documents) into fixed-length shard rows.

Two packers, selected by name:

- ``greedy`` (the reference's): samples are taken in batches of ``batch``
  (1000 = the ``datasets.map`` batch the reference packs in); within a batch
  they are sorted longest first and each goes into the currently least-filled
  row if it fits, else into a new row. The batch's rows are shuffled (seeded by
  ``(seed, batch number)``; the reference's shuffle is unseeded) and padded with
  ``pad_id`` (EOS). Samples never straddle rows.
- ``concat``: documents concatenated in order and cut every ``row_len`` tokens
  (the trailing partial row is dropped and counted), as for raw text; this is
  :class:`preschool.data.packing.ConcatPacker`, shared with every other dataset.

Loss: every token, padding included (``loss_on_padding=True``), is what the
reference trains on; with ``loss_on_padding=False`` padding gets 0. An
answer-only loss comes from the documents' own masks (built by the caller).

``segments`` numbers the samples within a row (0, 1, ...); padding is its own
last segment. A trainer with ``attention_reset_between_docs`` uses it to stop
attention (and reset positions) between packed samples; the reference does not
reset attention.
"""

from __future__ import annotations

import heapq
from typing import Iterable, Iterator

import numpy as np

from ..data.packing import Doc, PackStats
from ..seeds import L2T_PACK

_SALT = L2T_PACK


def _mask(d: Doc) -> np.ndarray:
    return np.ones(len(d.ids), np.uint8) if d.loss_mask is None else np.asarray(d.loss_mask, np.uint8)


def greedy_rows(samples: list[Doc], row_len: int) -> list[list[int]]:
    """Reference bin packing of one batch: indices of the samples in each row.

    Longest first (ties keep input order); each sample goes into the least-filled
    row if it fits there, otherwise a new row is opened.
    """
    order = sorted(range(len(samples)), key=lambda i: (-len(samples[i].ids), i))
    rows: list[list[int]] = []
    heap: list[tuple[int, int]] = []  # (fill, row id)
    for i in order:
        n = len(samples[i].ids)
        if heap and heap[0][0] + n <= row_len:
            fill, r = heapq.heappop(heap)
            rows[r].append(i)
            heapq.heappush(heap, (fill + n, r))
        else:
            rows.append([i])
            heapq.heappush(heap, (n, len(rows) - 1))
    return rows


def pack_greedy(
    samples: Iterable[Doc], row_len: int, pad_id: int, seed: int = 0, batch: int = 1000,
    loss_on_padding: bool = True, counts: PackStats | None = None, first_batch: int = 0,
) -> Iterator[dict[str, np.ndarray]]:
    """Yield blocks ``{"tokens", "loss_mask", "segments"}`` (one per sample batch).

    Batches are numbered from ``first_batch`` (their row shuffle is seeded by it),
    so a stream packed in several calls matches one call over the whole stream.
    """
    c = counts if counts is not None else PackStats()
    buf: list[Doc] = []
    bno = first_batch

    def flush(buf: list[Doc], bno: int) -> dict[str, np.ndarray]:
        rows = greedy_rows(buf, row_len)
        perm = np.random.default_rng([seed, bno, _SALT]).permutation(len(rows))
        tok = np.full((len(rows), row_len), pad_id, np.int64)
        msk = np.full((len(rows), row_len), 1 if loss_on_padding else 0, np.uint8)
        seg = np.zeros((len(rows), row_len), np.uint16)
        for out_r, r in enumerate(perm):
            at = 0
            for j, i in enumerate(rows[int(r)]):
                d = buf[i]
                n = len(d.ids)
                tok[out_r, at:at + n] = d.ids
                msk[out_r, at:at + n] = _mask(d)
                seg[out_r, at:at + n] = j
                at += n
            seg[out_r, at:] = len(rows[int(r)])
            c.padded_tokens += row_len - at
        c.rows += len(rows)
        return {"tokens": tok, "loss_mask": msk, "segments": seg}

    for d in samples:
        if len(d.ids) > row_len:
            c.dropped_too_long += 1
            continue
        c.documents += 1
        c.tokens_in += len(d.ids)
        buf.append(d)
        if len(buf) >= batch:
            yield flush(buf, bno)
            buf, bno = [], bno + 1
    if buf:
        yield flush(buf, bno)
