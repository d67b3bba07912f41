"""Stream a generator's items into a token shard set (bounded memory, any worker count).

Items are produced in index order in fixed-size chunks; chunks may be computed
by a process pool but are consumed in order, so 1 worker and N workers write
identical bytes. Generation stops once ``n_rows`` rows are full.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..config import to_dict
from ..data.engine import (
    DEFAULT_UNIT_TOKENS, UnitJob, adopt_units, job_key, link_shards, rows_in_order, run_units, unit_path, work_dir,
)
from ..data.packing import Doc, PackStats, pack
from ..data.shards import FORMAT, MAX_VOCAB, ShardWriter
from ..data.tokenizer import load_tokenizer
from ..errors import ConfigError, DataError
from ..io import atomic_dir
from ..layout import MANIFEST
from ..outdir import read_manifest
from .base import GENERATORS, Generator, render_text
from ..seeds import RESERVED_EMBEDDINGS

Render = Literal["text", "reserved"]


@dataclass
class SymbolEncoder:
    """Maps an item's symbols (and loss mask) to token ids of the run's vocabulary.

    ``text``: symbols rendered as space-separated integers (trailing space) and
    tokenized with ``tokenizer_json``; every symbol must have at most
    ``max_digits`` digits. ``reserved``: symbol ``s`` -> id ``reserved_offset + s``.
    """

    render: Render
    tokenizer_json: str | None = None  # text mode: the tokenizer, serialised (picklable)
    reserved_offset: int = 0  # reserved mode: id of symbol 0
    max_digits: int = 3  # text mode digit budget (verify-ppt: 1-3 digit integers are one token each)

    def __post_init__(self):
        self._tok = None
        if self.render not in ("text", "reserved"):
            raise ConfigError("render", f"must be 'text' or 'reserved', got {self.render!r}")
        if self.render == "text" and not self.tokenizer_json:
            raise ConfigError("tokenizer", "render=text needs the run's tokenizer (tokenizer.json)")
        if not 0 <= self.reserved_offset < MAX_VOCAB:
            raise ConfigError("reserved_offset", f"must be in [0, 2^32), the ids a shard can hold, got "
                              f"{self.reserved_offset}")

    @classmethod
    def text(cls, tokenizer, max_digits: int = 3) -> "SymbolEncoder":
        """Text render with a ``tokenizers.Tokenizer`` (or a path to tokenizer.json / its folder)."""
        if isinstance(tokenizer, (str, Path)):
            tokenizer = load_tokenizer(tokenizer)
        return cls("text", tokenizer.to_str(), max_digits=max_digits)

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_tok"] = None
        return d

    def _tokenizer(self):
        if self._tok is None:
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_str(self.tokenizer_json)
        return self._tok

    def vocab_size(self, gen: Generator) -> int:
        """Size of the id space the encoded documents live in."""
        if self.render == "reserved":
            if self.reserved_offset + gen.vocab_size > MAX_VOCAB:
                raise ConfigError("reserved_offset", f"{self.reserved_offset} + the task's {gen.vocab_size} "
                                  "symbols pass 2^32, the ids a shard can hold")
            return self.reserved_offset + gen.vocab_size
        return self._tokenizer().get_vocab_size(with_added_tokens=True)

    def check_generator(self, gen: Generator) -> None:
        """Text render: every symbol of ``gen`` must fit the digit budget (error names the field)."""
        if self.render == "text" and self.max_digits:
            top = gen.vocab_size - 1
            if len(str(top)) > self.max_digits:
                raise ConfigError("render", f"{gen.registry_name} uses symbols up to {top} ({len(str(top))} digits), "
                                  f"more than the text digit budget max_digits={self.max_digits}; multi-digit "
                                  f"numbers split unpredictably under BPE. Use render=reserved"
                                  + (" or encoding=split" if gen.registry_name == "nca" else ""))

    def encode(self, item) -> Doc:
        if self.render == "reserved":
            ids = item.symbols.astype(np.int64) + self.reserved_offset
            return Doc(ids, item.loss_mask)
        text = render_text(item.symbols)
        enc = self._tokenizer().encode(text, add_special_tokens=False)
        ids = np.asarray(enc.ids, np.int64)
        if item.loss_mask is None:
            return Doc(ids, None)
        sym = self.token_symbols(item.symbols, text, enc.offsets)
        return Doc(ids, np.asarray(item.loss_mask, np.uint8)[sym])

    @staticmethod
    def token_symbols(symbols: np.ndarray, text: str, offsets) -> np.ndarray:
        """Index of the symbol each token belongs to.

        Symbol i spans its digits plus the following space. A token belongs to
        the symbol of its first non-space character (so GPT-2 style " 12" tokens
        go with 12, not with the symbol before); an all-space token to the
        symbol whose trailing space it is.
        """
        lens = np.fromiter((len(str(s)) + 1 for s in symbols.tolist()), np.int64, len(symbols))
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        off = np.asarray(offsets, np.int64).reshape(-1, 2)
        n = len(text)
        is_space = np.frombuffer(text.encode("utf-32-le"), np.uint32) == 32
        # next_ns[i] = first index >= i that is not a space (n if none)
        idx = np.where(is_space, n, np.arange(n))
        next_ns = np.append(np.minimum.accumulate(idx[::-1])[::-1], n)
        first = next_ns[np.clip(off[:, 0], 0, n)]
        pos = np.where(first < off[:, 1], first, off[:, 0])
        return np.clip(np.searchsorted(starts, pos, side="right") - 1, 0, len(symbols) - 1)

    def symbol_cost(self, gen: Generator, probe_repeats: int = 2) -> tuple[int, int]:
        """Tokens per symbol ``a`` and a constant ``b``: a document of N symbols is a*N + b tokens.

        Reserved: (1, 0). Text: measured by tokenizing every symbol of ``gen`` in
        context (each once per repeat, in shuffled order) and attributing tokens
        to symbols; raises ConfigError('render') unless every symbol costs the
        same number of tokens (then no document length can be exact).
        """
        if self.render == "reserved":
            return 1, 0
        self.check_generator(gen)
        V = gen.vocab_size
        rng = np.random.default_rng([V, RESERVED_EMBEDDINGS])
        probe = np.concatenate([rng.permutation(V) for _ in range(probe_repeats)])
        text = render_text(probe)
        enc = self._tokenizer().encode(text, add_special_tokens=False)
        owner = self.token_symbols(probe, text, enc.offsets)
        counts = np.bincount(owner, minlength=len(probe))
        inner = counts[1:-1]  # the first/last symbol may absorb boundary effects
        a = int(np.bincount(inner).argmax())
        bad = np.flatnonzero(inner != a) + 1
        if len(bad):
            ex = sorted({int(probe[i]) for i in bad})[:8]
            raise ConfigError("render", f"symbols of {gen.registry_name} cost different numbers of tokens under "
                              f"this tokenizer (most cost {a}; e.g. {ex} do not), so documents cannot fill a row "
                              f"exactly; use render=reserved or a tokenizer with every symbol 0..{V - 1} as one token")
        return a, len(enc.ids) - a * len(probe)


def exact_fill_length(gen: Generator, enc: SymbolEncoder, row_len: int, eos_id: int | None) -> int:
    """Symbols per document so that one document (+ EOS) is exactly ``row_len`` tokens."""
    a, b = enc.symbol_cost(gen)
    room = row_len - (1 if eos_id is not None else 0) - b
    if room <= 0 or room % a:
        good = [(n * a + b + (eos_id is not None)) - 1 for n in range(max(1, room // a - 1), room // a + 2)]
        raise ConfigError("seq_len", f"{gen.registry_name} under render={enc.render} costs {a} tokens per symbol "
                          f"(+{b}); seq_len {row_len - 1} cannot be filled exactly; nearby seq_len that can: "
                          f"{[g for g in good if g > 0]}")
    return room // a


def fit_generator(name: str, params: dict, enc: SymbolEncoder, row_len: int, eos_id: int | None) -> Generator:
    """Build generator ``name`` with its length set so documents fill rows exactly (then verify a sample)."""
    gen = GENERATORS.build(name, params)
    field = gen.length_field
    if field is None:
        raise ConfigError("exact_fill", f"{name} has no length parameter to fit")
    n = exact_fill_length(gen, enc, row_len, eos_id)
    if field in params and int(params[field]) != n:
        raise ConfigError(field, f"exact fill of seq_len {row_len - 1} needs {field}={n}, got {params[field]}; "
                          f"drop {field} or turn exact fill off")
    gen = GENERATORS.build(name, {**params, field: n}, field="")
    verify_fill(gen, enc, row_len, eos_id)
    return gen


def verify_fill(gen: Generator, enc: SymbolEncoder, row_len: int, eos_id: int | None, n: int = 16) -> None:
    """Tokenize the first ``n`` documents and require each (+ EOS) to be exactly ``row_len`` tokens."""
    extra = 1 if eos_id is not None else 0
    for i, item in zip(range(n), gen.items(0, n)):
        got = len(enc.encode(item).ids) + extra
        if got != row_len:
            raise DataError(f"{gen.registry_name} document {i} is {got} tokens with EOS, not row_len {row_len}: "
                            f"exact fill does not hold under this tokenizer")


class GeneratorJob(UnitJob):
    """A generator's items in units of consecutive indices, encoded and packed (data/engine.py)."""

    def __init__(self, gen: Generator, enc: SymbolEncoder, row_len: int, vocab_size: int, eos_id: int | None,
                 pack_mode: str, pad_id: int, exact_fill: bool, unit_tokens: int, max_rows: int | None = None):
        self.gen, self.enc, self.row_len, self.vocab_size, self.eos_id = gen, enc, row_len, vocab_size, eos_id
        self.pack_mode, self.pad_id, self.exact_fill = pack_mode, pad_id, exact_fill
        # items per unit from the config alone (never from the worker count)
        self.items = max(1, unit_tokens // max(1, gen.length or row_len))
        # A unit stops generating once it holds the whole split's rows: a 2k-token dataset need not
        # generate a 2M-token unit. Rows are packed in item order, so the rows kept are the same
        # bytes the whole unit would have started with.
        self.max_rows = max_rows

    def key(self) -> str:
        return job_key("generator", self.gen.registry_name, to_dict(self.gen.cfg), self.enc.render,
                       self.enc.reserved_offset, self.enc.max_digits, self.enc.tokenizer_json, self.row_len,
                       self.vocab_size, self.eos_id, self.pack_mode, self.pad_id, self.exact_fill, self.items,
                       self.max_rows)

    def units(self, start=None):
        k = start[0] if start is not None else 0
        while True:
            yield k, (k * self.items, (k + 1) * self.items)
            k += 1

    def start_token(self, k: int) -> dict:
        return {}  # unit k is items [k * items, (k + 1) * items): nothing to remember

    def run(self, k: int, bounds: tuple[int, int], out: Path) -> dict:
        stats = PackStats()
        docs = (self.enc.encode(it) for it in self.gen.items(*bounds))
        with ShardWriter(out / "rows", self.row_len, self.vocab_size, arrays=["loss_mask", "segments"]) as w:
            chunk = min(1024, self.max_rows or 1024)  # blocks of rows; the bytes do not depend on it
            for block in pack(docs, self.row_len, self.eos_id, mode=self.pack_mode, pad_id=self.pad_id, stats=stats,
                              chunk_rows=chunk):
                if self.exact_fill and block["segments"].any():
                    row = bounds[0] + w.n_rows + int(np.flatnonzero(block["segments"].any(1))[0])
                    raise DataError(f"row {row} holds parts of two documents although exact fill was requested "
                                    f"(a document is not exactly row_len={self.row_len} tokens)")
                w.add_rows(block["tokens"], loss_mask=block["loss_mask"], segments=block["segments"])
                if self.max_rows is not None and w.n_rows >= self.max_rows:
                    break  # enough for the split; the generator is not drained (no tail is dropped)
        return {"rows": {"rows": w.n_rows}, "documents": stats.documents,
                "dropped_tail_tokens": stats.dropped_tail_tokens}


def generated_entries(folder: Path) -> set[str] | None:
    """What an earlier ``generate`` output in ``folder`` holds (from its manifest), or None if it is none:
    a shard set whose manifest says a generator wrote it (a prepared dataset's split is not one)."""
    man = read_manifest(Path(folder) / MANIFEST)
    if (man is None or man.get("format") != FORMAT or not isinstance(man.get("source"), dict)
            or man["source"].get("kind") != "generator" or man.get("split") is not None):
        return None
    names = {MANIFEST, "units"}
    for shard in man.get("shards") or []:
        for info in (shard.get("files") or {}).values():
            first = Path(str(info.get("name", ""))).parts[:1]
            if first and first[0] != "..":
                names.add(first[0])
    return names


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
    exact_fill: bool = False,
    unit_tokens: int = DEFAULT_UNIT_TOKENS,
    resume_as: str | Path | None = None,
) -> dict:
    """Generate items until ``n_rows`` rows of ``row_len`` tokens are full; write the shard set ``out``.

    Items are built in work units of consecutive indices by ``workers`` processes
    (data/engine.py): the bytes depend on ``unit_tokens``, not on ``workers``, and a
    killed run resumes from its finished units (kept beside ``resume_as``, default
    ``out``: give the final path when ``out`` is a temporary folder). Memory stays
    one unit per worker.
    ``exact_fill=True`` asserts that every row is exactly one document (see
    :func:`fit_generator`); a row holding parts of two documents raises DataError.
    """
    out = Path(out)
    job = GeneratorJob(gen, enc, row_len, vocab_size, eos_id, pack_mode, pad_id, exact_fill, unit_tokens, n_rows)
    work = work_dir(Path(resume_as or out), job.key())
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n_rows * row_len, unit="tok", unit_scale=True, desc=f"generate {gen.registry_name}")
    have = [0]

    def count(info: dict) -> None:
        if bar is not None:
            bar.update(min(info["rows"]["rows"], max(0, n_rows - have[0])) * row_len)
        have[0] += info["rows"]["rows"]

    try:
        infos = run_units(job, work, workers, need={"rows": n_rows}, on_unit=count)
    finally:
        if bar is not None:
            bar.close()
    if have[0] < n_rows:
        raise DataError(f"{gen.registry_name} produced only {have[0]} of {n_rows} rows")
    parts = rows_in_order(infos, "rows", n_rows)
    with atomic_dir(out) as tmp:
        adopt_units(work, tmp / "units", [k for k, _ in parts])
        info = dict(
            source={"kind": "generator", "name": gen.registry_name, "config": to_dict(gen.cfg)},
            render=enc.render,
            reserved_offset=enc.reserved_offset if enc.render == "reserved" else None,
            symbol_vocab_size=gen.vocab_size,
            eos_id=eos_id,
            exact_fill=exact_fill,
            # with exact fill every row is one document; otherwise the last unit may hold a few more
            documents_used=n_rows if exact_fill else None,
            documents_generated=sum(int(i["documents"]) for i in infos),
            unit_tokens=unit_tokens,
            units=len(parts),
        )
        manifest = link_shards(tmp, [(unit_path(tmp / "units", k) / "rows", r) for k, r in parts],
                               **{**info, **(manifest_extra or {})})
    shutil.rmtree(work, ignore_errors=True)
    return manifest
