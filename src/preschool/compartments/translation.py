"""Translation rows: one text span shown in two compartments, marked by TRANSLATION tokens.

Follows Howe & Wingate (vinhowe/compartmentalization ``src/data.py``; spec B.4).
Two row formats, chosen by ``translation.row_format``. Both fill a row of
``row_len = T + 1`` tokens (T next-token predictions); the reference builds
T inputs and ignores the last prediction, which is our final slot, always a
TRANS padding token that is never trained.

**standard** (the default, and what the paper's configs use), ``h = T // 2``::

    position   0        1 .. h-1            h        h+1 .. 2h-1          2h .. T
    token      TRANS    span in comp. i     TRANS    same span in comp. j  TRANS (padding)

The span is ``h - 1`` base tokens. Loss positions (``loss_mask[p] == 1`` means
the prediction *of token p* is trained, as everywhere in preschool):

- ``loss_on="all"`` (the paper): every p in ``1 .. 2h-1`` - the source half,
  the second marker and the target half. The paper's "last position is
  ignored" is our padding slot ``2h`` (and, for odd T, ``2h+1``): never trained.
- ``loss_on="target"`` (our option): only ``h+1 .. 2h-1``, the translation itself.

**interleaved** (the reference's ``translation_mode = "interleaved"``, chunk
``n = chunk_size``, default 4; reference ``UniformCompartmentDataLoader.
_fill_translation_rows_interleaved``): one TRANS at position 0, then the T - 1
content positions ``1 .. T-1`` alternate chunk k of the span in compartment i
with the *same* chunk k in compartment j::

    position   0      1..n        n+1..2n     2n+1..3n      3n+1..4n     ...   T
    token      TRANS  s[0:n] in i s[0:n] in j s[n:2n] in i  s[n:2n] in j ...   TRANS (padding)

With ``q, r = divmod(T - 1, 2n)`` there are q full chunk pairs; the remaining r
positions hold a last source chunk of ``a = min(r, n)`` tokens ``s[qn:qn+a]``
and then its first ``r - a`` tokens in compartment j (a prefix of that chunk:
the row is cut at T, as the reference does). The span is ``q*n + a`` base
tokens. ``loss_on="all"`` (the reference) trains every content position
``1 .. T-1`` - source chunks included, the lone TRANS is never a target;
``loss_on="target"`` (ours) trains only the compartment-j chunks.

Compartment ids per position (the reference's ``cids``) are what
:func:`row_compartments` returns, and are what the model recovers from the ids
themselves (``compartments.model``: a marker takes the compartment of the token
after it): standard - i for ``0 .. h-1``, j from ``h``; interleaved - i for the
TRANS and the source chunks, j for the target chunks. Rows carry no randomness
of their own: which rows are translation rows, and which (i, j) pairs, is the
plan's job (``compartments.plan``, seeded; ``absolute`` / ``compartment`` ratio
conventions), and the span is the first ``span_length`` tokens of the row's
source row, so a row is a function of (seed, index).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from ..config import check
from ..errors import DataError
from .presentation import Presentation

ROW_FORMATS = ("standard", "interleaved")
LOSS_ON = ("all", "target")


@dataclass
class TranslationConfig:
    """Translation rows: fraction of rows, ratio convention, row format and where the loss goes.

    ``mode`` is the *ratio* convention (the reference's ``translation_ratio_mode``);
    the row layout is ``row_format`` (the reference's ``translation_mode``), with
    ``chunk_size`` n-gram chunks for ``interleaved`` (ignored for ``standard``).
    """

    fraction: float = 0.0
    mode: Literal["absolute", "compartment"] = "absolute"
    loss_on: Literal["all", "target"] = "all"
    row_format: Literal["standard", "interleaved"] = "standard"
    chunk_size: int = 4

    def validate(self) -> None:
        check(self.fraction >= 0, "fraction", f"must be >= 0, got {self.fraction}")
        check(self.row_format in ROW_FORMATS, "row_format",
              f"must be one of {list(ROW_FORMATS)}, got {self.row_format!r}")
        check(isinstance(self.chunk_size, int) and not isinstance(self.chunk_size, bool) and self.chunk_size >= 1,
              "chunk_size", f"must be an integer >= 1, got {self.chunk_size!r}")

    def record(self) -> dict:
        """Plain dict for manifests and cache keys; a standard config records no interleaving fields,
        so its record is the same as before ``row_format`` existed."""
        d = {"fraction": self.fraction, "mode": self.mode, "loss_on": self.loss_on}
        if self.row_format != "standard":
            d.update(row_format=self.row_format, chunk_size=self.chunk_size)
        return d


def _check_format(row_format: str, chunk_size: int) -> None:
    if row_format not in ROW_FORMATS:
        raise DataError(f"row_format must be one of {list(ROW_FORMATS)}, got {row_format!r}")
    if row_format == "interleaved" and chunk_size < 1:
        raise DataError(f"chunk_size must be >= 1, got {chunk_size}")


def min_row_len(row_format: str = "standard", chunk_size: int = 4) -> int:
    """Shortest row that holds a translation row (at least one token in each compartment)."""
    _check_format(row_format, chunk_size)
    return 5 if row_format == "standard" else chunk_size + 3


def span_length(row_len: int, row_format: str = "standard", chunk_size: int = 4) -> int:
    """Base tokens per translated span for a row of ``row_len`` tokens."""
    _check_format(row_format, chunk_size)
    if row_format == "standard":
        return (row_len - 1) // 2 - 1
    q, r = divmod(max(row_len - 2, 0), 2 * chunk_size)
    return q * chunk_size + min(r, chunk_size)


@lru_cache(maxsize=64)
def _interleaved(row_len: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple]:
    """(src_pos, src_idx, dst_pos, dst_idx, chunks) for an interleaved row: row position and span index
    of every compartment-i / compartment-j token, and the chunks as (side, (row a, b), (span a, b))."""
    content = row_len - 2  # positions 1 .. T-1
    src_pos, src_idx, dst_pos, dst_idx, chunks = [], [], [], [], []
    pos, k = 1, 0
    while pos < 1 + content:
        a = min(n, 1 + content - pos)  # source chunk k (cut at the end of the row)
        chunks.append(("source", (pos, pos + a), (k * n, k * n + a)))
        src_pos += range(pos, pos + a)
        src_idx += range(k * n, k * n + a)
        pos += a
        b = min(a, 1 + content - pos)  # the same chunk in compartment j (a prefix if cut)
        if b > 0:
            chunks.append(("target", (pos, pos + b), (k * n, k * n + b)))
            dst_pos += range(pos, pos + b)
            dst_idx += range(k * n, k * n + b)
            pos += b
        k += 1
    arrs = [np.asarray(x, dtype=np.int64) for x in (src_pos, src_idx, dst_pos, dst_idx)]
    for x in arrs:
        x.setflags(write=False)
    return arrs[0], arrs[1], arrs[2], arrs[3], tuple(chunks)


def layout(row_len: int, row_format: str = "standard", chunk_size: int = 4) -> dict:
    """Positions of the layout (for docs and tests).

    standard: ``h``, ``marker_positions`` [0, h], ``source``/``target``/``padding`` as
    half-open (start, end) ranges. interleaved: ``marker_positions`` [0], ``chunks`` - a list of
    ``(side, (row_start, row_end), (span_start, span_end))`` with side ``"source"`` (compartment i)
    or ``"target"`` (compartment j) in row order, ``source_positions`` / ``target_positions``, and
    ``padding``.
    """
    _check_format(row_format, chunk_size)
    T = row_len - 1
    if row_format == "standard":
        h = T // 2
        return {"h": h, "marker_positions": [0, h], "source": (1, h), "target": (h + 1, 2 * h),
                "padding": (2 * h, row_len)}
    sp, _, dp, _, chunks = _interleaved(row_len, chunk_size)
    return {"marker_positions": [0], "chunks": list(chunks), "source_positions": sp.tolist(),
            "target_positions": dp.tolist(), "padding": (T, row_len), "span_length": span_length(
                row_len, row_format, chunk_size)}


def row_compartments(row_len: int, src: int, dst: int, row_format: str = "standard",
                     chunk_size: int = 4) -> np.ndarray:
    """Compartment of every position of a translation row (the reference's ``cids``); the padding
    slot, which is never an input, takes the compartment of the position before it."""
    _check_format(row_format, chunk_size)
    out = np.empty(row_len, np.int64)
    if row_format == "standard":
        h = (row_len - 1) // 2
        out[:h] = src
        out[h:] = dst
        return out
    _, _, dp, _, _ = _interleaved(row_len, chunk_size)
    out[:] = src
    out[dp] = dst
    out[row_len - 1] = out[row_len - 2]
    return out


def translation_row(span: np.ndarray, pres: Presentation, src: int, dst: int, row_len: int,
                    loss_on: str = "all", row_format: str = "standard",
                    chunk_size: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """One translation row of ``row_len`` tokens and its loss mask (see module docstring)."""
    _check_format(row_format, chunk_size)
    m = span_length(row_len, row_format, chunk_size)
    if row_len < min_row_len(row_format, chunk_size):
        need = min_row_len(row_format, chunk_size)
        what = "a translation row" if row_format == "standard" else \
            f"an interleaved translation row with chunk_size {chunk_size}"
        raise DataError(f"row_len {row_len} too short for {what} (needs >= {need})")
    span = np.asarray(span, dtype=np.int64)
    if span.shape != (m,):
        raise DataError(f"translation span must have {m} tokens for row_len {row_len}, got {span.shape}")
    if src == dst:
        raise DataError(f"translation row needs two different compartments, got {src} -> {dst}")
    if loss_on not in LOSS_ON:
        raise DataError(f"loss_on must be 'all' or 'target', got {loss_on!r}")
    tr = pres.translation_id
    toks = np.full(row_len, tr, dtype=np.int64)
    mask = np.zeros(row_len, dtype=np.uint8)
    if row_format == "standard":
        h = m + 1
        toks[1:h] = pres.encode(span, src)
        toks[h + 1:2 * h] = pres.encode(span, dst)
        if loss_on == "all":
            mask[1:2 * h] = 1
        else:
            mask[h + 1:2 * h] = 1
        return toks, mask
    sp, si, dp, di, _ = _interleaved(row_len, chunk_size)
    toks[sp] = pres.encode(span[si], src)
    toks[dp] = pres.encode(span[di], dst)
    if loss_on == "all":
        mask[1:row_len - 1] = 1
    else:
        mask[dp] = 1
    return toks, mask


def translation_rows(spans: np.ndarray, pres: Presentation, src: np.ndarray, dst: np.ndarray, row_len: int,
                     loss_on: str = "all", row_format: str = "standard",
                     chunk_size: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """:func:`translation_row` over ``spans`` of shape (n, span_length)."""
    n = len(spans)
    toks = np.empty((n, row_len), np.int64)
    masks = np.empty((n, row_len), np.uint8)
    for r in range(n):
        toks[r], masks[r] = translation_row(spans[r], pres, int(src[r]), int(dst[r]), row_len, loss_on,
                                            row_format, chunk_size)
    return toks, masks
