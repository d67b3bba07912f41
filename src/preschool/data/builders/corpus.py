"""corpus: natural text from one of the experiment's corpora, split into train/val by document.

Documents are read in order, cut into work units (data/engine.py), tokenized,
split by a hash of their id (``val_fraction``) and packed: concatenated, each
ended by EOS (``separator: eos``, as verify-ppt's DataTrove shards) or started by
BOS with no EOS (``separator: bos``, as the L2T reference's Mistral tokenization);
``auto`` (default) takes BOS when the experiment has a dataset that always starts
documents with BOS (an L2T one), so its raw-text arms separate documents as its L2T
arms do, else EOS. The
ids of the documents each split uses are written beside it (``<split>.doc_ids.txt``),
so a Control set (``exclude: [<dataset>]``) reads none of them: datasets with
fewer exclusions are built first.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ... import corpora
from ...config import check, to_dict
from ...corpora.base import ReadStats, is_validation
from ...errors import ConfigError
from ..builder import DATASET_BUILDERS, BuildContext, DocumentSpec, TokenizedBuilder
from ..flat_spec import FlatRecord
from ..engine import DocumentJob, adopt_units, job_key, link_shards, rows_in_order, run_units, unit_path, work_dir
from ..packing import ConcatPacker, Doc, PackStats
from ..shards import ShardWriter
from ..tokenizer import backend, encode_batch, eos_id, special_ids, tokenizer_hash, tokenizer_size


@dataclass(kw_only=True)
class CorpusSpec(FlatRecord, DocumentSpec):
    """``data.<name>: {corpus: <corpora entry>, tokens: ..., val_tokens: ...}``: natural text.

    ``tokens`` / ``val_tokens`` rows are filled from the corpus's documents, each document in train or val
    by a hash of its id (``val_fraction``). No ``params``: the corpus entry says how its text is read."""

    named_by = "corpus"
    exclude: list[str] = field(default_factory=list)  # skip documents these datasets used (a Control set)
    # between documents: EOS after each (eos), BOS before each and no EOS (bos), or auto (module docstring)
    separator: Literal["auto", "eos", "bos"] = "auto"

    def check_refs(self, name: str, experiment: Any) -> None:
        super().check_refs(name, experiment)
        for other in self.exclude:
            check(other in experiment.data, f"data.{name}.exclude", f"no dataset named {other!r}")

    def record(self) -> dict:
        # the separator enters the builder's key resolved, and only when it is BOS: data prepared before the
        # field existed (EOS) stays up to date
        rec = super().record()
        rec.pop("separator", None)
        return rec

    def resolved_separator(self, datasets: dict[str, Any]) -> str:
        """``eos`` or ``bos``: the field, or for ``auto`` BOS when a dataset of ``datasets`` (the experiment's)
        always starts documents with it (:meth:`~preschool.data.builder.DatasetSpec.document_start`), else EOS."""
        if self.separator != "auto":
            return self.separator
        return "bos" if any(d.document_start() == "bos" for d in datasets.values()) else "eos"


@DATASET_BUILDERS.register("corpus", config=CorpusSpec)
class CorpusBuilder(TokenizedBuilder):
    """Natural text from a corpus (``corpus:``), minus the documents of the datasets in ``exclude``."""

    def order(self, spec: CorpusSpec) -> int:
        return len(spec.exclude)  # Control sets after the datasets whose documents they leave out

    def key(self, name: str, spec: CorpusSpec, ctx: BuildContext) -> dict | None:
        key = super().key(name, spec, ctx)
        if key is not None and spec.resolved_separator(ctx.datasets) == "bos":
            key["spec"]["separator"] = "bos"
        return key

    def build(self, name: str, spec, key: dict, h: str, ctx: BuildContext, tmp: Path, final: Path) -> dict:
        corpus_cfg = corpus_of(name, spec, ctx)
        excluded: set[str] = set()
        for other in spec.exclude:
            for split in ("train", "val"):
                f = ctx.out / other / f"{split}.doc_ids.txt"
                if f.is_file():
                    excluded.update(f.read_text(encoding="utf-8").split("\n"))
        read = ReadStats()  # what the corpus read gave and dropped, recorded in dataset.json
        m = write_corpus(name, spec, corpus_cfg, ctx.tok, ctx.row_len, ctx.seed, tmp, excluded, ctx.workers,
                         ctx.progress, final, read, separator=spec.resolved_separator(ctx.datasets))
        return self.entry(spec, key, h, m, read=read_record(name, read))


def corpus_of(name: str, spec, ctx: BuildContext):
    """The CorpusConfig dataset ``name`` reads; ConfigError naming ``data.<name>.corpus`` when there is none."""
    if spec.corpus not in ctx.corpora:
        raise ConfigError(f"data.{name}.corpus", f"no corpus named {spec.corpus!r}; have {sorted(ctx.corpora)}")
    return ctx.corpora[spec.corpus]


def read_record(name: str, read: ReadStats) -> dict:
    """What ``dataset.json`` records of a corpus read (``read``); its drops are also printed."""
    if read.drops:
        print(f"[preschool] data {name}: reader drops: {read.summary()}")
    return read.as_dict()


class CorpusJob(DocumentJob):
    """Natural text: units of consecutive documents, tokenized, split by document id, packed (concat + EOS,
    or BOS + concat when ``bos`` is given)."""

    def __init__(self, corpus_cfg, tokenizer_json: str, row_len: int, seed: int, val_fraction: float,
                 splits: list[str], unit_tokens: int, excluded: set[str] | None = None,
                 read: ReadStats | None = None, eos: int | None = None, bos: int | None = None):
        self.corpus_cfg, self.tokenizer_json, self.row_len = corpus_cfg, tokenizer_json, row_len
        self.eos = eos  # the id that ends each document (None: the tokenizer's <|endoftext|>)
        self.bos = bos  # the id that starts each document instead (None: EOS ends them)
        self.seed, self.val_fraction, self.splits, self.unit_tokens = seed, val_fraction, splits, unit_tokens
        self.excluded = excluded or set()
        self.init_reading(read)  # the parent's read counts (ReadStats), recorded in dataset.json
        self._tok = None

    def __getstate__(self):
        return {**super().__getstate__(), "_tok": None}

    def key(self) -> str:
        bos = () if self.bos is None else ("bos", self.bos)  # an EOS job keeps the key it had before BOS existed
        return job_key("corpus", to_dict(self.corpus_cfg), self.tokenizer_json, self.row_len, self.seed,
                       self.val_fraction, self.splits, self.unit_tokens, sorted(self.excluded), self.eos, *bos)

    def units(self, start=None):
        # files, datatrove readers and a streamed hf corpus can continue where a unit starts (iter_documents
        # positions); other sources (storybook, a non-streamed hf dataset) read again from their start
        m, token = start if start is not None else (0, {})
        read = corpora.iter_documents(self.corpus_cfg, self.read, start=token.get("position"))
        docs = ((d.id, d.text, d.meta.get("position")) for d in read if d.id not in self.excluded)
        return self.document_units(docs, self.unit_tokens, first=m)

    def run(self, k: int, docs: list[tuple[str, str]], out: Path) -> dict:
        from tokenizers import Tokenizer

        if self._tok is None:
            self._tok = Tokenizer.from_str(self.tokenizer_json)
        eos = None if self.bos is not None else eos_id(self._tok) if self.eos is None else self.eos
        vocab = tokenizer_size(self._tok)
        packers = {s: ConcatPacker(self.row_len, eos, PackStats()) for s in self.splits}
        writers = {s: ShardWriter(out / s, self.row_len, vocab, arrays=["segments"]) for s in self.splits}
        ids_files = {s: open(out / f"{s}.doc_rows.tsv", "w", encoding="utf-8") for s in self.splits}
        tokens = {s: 0 for s in self.splits}
        try:
            for i in range(0, len(docs), 256):
                batch = [(("val" if is_validation(d, self.val_fraction, self.seed) else "train"), d, t)
                         for d, t in docs[i:i + 256]]
                batch = [b for b in batch if b[0] in writers]
                for (split, doc_id, _), x in zip(batch, encode_batch(self._tok, [t for _, _, t in batch])):
                    # the row this document starts in: lets Control sets exclude exactly what was used
                    ids_files[split].write(f"{tokens[split] // self.row_len}\t{doc_id}\n")
                    tokens[split] += len(x) + 1
                    ids = np.asarray(x if self.bos is None else [self.bos, *x], np.int64)
                    block = packers[split].add(Doc(ids))
                    if block is not None:
                        writers[split].add_rows(block["tokens"], segments=block["segments"])
            rows = {}
            for s, w in writers.items():
                block = packers[s].finish()
                if block is not None:
                    w.add_rows(block["tokens"], segments=block["segments"])
                rows[s] = w.n_rows
                w.close()
        except BaseException:
            for w in writers.values():
                w.abort()
            raise
        finally:
            for fh in ids_files.values():
                fh.close()
        return {"rows": rows, "documents": {s: packers[s].stats.documents for s in self.splits},
                "tokens": tokens, "dropped_tail_tokens": {s: packers[s].stats.dropped_tail_tokens for s in self.splits}}


def write_corpus(name: str, spec, corpus_cfg, tok, row_len: int, seed: int, out: Path,
                  excluded: set[str], workers: int, progress: bool, final: Path, read: ReadStats,
                  separator: str = "eos") -> dict:
    """Tokenize + pack documents into train and val shard sets, splitting by document (see data/engine.py);
    ``read`` counts what the read up to the last unit taken gave (the same with any number of workers);
    ``separator``: EOS after each document, or BOS (the tokenizer's, else EOS) before each."""
    n_rows = {"train": spec.tokens // row_len, "val": spec.val_tokens // row_len}
    n_rows = {s: n for s, n in n_rows.items() if n > 0}
    special = special_ids(tok)
    job = CorpusJob(corpus_cfg, backend(tok).to_str(), row_len, seed, spec.val_fraction, list(n_rows),
                    spec.unit_tokens, excluded, read, eos=special.eos,
                    bos=special.prefix if separator == "bos" else None)
    work = work_dir(final, job.key())
    have = {s: 0 for s in n_rows}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(n_rows.values()) * row_len, unit="tok", unit_scale=True,
                   desc=f"tokenize {name}", leave=False, disable=None)

    def count(info: dict) -> None:
        for s in n_rows:
            step = min(info["rows"][s], max(0, n_rows[s] - have[s]))
            have[s] += info["rows"][s]
            if bar is not None:
                bar.update(step * row_len)

    try:
        infos = run_units(job, work, workers, need=n_rows, on_unit=count)
    finally:
        if bar is not None:
            bar.close()
    for s in n_rows:
        if have[s] < n_rows[s]:
            raise ConfigError(
                f"data.{name}.{'tokens' if s == 'train' else 'val_tokens'}",
                f"the corpus ran out after {have[s] * row_len} {s} tokens "
                f"(asked for {n_rows[s] * row_len}; read {read.files} files, {read.documents} documents, "
                f"reader drops: {read.summary()}); lower the budget or give a larger corpus"
                + (f", or hold out more of its documents (data.{name}.val_fraction, now {spec.val_fraction:g})"
                   if s == "val" else ""),
            )
    used = {s: rows_in_order(infos, s, n_rows[s]) for s in n_rows}
    adopt_units(work, out / "units", sorted({k for parts in used.values() for k, _ in parts}))
    shutil.rmtree(work, ignore_errors=True)
    manifests = {}
    for s, parts in used.items():
        # Document ids let Control sets be disjoint from this slice: every document that starts in a used row.
        used_ids = []
        for k, rows in parts:
            for line in (unit_path(out / "units", k) / f"{s}.doc_rows.tsv").read_text(encoding="utf-8").splitlines():
                row, doc_id = line.split("\t", 1)
                if int(row) < rows:
                    used_ids.append(doc_id)
        manifests[s] = link_shards(
            out / s, [(unit_path(out / "units", k) / s, rows) for k, rows in parts],
            source={"kind": "corpus", "config": to_dict(corpus_cfg)}, split=s, tokenizer_sha256=tokenizer_hash(tok),
            seed=seed, documents=len(used_ids),
            document_ids_sha256=hashlib.sha256("\n".join(used_ids).encode()).hexdigest(),
            unit_tokens=spec.unit_tokens, units=len(parts),
        )
        (out / f"{s}.doc_ids.txt").write_text("\n".join(used_ids) + "\n", encoding="utf-8")
    return manifests
