"""Build an experiment's data once: tokenizer, then train/val shard sets per named dataset.

Layout under ``<out>/data/`` (see docs/interfaces.md)::

    tokenizer/                tokenizer.json + HF tokenizer files
    <dataset>/train/          shard set
    <dataset>/val/            shard set (when val_tokens > 0)
    manifest.json             every dataset's manifest + the tokenizer hash

Each dataset folder is written atomically and skipped on rerun when its
recorded spec (and the tokenizer hash) match, so an interrupted ``prepare``
resumes at dataset granularity.

A dataset is either natural text from a corpus (split into train/val **by
document**) or a synthetic generator (text render: tokenized by the run's
tokenizer; reserved render: symbols get their own ids after the tokenizer's
vocabulary). Control sets (natural text disjoint from another dataset's
documents) use ``exclude``. A **derived** dataset (``kind`` + ``source``) is
built from another prepared dataset by a registered kind (data/derived.py),
after the datasets it reads.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np

from ..config import check, from_dict, to_dict
from ..errors import ConfigError, DataError
from ..io import atomic_dir, read_json, write_json
from ..corpora.base import ReadStats, is_validation
from .engine import (
    DEFAULT_UNIT_TOKENS, DocumentJob, adopt_units, job_key, link_shards, rows_in_order, run_units, unit_path,
    work_dir,
)
from .packing import ConcatPacker, Doc, PackStats
from .shards import ShardWriter
from .tokenizer import (
    TokenizerConfig, backend, encode_batch, eos_id, files_hash, load_hf_tokenizer, load_tokenizer,
    open_tokenizer, save_tokenizer, special_ids, tokenizer_hash, tokenizer_size, train_bpe,
)
from ..seeds import VAL_SEED_OFFSET


@dataclass
class DatasetSpec:
    """One named dataset of an experiment: natural text (``corpus``), synthetic (``generator``) or
    derived from another dataset of the experiment (``kind`` + ``source``, data/derived.py)."""

    corpus: str | None = None  # name of an entry in the experiment's ``corpora``
    generator: str | None = None  # registered generator name (see ``preschool generate --list``)
    preset: str | None = None  # named generator parameter set
    params: dict[str, Any] = field(default_factory=dict)
    render: Literal["text", "reserved"] = "text"
    tokens: int = 0  # training tokens to build (rounded down to whole rows)
    val_tokens: int = 0  # held-out tokens to build (corpus: from held-out documents)
    val_fraction: float = 0.02  # corpus: share of documents held out (by document id hash)
    pack: Literal["concat", "pad"] = "concat"
    exact_fill: bool = False  # generator: fit its length so one document + EOS is exactly one row (verified)
    exclude: list[str] = field(default_factory=list)  # corpus: skip documents used by these datasets (Control)
    l2t: dict[str, Any] | None = None  # corpus: turn documents into L2T samples (l2t.build.BuildConfig fields)
    unit_tokens: int = DEFAULT_UNIT_TOKENS  # work unit size (data/engine.py): sets the bytes; the worker count does not
    kind: str | None = None  # a derived dataset kind (data/derived.py: DATASET_KINDS), built from `source`
    source: str | None = None  # derived: the dataset of this experiment it is built from; `params` configure the kind

    def validate(self) -> None:
        if self.kind is not None:
            check(self.source is not None, "source", f"a derived dataset (kind {self.kind!r}) names its source dataset")
            check(self.corpus is None and self.generator is None and self.l2t is None, "kind",
                  "a derived dataset is built from its source: no corpus, generator or l2t")
            from .derived import kind_of

            kind_of(self)  # unknown kind / bad params name their field
            return
        check(self.source is None, "source", "only a derived dataset (kind: ...) has a source")
        check((self.corpus is None) != (self.generator is None), "corpus",
              "give exactly one of 'corpus' (natural text) or 'generator' (synthetic)")
        check(self.tokens > 0, "tokens", f"must be > 0, got {self.tokens}")
        check(self.val_tokens >= 0, "val_tokens", f"must be >= 0, got {self.val_tokens}")
        check(self.unit_tokens >= 1, "unit_tokens", f"must be >= 1, got {self.unit_tokens}")
        check(0.0 <= self.val_fraction < 1.0, "val_fraction", f"must be in [0, 1), got {self.val_fraction}")
        check(self.l2t is None or self.corpus is not None, "l2t", "L2T needs a 'corpus' to transform")
        check(self.l2t is None or not self.exclude, "exclude", "not supported together with 'l2t'")
        if self.generator is not None:
            from ..synthetic import GENERATORS, PRESETS

            GENERATORS.get(self.generator, "generator")
            if self.preset is not None:
                check(self.preset in PRESETS, "preset", f"unknown preset {self.preset!r}; known: {sorted(PRESETS)}")
                check(PRESETS[self.preset][0] == self.generator, "preset",
                      f"preset {self.preset!r} is for generator {PRESETS[self.preset][0]!r}")
            GENERATORS.build_config(self.generator, self.generator_params(), "params")

    def record(self) -> dict:
        """The spec as recorded in ``dataset.json`` and hashed: its fields, without the derived-dataset
        fields when unset (so datasets prepared before derived kinds existed stay up to date)."""
        d = to_dict(self)
        if self.kind is None:
            d.pop("kind", None)
            d.pop("source", None)
        return d

    def generator_params(self) -> dict:
        from ..synthetic import PRESETS

        base: dict = {}
        if self.preset is not None:
            base = {k: v for k, v in PRESETS[self.preset][1].items() if not k.startswith("_")}
        return {**base, **self.params}


def spec_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(to_dict(obj), sort_keys=True).encode()).hexdigest()[:16]


def _corpus_docs(corpus_cfg, stats=None) -> Iterator:
    from ..corpora import iter_documents

    return iter_documents(corpus_cfg, stats)


def build_tokenizer(cfg: TokenizerConfig, corpus_cfg, out: Path, progress: bool = True):
    """Train (on the first ``sample_documents`` documents), load from ``path`` or from the HF ``name`` the
    tokenizer; save it under ``out``. A saved one is reused, unless the data manifest beside it records
    another tokenizer config (a ConfigError: its datasets were tokenized with that one)."""
    if (out / "tokenizer.json").is_file():
        _check_same_tokenizer(cfg, out)
        return open_tokenizer(cfg, out)
    if cfg.kind == "hf":
        tok = load_hf_tokenizer(cfg.name, cfg.eos_token, cfg.bos_token, cfg.pad_token, cfg.vocab_size)
    elif cfg.kind == "load":
        tok = load_tokenizer(cfg.path)
    else:
        docs = _corpus_docs(corpus_cfg)
        texts = (d.text for i, d in zip(range(cfg.sample_documents), docs))
        tok = train_bpe(texts, cfg.bpe_vocab_size, cfg.min_frequency, cfg.split_digits)
    with atomic_dir(out) as tmp:
        save_tokenizer(tok, tmp)
    # Hand back what is on disk: saving through HF adds a (no-op) post-processor, and a rerun
    # loads the file, so only the reloaded object hashes the same on the first run and every rerun.
    return open_tokenizer(cfg, out)


def tokenizer_record(cfg: TokenizerConfig) -> dict:
    """What the data manifest records of the tokenizer config: the fields that make the tokenizer."""
    if cfg.kind == "hf":
        keep = ("kind", "name", "eos_token", "bos_token", "pad_token")
    elif cfg.kind == "load":
        keep = ("kind", "path")
    else:
        keep = ("kind", "vocab_size", "sample_documents", "min_frequency", "split_digits")
    d = {k: v for k, v in to_dict(cfg).items() if k in keep}
    if cfg.kind == "train":
        d["vocab_size"] = cfg.bpe_vocab_size
    return d


def _check_same_tokenizer(cfg: TokenizerConfig, out: Path) -> None:
    manifest = out.parent / "manifest.json"
    if not manifest.is_file():
        return
    was = (read_json(manifest).get("tokenizer") or {}).get("config")
    now = tokenizer_record(cfg)
    if was is not None and was != now:  # manifests before tokenizer configs were recorded: nothing to compare
        diff = ", ".join(f"{k}: {was.get(k)!r} -> {now.get(k)!r}" for k in sorted(set(was) | set(now))
                         if was.get(k) != now.get(k))
        raise ConfigError("tokenizer", f"{out} was built from another tokenizer config ({diff}); its datasets "
                          "were tokenized with it: give the experiment a new 'out', or delete that data folder")


class CorpusJob(DocumentJob):
    """Natural text: units of consecutive documents, tokenized, split by document id, packed (concat + EOS)."""

    def __init__(self, corpus_cfg, tokenizer_json: str, row_len: int, seed: int, val_fraction: float,
                 splits: list[str], unit_tokens: int, excluded: set[str] | None = None,
                 read: ReadStats | None = None, eos: int | None = None):
        self.corpus_cfg, self.tokenizer_json, self.row_len = corpus_cfg, tokenizer_json, row_len
        self.eos = eos  # the id that ends each document (None: the tokenizer's <|endoftext|>)
        self.seed, self.val_fraction, self.splits, self.unit_tokens = seed, val_fraction, splits, unit_tokens
        self.excluded = excluded or set()
        self.init_reading(read)  # the parent's read counts (ReadStats), recorded in dataset.json
        self._tok = None

    def __getstate__(self):
        return {**super().__getstate__(), "_tok": None}

    def key(self) -> str:
        return job_key("corpus", to_dict(self.corpus_cfg), self.tokenizer_json, self.row_len, self.seed,
                       self.val_fraction, self.splits, self.unit_tokens, sorted(self.excluded), self.eos)

    def units(self, start=None):
        # files, datatrove readers and a streamed hf corpus can continue where a unit starts (iter_documents
        # positions); other sources (storybook, a non-streamed hf dataset) read again from their start
        from ..corpora import iter_documents

        m, token = start if start is not None else (0, {})
        docs = ((d.id, d.text, d.meta.get("position")) for d in iter_documents(self.corpus_cfg, self.read,
                                                                               start=token.get("position"))
                if d.id not in self.excluded)
        return self.document_units(docs, self.unit_tokens, first=m)

    def run(self, k: int, docs: list[tuple[str, str]], out: Path) -> dict:
        from tokenizers import Tokenizer

        if self._tok is None:
            self._tok = Tokenizer.from_str(self.tokenizer_json)
        eos = eos_id(self._tok) if self.eos is None else self.eos
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
                    block = packers[split].add(Doc(np.asarray(x, np.int64)))
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


def _write_corpus(name: str, spec: DatasetSpec, corpus_cfg, tok, row_len: int, seed: int, out: Path,
                  excluded: set[str], workers: int, progress: bool, final: Path, read: ReadStats) -> dict:
    """Tokenize + pack documents into train and val shard sets, splitting by document (see data/engine.py);
    ``read`` counts what the read up to the last unit taken gave (the same with any number of workers)."""
    n_rows = {"train": spec.tokens // row_len, "val": spec.val_tokens // row_len}
    n_rows = {s: n for s, n in n_rows.items() if n > 0}
    job = CorpusJob(corpus_cfg, backend(tok).to_str(), row_len, seed, spec.val_fraction, list(n_rows),
                    spec.unit_tokens, excluded, read, eos=special_ids(tok).eos)
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
                f"reader drops: {read.summary()}); lower the budget or give a larger corpus",
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


def _write_generator(spec: DatasetSpec, tok, row_len: int, seed: int, out: Path, workers: int,
                     progress: bool, final: Path) -> dict:
    from ..synthetic import GENERATORS
    from ..synthetic.write import SymbolEncoder, fit_generator, write_generator_shards

    base_vocab = tokenizer_size(tok)  # reserved symbols start after every id of the tokenizer (len(tokenizer))
    special = special_ids(tok)
    eos = special.eos
    if spec.render == "text":
        enc = SymbolEncoder("text", tokenizer_json=backend(tok).to_str())
    else:
        enc = SymbolEncoder("reserved", reserved_offset=base_vocab)
    params = spec.generator_params()
    params.setdefault("seed", seed)
    # Held-out items come from a disjoint seed stream (seed + a large odd offset).
    splits = {"train": (params, spec.tokens), "val": ({**params, "seed": params["seed"] + VAL_SEED_OFFSET}, spec.val_tokens)}
    manifests = {}
    for split, (p, tokens) in splits.items():
        if tokens // row_len == 0:
            continue
        if spec.exact_fill:  # one document (+ EOS) is exactly one row: the generator's length is fitted
            gen = fit_generator(spec.generator, p, enc, row_len, eos)
        else:
            gen = GENERATORS.build(spec.generator, p, "params")
        vocab = base_vocab if spec.render == "text" else base_vocab + gen.vocab_size
        extra = {"tokenizer_sha256": tokenizer_hash(tok), "split": split,
                 "reserved_ids": [base_vocab, vocab] if spec.render == "reserved" else None}
        manifests[split] = write_generator_shards(
            gen, enc, out / split, tokens // row_len, row_len, vocab, eos, workers=workers, pack_mode=spec.pack,
            pad_id=special.pad, progress=progress, manifest_extra=extra, exact_fill=spec.exact_fill,
            unit_tokens=spec.unit_tokens, resume_as=final.parent / f"{final.name}-{split}",
        )
    return manifests


def first_difference(a: Any, b: Any, path: str) -> str | None:
    """Dotted path of the first difference between two plain-data trees, with both values
    (``"data.pt.tokens (was 2000, now 3000)"``), or None if they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            d = first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a != b:
        return f"{path} (was {a!r}, now {b!r})"
    return None


@dataclass
class Stale:
    """A dataset already prepared under ``path`` that the config would now build differently."""

    path: Path
    dataset: str
    field: str  # the config key that changed, as the YAML spells it (data.pt.tokens, seq_len, corpora.txt.path)
    detail: str  # "was 2000, now 3000", or why

    def message(self, others: list["Stale"] = ()) -> str:
        also = f", and so were {', '.join(repr(o.dataset) for o in others)}" if others else ""
        return (f"{self.path}: dataset {self.dataset!r} was prepared with another {self.field} ({self.detail}){also}; "
                "nothing was changed: rerun with --rebuild to replace it (a run trained on it cannot then be "
                "resumed or reused)")


def _dataset_key(spec: DatasetSpec, seq_len: int, seed: int, thash: str, corpora: dict[str, Any]) -> dict:
    """What a natural-text or synthetic dataset is built from (its hash is ``dataset.json``'s ``hash``)."""
    return {"spec": spec.record(), "seq_len": seq_len, "seed": seed, "tokenizer": thash,
            "corpus": to_dict(corpora.get(spec.corpus)) if spec.corpus else None}


def _recorded(name: str, dpath: Path) -> dict | None:
    """The ``dataset.json`` of the dataset folder ``dpath`` (None: no folder there). A folder without a
    readable one is not a dataset prepare wrote, and is never replaced: DataError naming it."""
    if not dpath.exists():
        return None
    try:
        rec = read_json(dpath / "dataset.json")
    except (OSError, ValueError):
        rec = None
    if not isinstance(rec, dict):
        raise DataError(f"{dpath}: exists but is not a dataset prepare wrote (no readable dataset.json), so "
                        f"dataset {name!r} is not written over it; move it away")
    return rec


def _why_stale(name: str, spec: DatasetSpec, key: dict | None, rec: dict, seq_len: int, seed: int) -> tuple[str, str]:
    """(config key, detail) saying why dataset ``name``'s recorded build ``rec`` differs from ``key``."""
    d = first_difference(rec["key"], key, "") if key is not None and isinstance(rec.get("key"), dict) else None
    if d is None:  # a dataset.json from before builds recorded their key: compare what it does record
        d = first_difference(rec.get("spec"), spec.record(), "spec")
    if d:
        path, _, detail = d.partition(" ")
        detail = detail[1:-1]
        if path.startswith("spec."):
            return f"data.{name}.{path[len('spec.'):]}", detail
        if path.startswith("corpus."):
            return f"corpora.{spec.corpus}.{path[len('corpus.'):]}", detail
        if path == "tokenizer":
            return "tokenizer", "its tokens came from another tokenizer"
        return path, detail
    for m in (rec.get("splits") or {}).values():
        if isinstance(m, dict) and m.get("row_len") not in (None, seq_len + 1):
            return "seq_len", f"was {m['row_len'] - 1}, now {seq_len}"
        if isinstance(m, dict) and m.get("seed") not in (None, seed):
            return "seed", f"was {m['seed']}, now {seed}"
    return f"data.{name}", "built from another corpus, seed or tokenizer"


def plan_data(out: str | Path, corpora: dict[str, Any], datasets: dict[str, DatasetSpec], seq_len: int,
              seed: int, thash: str | None) -> list[Stale]:
    """The datasets under ``out`` prepared from another spec than the config's, which :func:`prepare_data`
    would replace (``thash``: the hash of the tokenizer they are tokenized with, None when there is none
    yet). Reads only; a folder there that is no prepared dataset raises DataError."""
    out = Path(out)
    stale: list[Stale] = []
    hashes: dict[str, str | None] = {}
    for name, spec in datasets.items():
        if spec.kind is not None:
            continue
        key = _dataset_key(spec, seq_len, seed, thash, corpora) if thash else None
        hashes[name] = spec_hash(key) if key else None
        rec = _recorded(name, out / name)
        if rec is None or (key is not None and rec.get("hash") == hashes[name]):
            continue
        why = (_why_stale(name, spec, key, rec, seq_len, seed) if key is not None
               else ("tokenizer", f"the tokenizer it was tokenized with, {out / 'tokenizer'}, is gone"))
        stale.append(Stale(out / name, name, *why))
    pending = [n for n in datasets if datasets[n].kind is not None]
    while pending:  # derived datasets: their hash follows their source's
        ready = [n for n in pending if datasets[n].source in hashes]
        if not ready:
            break  # a missing source or a cycle: prepare_data names it
        for name in ready:
            pending.remove(name)
            spec, src = datasets[name], hashes[datasets[name].source]
            hashes[name] = spec_hash({"spec": spec.record(), "source": src}) if src else None
            rec = _recorded(name, out / name)
            if rec is None or (src is not None and rec.get("hash") == hashes[name]):
                continue
            d = first_difference(rec.get("spec"), spec.record(), f"data.{name}")
            field, _, detail = d.partition(" ") if d else (f"data.{name}.source", "", "")
            stale.append(Stale(out / name, name, field,
                               detail[1:-1] if d else f"dataset {spec.source!r} it is built from changes"))
    return stale


def check_data(out: str | Path, tokenizer_cfg: TokenizerConfig, corpora: dict[str, Any],
               datasets: dict[str, DatasetSpec], seq_len: int, seed: int = 0, rebuild: bool = False) -> list[Stale]:
    """What :func:`prepare_data` would replace under ``out`` (:func:`plan_data` against the tokenizer already
    there); DataError naming the first, unless ``rebuild``. Writes nothing."""
    tok_dir = Path(out) / "tokenizer"
    thash = (tokenizer_hash(build_tokenizer(tokenizer_cfg, None, tok_dir, False))
             if (tok_dir / "tokenizer.json").is_file() else None)  # an existing tokenizer is only loaded
    stale = plan_data(out, corpora, datasets, seq_len, seed, thash)
    if stale and not rebuild:
        raise DataError(stale[0].message(stale[1:]))
    return stale


def prepare_data(
    out: str | Path,
    tokenizer_cfg: TokenizerConfig,
    corpora: dict[str, Any],
    datasets: dict[str, DatasetSpec],
    seq_len: int,
    seed: int = 0,
    workers: int = 1,
    progress: bool = True,
    rebuild: bool = False,
) -> dict:
    """Build (or reuse) the tokenizer and every dataset; return the data manifest.

    ``corpora`` maps names to ``CorpusConfig``; the tokenizer is trained on the
    first corpus unless it is loaded from a path. A dataset already prepared from
    the same spec is reused; one prepared from another spec (:func:`check_data`)
    raises DataError naming it and the field before anything is written, unless
    ``rebuild``, which replaces it. A folder that is no prepared dataset is never replaced.
    """
    out = Path(out)
    check_data(out, tokenizer_cfg, corpora, datasets, seq_len, seed, rebuild)
    out.mkdir(parents=True, exist_ok=True)
    row_len = seq_len + 1
    first_corpus = next(iter(corpora.values())) if corpora else None
    if tokenizer_cfg.kind == "train" and first_corpus is None:
        raise ConfigError("tokenizer.kind", "training a tokenizer needs a corpus; add one under 'corpora' or load one")
    tok = build_tokenizer(tokenizer_cfg, first_corpus, out / "tokenizer", progress)
    thash = tokenizer_hash(tok)
    # which tokenizer (config, content hash of its saved files) and its special ids: a rerun with another
    # tokenizer config is refused (build_tokenizer), and a changed one changes every dataset's key
    manifest: dict[str, Any] = {"tokenizer": {"path": "tokenizer", "sha256": thash, "vocab_size": tokenizer_size(tok),
                                              "config": tokenizer_record(tokenizer_cfg),
                                              "files_sha256": files_hash(out / "tokenizer"),
                                              "special_ids": special_ids(tok).as_dict()},
                                "seq_len": seq_len, "datasets": {}}
    # Order: datasets without exclusions first, so Control sets can read their doc ids; derived ones last.
    order = sorted((n for n in datasets if datasets[n].kind is None), key=lambda n: len(datasets[n].exclude))
    for name in order:
        spec = datasets[name]
        dpath = out / name
        key = _dataset_key(spec, seq_len, seed, thash, corpora)
        h = spec_hash(key)
        if _up_to_date(manifest, name, dpath, h):
            continue
        print(f"[preschool] data {name}: building ({dpath})")
        read = ReadStats()  # what the corpus read gave and dropped, recorded in dataset.json
        with atomic_dir(dpath) as tmp:
            if spec.corpus is not None:
                if spec.corpus not in corpora:
                    raise ConfigError(f"data.{name}.corpus", f"no corpus named {spec.corpus!r}; have {sorted(corpora)}")
                excluded: set[str] = set()
                for other in spec.exclude:
                    for split in ("train", "val"):
                        f = out / other / f"{split}.doc_ids.txt"
                        if f.is_file():
                            excluded.update(f.read_text(encoding="utf-8").split("\n"))
                if spec.l2t is not None:
                    from ..l2t.prepare import write_l2t_dataset

                    m = write_l2t_dataset(name, spec.l2t, corpora[spec.corpus], tok, row_len, seed, tmp,
                                          spec.tokens, spec.val_tokens, spec.val_fraction, workers, progress, read,
                                          unit_tokens=spec.unit_tokens, resume_as=dpath)
                else:
                    m = _write_corpus(name, spec, corpora[spec.corpus], tok, row_len, seed, tmp, excluded, workers,
                                      progress, dpath, read)
            else:
                m = _write_generator(spec, tok, row_len, seed, tmp, workers, progress, dpath)
            entry = {"hash": h, "key": key, "spec": spec.record(),
                     "splits": {s: {k: v for k, v in mm.items() if k != "shards"} for s, mm in m.items()},
                     "vocab_size": max(mm["vocab_size"] for mm in m.values())}
            if spec.corpus is not None:
                entry["read"] = read.as_dict()
                if read.drops:
                    print(f"[preschool] data {name}: reader drops: {read.summary()}")
            write_json(tmp / "dataset.json", entry)
        manifest["datasets"][name] = entry
    _prepare_derived(out, datasets, manifest, progress)
    write_json(out / "manifest.json", manifest)
    return manifest


def _up_to_date(manifest: dict, name: str, dpath: Path, h: str) -> bool:
    """Whether ``dpath`` already holds dataset ``name`` built with hash ``h`` (then its entry joins ``manifest``)."""
    done = dpath / "dataset.json"
    if not (done.is_file() and read_json(done).get("hash") == h):
        return False
    manifest["datasets"][name] = read_json(done)
    print(f"[preschool] data {name}: up to date ({dpath})")
    return True


def _prepare_derived(out: Path, datasets: dict[str, DatasetSpec], manifest: dict, progress: bool) -> None:
    """Build every derived dataset once its source is built (a derived source first); rebuilt only when
    its kind, params or the source's hash change."""
    from .derived import kind_of

    pending = [n for n in datasets if datasets[n].kind is not None]
    while pending:
        ready = [n for n in pending if datasets[n].source in manifest["datasets"]]
        if not ready:
            name = pending[0]
            raise ConfigError(f"data.{name}.source", f"no dataset named {datasets[name].source!r} to derive from "
                              "(or a cycle of derived datasets)")
        for name in ready:
            pending.remove(name)
            spec = datasets[name]
            kind = kind_of(spec, f"data.{name}")
            dpath = out / name
            h = spec_hash({"spec": spec.record(), "source": manifest["datasets"][spec.source]["hash"]})
            if _up_to_date(manifest, name, dpath, h):
                continue
            print(f"[preschool] data {name}: building {spec.kind} from {spec.source} ({dpath})")
            with atomic_dir(dpath) as tmp:
                m = kind.build(out / spec.source, tmp, progress)
                entry = {"hash": h, "spec": spec.record(), "source": spec.source, "parts": kind.parts(),
                         "splits": {s: {k: v for k, v in mm.items() if k != "shards"} for s, mm in m.items()},
                         "vocab_size": max(mm["vocab_size"] for mm in m.values())}
                write_json(tmp / "dataset.json", entry)
            manifest["datasets"][name] = entry
