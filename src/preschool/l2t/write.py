"""Corpus-scale L2T data: documents -> (raw rows + L2T rows) shard sets, any worker count.

``build_l2t(texts, out, cfg, tokenizer)`` streams documents in order and cuts
them into work units (``data/engine.py``); each unit carries the text of the
document before its first one, so every document sees its predecessor no
matter which worker runs it. A worker transforms, tokenizes, routes and packs
its unit into per-kind shard sets of its own (greedy pack batches and token
routing restart at each unit); the parent lists the units' sets in unit order
and merges them in the mixing order, so 1 and N workers write identical bytes
and a killed build resumes from its finished units.

Per document (pure function of ``(cfg, index, text, previous text)``):
train/val assignment (``val_fraction``, by document id), raw/L2T routing
(``mixing``), the L2T transform (``transform``), tokenization with BOS (the
tokenizer's BOS, else EOS; ``<|endoftext|>`` in our BPE, which is also EOS and
padding) before every sample and raw document and no EOS (reference; padding is
the tokenizer's PAD, else EOS), and the per-task drop counts, including
samples longer than a row (``too_long``; the reference drops those too).

Output (``out``): ``train/`` and ``val/`` shard sets (tokens, loss_mask,
segments; ``row_len = seq_len + 1``), ``manifest.json`` (config, tokenizer
hash, counts per task/side/split, drop reasons, realised L2T share per tenth of
the rows) and ``stats.json`` (the same counts alone). Memory stays bounded by
one unit per worker plus one merge block.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

import numpy as np

from .. import layout
from ..config import check, from_dict, to_dict
from ..corpora import is_validation, iter_documents
from ..corpora.base import drop_summary
from ..data.engine import (
    DEFAULT_UNIT_TOKENS, DocumentJob, adopt_units, job_key, link_shards, run_units, sum_counts, unit_path,
    work_dir,
)
from ..data.packing import Doc
from ..data.shards import ShardSet, ShardWriter
from ..data.tokenizer import backend, eos_id, save_tokenizer, special_ids, tokenizer_hash, tokenizer_size
from ..errors import DataError
from ..io import atomic_dir, code_version, write_json
from ..outdir import read_manifest
from .mixing import TokenRouter, route_by_documents, row_order, share_profile
from ..data.packing import ConcatPacker, PackStats
from .packing import pack_greedy
from .transform import L2TConfig, L2TTransform


@dataclass
class BuildConfig:
    """Scenario, packing and split settings around an :class:`L2TConfig`."""

    l2t: L2TConfig = field(default_factory=L2TConfig)
    scenario: Literal["disjoint", "shared"] = "disjoint"
    raw_ratio: float = 0.5  # disjoint: share of raw (by documents or tokens); 0 = L2T only
    ratio_by: Literal["documents", "tokens"] = "documents"
    curriculum: list[float] = field(default_factory=list)  # [] shuffle; [start, end] L2T share over rows
    packer: Literal["greedy", "concat"] = "greedy"  # for L2T samples; raw text is always concat
    seq_len: int = 2048
    loss: Literal["all", "answer"] = "all"  # reference: all tokens
    loss_on_padding: bool = True  # reference: labels = input_ids, padding included
    pack_batch: int = 1000
    val_fraction: float = 0.01
    shuffle_seed: int = 21  # reference shuffles the mixed rows with seed 21
    train_tokens: int = 0  # cap on train rows x row_len (0 = everything the input gives)
    val_tokens: int = 0  # cap on val rows x row_len (0 = no cap: all, or what the train cap's documents gave)
    cap_margin: float = 0.05  # with caps: read until both splits hold this much more than needed

    def validate(self) -> None:
        check(0.0 <= self.raw_ratio <= 1.0, "raw_ratio", f"must be in [0, 1], got {self.raw_ratio}")
        check(self.seq_len >= 8, "seq_len", f"must be >= 8, got {self.seq_len}")
        check(self.pack_batch >= 1, "pack_batch", "must be >= 1")
        check(self.train_tokens >= 0, "train_tokens", f"must be >= 0, got {self.train_tokens}")
        check(self.val_tokens >= 0, "val_tokens", f"must be >= 0, got {self.val_tokens}")
        check(0.0 <= self.val_fraction < 1.0, "val_fraction", f"must be in [0, 1), got {self.val_fraction}")
        check(len(self.curriculum) in (0, 2), "curriculum", "must be [] or [start_share, end_share]")
        for i, v in enumerate(self.curriculum):
            check(0.0 <= v <= 1.0, f"curriculum[{i}]", f"must be in [0, 1], got {v}")

    @property
    def row_len(self) -> int:
        return self.seq_len + 1


@dataclass
class DocOut:
    index: int
    split: str  # "train" | "val"
    route: str  # "raw" | "l2t" | "both" (shared) | "undecided" (token routing)
    task: str | None
    samples: list[Doc]
    sample_tasks: list[str]
    raw: Doc | None
    drops: Counter


class DocumentEncoder:
    """Worker-side state: transform + tokenizer. Picklable (the tokenizer travels as JSON)."""

    def __init__(self, cfg: BuildConfig, tokenizer_json: str, pool: tuple[str, ...] | None = None,
                 bos: int | None = None):
        self.cfg = cfg
        self.tokenizer_json = tokenizer_json
        self.pool = pool
        self.bos_id = bos  # the id before every sample and raw document (None: the tokenizer's <|endoftext|>)
        self._tok = None
        self._tf = None

    def __getstate__(self):
        return {"cfg": self.cfg, "tokenizer_json": self.tokenizer_json, "pool": self.pool, "bos_id": self.bos_id,
                "_tok": None, "_tf": None}

    @property
    def tok(self):
        if self._tok is None:
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_str(self.tokenizer_json)
        return self._tok

    @property
    def transform(self) -> L2TTransform:
        if self._tf is None:
            self._tf = L2TTransform(self.cfg.l2t, pool=self.pool, tokenizer=self.tok)
        return self._tf

    @property
    def bos(self) -> int:
        return eos_id(self.tok) if self.bos_id is None else self.bos_id

    def route(self, index: int) -> str:
        c = self.cfg
        if c.scenario == "shared":
            return "both"
        if c.ratio_by == "tokens" and 0 < c.raw_ratio < 1:
            return "undecided"
        return route_by_documents(c.l2t.seed, index, c.raw_ratio)

    def encode_samples(self, samples) -> tuple[list[Doc], list[str], Counter]:
        drops: Counter = Counter()
        if not samples:
            return [], [], drops
        encs = self.tok.encode_batch([s.text for s in samples], add_special_tokens=False)
        bos = self.bos
        docs, names = [], []
        for s, e in zip(samples, encs):
            n = len(e.ids) + 1
            if n > self.cfg.row_len:
                drops[f"{s.task}/too_long"] += 1
                continue
            ids = np.empty(n, np.int32)
            ids[0] = bos
            ids[1:] = e.ids
            mask = None
            if self.cfg.loss == "answer":
                ends = np.fromiter((o[1] for o in e.offsets), np.int64, len(e.offsets))
                mask = np.zeros(n, np.uint8)
                mask[1:] = ends > s.answer_start
            docs.append(Doc(ids, mask))
            names.append(s.task)
        return docs, names, drops

    def encode_raw(self, text: str) -> Doc:
        ids = self.tok.encode(text, add_special_tokens=False).ids
        out = np.empty(len(ids) + 1, np.int32)
        out[0] = self.bos
        out[1:] = ids
        return Doc(out, None)

    def process(self, start: int, docs: list[tuple[str, str]], prev_text: str | None) -> list[DocOut]:
        """Documents ``start, start+1, ...`` given as ``(doc_id, text)``; ``prev_text`` precedes the first."""
        outs = []
        tf = self.transform
        prev_sents = None
        for k, (doc_id, text) in enumerate(docs):
            i = start + k
            split = "val" if is_validation(doc_id, self.cfg.val_fraction, self.cfg.l2t.seed) else "train"
            route = self.route(i)
            sents = tf.sentences(text) if route != "raw" else None
            samples, names, drops, task, raw = [], [], Counter(), None, None
            if route != "raw":
                res = tf(i, text, prev_text, sentences=sents, prev_sentences=prev_sents)
                samples, names, d2 = self.encode_samples(res.samples)
                drops = res.drops + d2
                task = res.task
            if route != "l2t":
                raw = self.encode_raw(text)
            outs.append(DocOut(i, split, route, task, samples, names, raw, drops))
            prev_text, prev_sents = text, sents
        return outs


def _as_pair(i: int, d) -> tuple[str, str]:
    if isinstance(d, str):
        return str(i), d
    if isinstance(d, tuple):
        return str(d[0]), d[1]
    return str(d.id), d.text  # preschool.corpora.Document


class _Side:
    """One split's packers and temporary writers."""

    def __init__(self, cfg: BuildConfig, tmp: Path, split: str, vocab: int, pad_id: int, first_batch: int = 0):
        self.cfg, self.pad_id, self.split = cfg, pad_id, split
        arrays = ["loss_mask", "segments"]
        self.w = {k: ShardWriter(tmp / f"{split}-{k}", cfg.row_len, vocab, arrays=arrays) for k in ("l2t", "raw")}
        # Samples already end in EOS, so the shared concat packer adds none (eos_id=None).
        self.raw_pack = ConcatPacker(cfg.row_len, None, PackStats())
        self.l2t_concat = ConcatPacker(cfg.row_len, None, PackStats()) if cfg.packer == "concat" else None
        self.l2t_counts = self.l2t_concat.stats if self.l2t_concat else PackStats()
        self.buf: list[Doc] = []
        self.bno = first_batch  # greedy batches are numbered (and their row shuffles seeded) from here
        self.docs: Counter = Counter()
        self.tasks: Counter = Counter()
        self.samples: Counter = Counter()
        self.sample_tokens: Counter = Counter()
        self.drops: Counter = Counter()

    def rows(self) -> int:
        """Rows written so far (both kinds; pending greedy batches not included)."""
        return self.w["l2t"].n_rows + self.w["raw"].n_rows

    def _write(self, kind: str, block) -> None:
        if block is not None and len(block["tokens"]):
            self.w[kind].add_rows(block["tokens"], loss_mask=block["loss_mask"], segments=block["segments"])

    def add_l2t(self, docs: list[Doc], names: list[str]) -> None:
        for d, n in zip(docs, names):
            self.samples[n] += 1
            self.sample_tokens[n] += len(d.ids)
            if self.l2t_concat is not None:
                self._write("l2t", self.l2t_concat.add(d))
            else:
                self.buf.append(d)
        if self.l2t_concat is None and len(self.buf) >= self.cfg.pack_batch:
            self._flush_greedy()

    def _flush_greedy(self) -> None:
        seed = self.cfg.l2t.seed * 2 + (self.split == "val")
        for block in pack_greedy(self.buf, self.cfg.row_len, self.pad_id, seed=seed, batch=len(self.buf) or 1,
                                 loss_on_padding=self.cfg.loss_on_padding and self.cfg.loss == "all",
                                 counts=self.l2t_counts, first_batch=self.bno):
            self._write("l2t", block)
        self.bno += 1
        self.buf = []

    def add_raw(self, d: Doc) -> None:
        self._write("raw", self.raw_pack.add(d))

    def stats(self) -> dict:
        return {
            "documents_by_route": dict(self.docs),
            "documents_by_task": dict(self.tasks),
            "samples_by_task": dict(self.samples),
            "sample_tokens_by_task": dict(self.sample_tokens),
            "drops": dict(self.drops),
            "l2t_packing": {k: v for k, v in vars(self.l2t_counts).items() if k != "extra"},
            "raw_packing": {k: v for k, v in vars(self.raw_pack.stats).items() if k != "extra"},
        }

    def finish(self) -> dict:
        if self.l2t_concat is not None:
            self._write("l2t", self.l2t_concat.finish())
        elif self.buf:
            self._flush_greedy()
        self._write("raw", self.raw_pack.finish())
        return {k: w.close() for k, w in self.w.items()}


def _gather(ss: ShardSet, idx: np.ndarray, name: str) -> np.ndarray:
    arrays = list(ss.iter_arrays(name))
    starts = np.cumsum([0] + [len(a) for a in arrays])
    out = np.empty((len(idx), ss.row_len), dtype=arrays[0].dtype if arrays else np.uint16)
    which = np.searchsorted(starts, idx, side="right") - 1
    for k, a in enumerate(arrays):
        sel = which == k
        if sel.any():
            out[sel] = a[idx[sel] - starts[k]]
    return out


def _cap_rows(cfg: BuildConfig, split: str) -> int:
    cap = cfg.train_tokens if split == "train" else cfg.val_tokens
    return cap // cfg.row_len if cap else 0


def _merge(cfg: BuildConfig, pools: Path, split: str, out: Path, vocab: int, extra: dict, block: int = 4096) -> dict:
    l2t, raw = ShardSet(pools / f"{split}-l2t", verify="size"), ShardSet(pools / f"{split}-raw", verify="size")
    n_l2t, n_raw = len(l2t), len(raw)
    cap = _cap_rows(cfg, split)
    if cap and n_l2t + n_raw > cap:
        # Keep the pools' proportions: the first rows of each (already shuffled or in stream order).
        n_l2t = min(n_l2t, round(cap * n_l2t / (n_l2t + n_raw)))
        n_raw = cap - n_l2t
    order = row_order(n_l2t, n_raw, cfg.shuffle_seed + (split == "val"), cfg.curriculum or None)
    order = np.where(order < n_l2t, order, order - n_l2t + len(l2t))
    with ShardWriter(out, cfg.row_len, vocab, arrays=["loss_mask", "segments"]) as w:
        for s in range(0, len(order), block):
            o = order[s:s + block]
            is_l2t = o < len(l2t)
            parts = {}
            for name in ("tokens", "loss_mask", "segments"):
                arr = np.empty((len(o), cfg.row_len), np.int64)
                if is_l2t.any():
                    arr[is_l2t] = _gather(l2t, o[is_l2t], name)
                if (~is_l2t).any():
                    arr[~is_l2t] = _gather(raw, o[~is_l2t] - len(l2t), name)
                parts[name] = arr
            w.add_rows(parts["tokens"], loss_mask=parts["loss_mask"], segments=parts["segments"])
        extra = {**extra, "l2t_rows": n_l2t, "raw_rows": n_raw,
                 "l2t_share_by_tenth": share_profile(order, len(l2t))}
        return w.close(**extra)


def no_train_rows_message(where: str, n_docs: int, stats: dict, read: dict | None) -> str:
    """Why an output has no training row: where the documents went and every drop, by reason
    (``stats``: the per-split counts of ``stats.json``)."""
    val_docs = sum(stats["val"]["documents_by_route"].values())
    parts = [f"{where}: no training rows from {n_docs} documents"]
    if read is not None:
        parts.append(f"reader: {read['files']} files, drops {drop_summary(read['drops'])}")
    if n_docs and val_docs == n_docs:
        parts.append(f"all {n_docs} documents were held out for validation (val_fraction picks documents by a hash "
                     "of their id); with so few documents set val_fraction (--val-fraction) to 0 or give more documents")
    drops = Counter(stats["train"]["drops"]) + Counter(stats["val"]["drops"])
    if drops:
        parts.append(f"transform drops {drop_summary(drops, 6)}")
    if not n_docs:
        parts.append("give an input with non-empty documents (see the reader drops)")
    elif val_docs < n_docs:
        parts.append("give longer documents, or lower min_num_words or seq_len (see the drops)")
    return "; ".join(parts)


def empty_val_message(where: str, n_docs: int, stats: dict, cfg: BuildConfig) -> str | None:
    """Why an output's val split has no row, when one was asked for (``val_fraction`` or ``val_tokens``
    above 0), else None: no document hashed to val (a small input), or those that did gave no row."""
    if stats["val"]["l2t_rows"] + stats["val"]["raw_rows"] or not (cfg.val_fraction > 0 or cfg.val_tokens > 0):
        return None
    val_docs = sum(stats["val"]["documents_by_route"].values())
    asked = f"; --val-tokens {cfg.val_tokens} asked for" if cfg.val_tokens else ""
    if val_docs:
        drops = drop_summary(stats["val"]["drops"], 6) if stats["val"]["drops"] else "none"
        return (f"{where}: val/ is empty{asked}: its {val_docs} held-out document(s) gave no row (transform "
                f"drops {drops}); give longer documents, or raise val_fraction (--val-fraction, now "
                f"{cfg.val_fraction}) to hold out more")
    return (f"{where}: val/ is empty{asked}: none of the {n_docs} documents was held out for validation "
            f"(val_fraction {cfg.val_fraction} picks documents by a hash of their id); raise val_fraction "
            "(--val-fraction) or give more documents")


class L2TJob(DocumentJob):
    """Units of consecutive documents -> routed, transformed, packed L2T and raw rows per split."""

    def __init__(self, texts: Iterable, enc: DocumentEncoder, vocab: int, pad: int, unit_tokens: int,
                 source: dict | None, corpus_cfg=None, read=None):
        self.texts, self.enc, self.vocab, self.pad = texts, enc, vocab, pad
        self.unit_tokens, self.source = unit_tokens, source
        self.corpus_cfg = corpus_cfg  # the CorpusConfig ``texts`` was read from, if any: copies reread it
        self.init_reading(read)  # the ReadStats ``texts`` fills in (a resumed read restores its counts there)

    def __getstate__(self):  # the document stream stays with the parent too
        return {**super().__getstate__(), "texts": None}

    def task_copy(self):
        return super().task_copy() if self.corpus_cfg is not None else None

    def key(self) -> str:
        return job_key("l2t", to_dict(self.enc.cfg), self.enc.tokenizer_json, self.enc.pool, self.unit_tokens,
                       self.source, self.enc.bos_id, self.pad)

    def units(self, start=None):
        m, token = start if start is not None else (0, {})
        if start is not None:  # a resumed build: continue the stream where unit m starts
            texts = iter_documents(self.corpus_cfg, self.read, start=token["position"])
        elif self.texts is None:  # a copy on another process or machine: read the corpus again
            texts = iter_documents(self.corpus_cfg)
        else:
            texts = self.texts
        first, prev = int(token.get("first", 0)), token.get("prev")
        docs = ((*_as_pair(i, d), getattr(d, "meta", {}).get("position")) for i, d in enumerate(texts, start=first))
        any_unit = False
        for k, unit in self.document_units(docs, self.unit_tokens, first=m):
            if self.corpus_cfg is None:  # texts from the caller cannot be read again from a position
                self._starts.pop(k, None)
            elif k in self._starts:  # a resumed unit also needs its first index and the text before it
                self._starts[k].update(first=first, prev=prev)
            # each unit carries the text before its first document, so every document sees its predecessor
            yield k, (first, unit, prev)
            first, prev, any_unit = first + len(unit), unit[-1][1], True
        if not any_unit and start is None:
            yield 0, (0, [], None)

    def run(self, k: int, payload: tuple[int, list[tuple[str, str]], str | None], out: Path) -> dict:
        start, docs, prev = payload
        cfg = self.enc.cfg
        sides = {s: _Side(cfg, out, s, self.vocab, self.pad, first_batch=k * 1_000_000) for s in ("train", "val")}
        # token routing keeps its running balance within a unit, so a unit's mix is the target's
        routers = {s: TokenRouter(cfg.raw_ratio) for s in sides}
        try:
            for d in (self.enc.process(start, docs, prev) if docs else []):
                side = sides[d.split]
                route = d.route
                if route == "undecided":
                    route = routers[d.split].route(len(d.raw.ids), sum(len(x.ids) for x in d.samples))
                side.docs[route] += 1
                side.drops.update(d.drops)
                if route in ("l2t", "both"):
                    side.tasks[d.task or "(none)"] += 1
                    side.add_l2t(d.samples, d.sample_tasks)
                if route in ("raw", "both"):
                    side.add_raw(d.raw)
            closed = {s: side.finish() for s, side in sides.items()}
        except BaseException:
            for side in sides.values():
                for w in side.w.values():
                    w.abort()
            raise
        rows = {}
        for s in sides:
            rows[f"{s}-l2t"], rows[f"{s}-raw"] = closed[s]["l2t"]["n_rows"], closed[s]["raw"]["n_rows"]
            rows[s] = rows[f"{s}-l2t"] + rows[f"{s}-raw"]
        return {"rows": rows, "documents": len(docs), "stats": {s: side.stats() for s, side in sides.items()}}


L2T_FORMAT = "preschool-l2t-v1"


def l2t_entries(folder: Path) -> set[str] | None:
    """What an earlier ``transform l2t`` output in ``folder`` holds (from its manifest), or None if it is none."""
    top = read_manifest(Path(folder) / layout.MANIFEST)
    if top is None or top.get("format") != L2T_FORMAT or not isinstance(top.get("splits"), dict):
        return None
    return {layout.MANIFEST, "stats.json", str(top.get("tokenizer") or layout.TOKENIZER),
            *(str(m.get("path", s)) for s, m in top["splits"].items() if isinstance(m, dict))}


def build_l2t(
    texts: Iterable, out: str | Path, cfg: BuildConfig | dict, tokenizer, workers: int = 1,
    pool: tuple[str, ...] | None = None, source: dict | None = None, progress: bool = False,
    unit_tokens: int = DEFAULT_UNIT_TOKENS, resume_as: str | Path | None = None, read_stats=None,
    corpus_cfg=None,
) -> dict:
    """Transform, pack, mix and write ``out/{train,val}``; returns the top-level manifest.

    ``texts``: strings (document id = index), ``(doc_id, text)`` pairs or
    ``preschool.corpora.Document`` s. Val documents are chosen by
    ``corpora.is_validation(doc_id, val_fraction, seed)``, the split rule the
    other data pipelines use, so the same corpus and seed hold out the same
    documents everywhere. Documents are processed in work units by ``workers``
    processes (data/engine.py): the bytes depend on ``unit_tokens``, not on
    ``workers``, and a killed build resumes from its finished units (kept beside
    ``resume_as``, default ``out``). ``read_stats``: the ``corpora.ReadStats`` the
    reader of ``texts`` fills in; its counts and drops go into ``stats.json``
    (``read``) and the manifest. ``corpus_cfg``: the ``CorpusConfig`` ``texts`` is read
    from (``iter_documents(corpus_cfg)``), so that units can also be built by tasks
    elsewhere (``data/distributed.py``), which read the corpus themselves.

    An output without a single training row is a :class:`DataError` that says
    where the documents went and lists every drop by reason (reader and
    transform), and nothing is written: an empty input, one where every
    document is dropped, or one so small that every document was held out for
    validation never looks like success.
    """
    if not isinstance(cfg, BuildConfig):
        cfg = from_dict(BuildConfig, cfg)
    special = special_ids(tokenizer)
    # the reference (Mistral) puts BOS before every sample and document and pads with EOS; with our BPE
    # both are <|endoftext|>
    enc = DocumentEncoder(cfg, backend(tokenizer).to_str(), pool, bos=special.prefix)
    vocab = tokenizer_size(tokenizer)
    out = Path(out)
    job = L2TJob(texts, enc, vocab, special.pad, unit_tokens, source, corpus_cfg, read_stats)
    work = work_dir(Path(resume_as or out), job.key())
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(unit="doc", desc="transform l2t")

    def count(info: dict) -> None:
        if bar is not None:
            bar.update(info["documents"])

    # Enough rows (the margin keeps the L2T/raw mix representative); without a train cap, every
    # document is read (and val holds what they gave).
    need = ({s: math.ceil(_cap_rows(cfg, s) * (1 + cfg.cap_margin)) for s in ("train", "val")}
            if cfg.train_tokens else None)
    try:
        infos = run_units(job, work, workers, need=need, on_unit=count)
    finally:
        if bar is not None:
            bar.close()
    with atomic_dir(out) as tmp:
        units = tmp / "_work"
        adopt_units(work, units, [int(i["unit"]) for i in infos])
        for s in ("train", "val"):
            for kind in ("l2t", "raw"):
                link_shards(units / f"{s}-{kind}", [(unit_path(units, int(i["unit"])) / f"{s}-{kind}",
                                                     i["rows"][f"{s}-{kind}"]) for i in infos])
        tok_dir = save_tokenizer(tokenizer, layout.tokenizer_dir(tmp)).parent
        stats = {}
        for s in ("train", "val"):
            st = sum_counts([i["stats"][s] for i in infos])
            stats[s] = {k: dict(sorted(v.items())) if k.endswith("_by_task") or k == "drops" else v
                        for k, v in st.items()}
            stats[s]["l2t_rows"] = sum(i["rows"][f"{s}-l2t"] for i in infos)
            stats[s]["raw_rows"] = sum(i["rows"][f"{s}-raw"] for i in infos)
        read = read_stats.as_dict() if read_stats is not None else None
        n_docs = sum(int(i["documents"]) for i in infos)
        where = str((source or {}).get("input") or (source or {}).get("kind") or out)
        if stats["train"]["l2t_rows"] + stats["train"]["raw_rows"] == 0:
            raise DataError(no_train_rows_message(where, n_docs, stats, read))
        empty_val = empty_val_message(where, n_docs, stats, cfg)
        if empty_val:  # a result still (the train split is whole), but never an empty val/ in silence
            print(f"[preschool] {empty_val}", file=sys.stderr, flush=True)
        common = {"source": source or {}, "config": to_dict(cfg), "tokenizer_sha256": tokenizer_hash(tokenizer)}
        manifests = {s: _merge(cfg, units, s, tmp / s, vocab, {**common, "split": s, "stats": stats[s],
                                                               "unit_tokens": unit_tokens, "units": len(infos)})
                     for s in ("train", "val")}
        shutil.rmtree(units)
        top = {
            "format": L2T_FORMAT,
            **common,
            "documents": n_docs,
            "workers": workers,
            "tokenizer": tok_dir.name,
            "splits": {s: {"path": s, "n_rows": m["n_rows"], "l2t_rows": m["l2t_rows"], "raw_rows": m["raw_rows"],
                           "l2t_share_by_tenth": m["l2t_share_by_tenth"]} for s, m in manifests.items()},
            "code_version": code_version(),
        }
        if read is not None:
            stats["read"] = read
            top["read"] = read
        write_json(tmp / "stats.json", stats)
        write_json(tmp / layout.MANIFEST, top)
    shutil.rmtree(work, ignore_errors=True)
    return top
