"""Stream a generator's items into a token shard set (bounded memory, any worker count).

Items are produced in index order in fixed-size chunks; chunks may be computed
by a process pool but are consumed in order, so 1 worker and N workers write
identical bytes. Generation stops once ``n_rows`` rows are full.
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

import numpy as np

from ..data.packing import Doc, PackStats, pack
from ..data.shards import ShardWriter
from ..io import code_version
from .base import Generator, render_text

Render = Literal["text", "reserved"]


@dataclass
class SymbolEncoder:
    """Maps an item's symbols (and loss mask) to token ids of the run's vocabulary."""

    render: Render
    tokenizer_json: str | None = None  # text mode: the tokenizer, serialised (picklable)
    reserved_offset: int = 0  # reserved mode: id of symbol 0

    def __post_init__(self):
        self._tok = None

    def _tokenizer(self):
        if self._tok is None:
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_str(self.tokenizer_json)
        return self._tok

    def encode(self, item) -> Doc:
        if self.render == "reserved":
            ids = item.symbols.astype(np.int64) + self.reserved_offset
            return Doc(ids, item.loss_mask)
        text = render_text(item.symbols)
        enc = self._tokenizer().encode(text, add_special_tokens=False)
        ids = np.asarray(enc.ids, np.int64)
        if item.loss_mask is None:
            return Doc(ids, None)
        # A token inherits the mask of the symbol its text starts in (symbol i spans
        # the characters of its digits plus the following space).
        starts = np.cumsum([0] + [len(str(s)) + 1 for s in item.symbols.tolist()])[:-1]
        tok_starts = np.asarray([o[0] for o in enc.offsets], np.int64)
        sym = np.searchsorted(starts, tok_starts, side="right") - 1
        return Doc(ids, np.asarray(item.loss_mask, np.uint8)[np.clip(sym, 0, len(starts) - 1)])


_WORKER: tuple[Generator, SymbolEncoder] | None = None


def _init(gen: Generator, enc: SymbolEncoder) -> None:
    global _WORKER
    _WORKER = (gen, enc)


def _chunk(bounds: tuple[int, int]) -> list[Doc]:
    gen, enc = _WORKER  # type: ignore[misc]
    return [enc.encode(gen.item(i)) for i in range(*bounds)]


def iter_docs(gen: Generator, enc: SymbolEncoder, workers: int = 1, chunk: int = 64, start: int = 0) -> Iterator[Doc]:
    """Encoded documents for item indices start, start+1, ... (infinite, in order)."""
    def bounds():
        i = start
        while True:
            yield (i, i + chunk)
            i += chunk

    if workers <= 1:
        _init(gen, enc)
        for b in bounds():
            yield from _chunk(b)
        return
    ctx = mp.get_context("fork" if hasattr(mp, "get_context") else None)
    with ctx.Pool(workers, initializer=_init, initargs=(gen, enc)) as pool:
        for docs in pool.imap(_chunk, bounds(), chunksize=1):
            yield from docs


def write_generator_shards(
    gen: Generator,
    enc: SymbolEncoder,
    out: str | Path,
    n_rows: int,
    row_len: int,
    vocab_size: int,
    eos_id: int | None,
    workers: int = 1,
    pack_mode: str = "concat",
    pad_id: int = 0,
    progress: bool = False,
    manifest_extra: dict | None = None,
) -> dict:
    """Generate items until ``n_rows`` rows of ``row_len`` tokens are full; write shards."""
    from ..config import to_dict

    stats = PackStats()
    has_mask = True
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n_rows * row_len, unit="tok", unit_scale=True, desc=f"generate {gen.registry_name}")
    docs = iter_docs(gen, enc, workers)
    with ShardWriter(out, row_len, vocab_size, arrays=["loss_mask", "segments"]) as w:
        written = 0
        for block in pack(docs, row_len, eos_id, mode=pack_mode, pad_id=pad_id, stats=stats):
            take = min(len(block["tokens"]), n_rows - written)
            w.add_rows(block["tokens"][:take], loss_mask=block["loss_mask"][:take], segments=block["segments"][:take])
            written += take
            if bar:
                bar.update(take * row_len)
            if written >= n_rows:
                break
        docs.close()
        if bar:
            bar.close()
        return w.close(
            source={"kind": "generator", "name": gen.registry_name, "config": to_dict(gen.cfg)},
            render=enc.render,
            documents_used=stats.documents,
            code_version=code_version(),
            **(manifest_extra or {}),
        )
    del has_mask
