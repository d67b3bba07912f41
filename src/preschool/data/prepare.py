"""Build an experiment's data once: tokenizer, then train/val shard sets per named dataset.

Layout under ``<out>/data/`` (see docs/interfaces.md)::

    tokenizer/                tokenizer.json + HF tokenizer files
    <dataset>/train/          shard set
    <dataset>/val/            shard set (when val_tokens > 0)
    manifest.json             every dataset's manifest + the tokenizer hash

Each dataset folder is written atomically and skipped on rerun when its
recorded spec (and the tokenizer hash) match, so an interrupted ``prepare``
resumes at dataset granularity.

Each dataset is built by the builder of its spec's variant (data/builder.py: ``DatasetSpec``, chosen
by the key that names the kind; one builder and its variant per file: data/builders/,
synthetic/builder.py, l2t/builder.py): natural text from a corpus (split into
train/val **by document**; Control sets, disjoint from another dataset's
documents, use ``exclude``), a synthetic generator (text render: tokenized by
the run's tokenizer; reserved render: symbols get their own ids after the
tokenizer's vocabulary), L2T from a corpus (``l2t:``), or a **derived** dataset
(``kind`` + ``source``) built from another prepared dataset by a registered kind
(data/builders/derived.py). ``prepare`` is one loop over them in dependency order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .. import layout
from ..config import to_dict
from ..errors import ConfigError, DataError
from ..io import atomic_dir, read_json, write_json
from ..layout import MANIFEST, check_dataset_name
from .builder import (  # noqa: F401 (DatasetSpec, first_difference: re-exported)
    BuildContext, DatasetSpec, build_order, builder_of, first_difference, spec_hash,
)
from .fingerprint import changed, fingerprint
from .tokenizer import (
    TokenizerConfig, files_hash, load_hf_tokenizer, load_tokenizer, open_tokenizer, save_tokenizer, special_ids,
    tokenizer_hash, tokenizer_size, train_bpe,
)


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
    manifest = out.parent / MANIFEST
    if not manifest.is_file():
        return
    was = (read_json(manifest).get("tokenizer") or {}).get("config")
    now = tokenizer_record(cfg)
    if was is not None and was != now:  # manifests before tokenizer configs were recorded: nothing to compare
        diff = ", ".join(f"{k}: {was.get(k)!r} -> {now.get(k)!r}" for k in sorted(set(was) | set(now))
                         if was.get(k) != now.get(k))
        raise ConfigError("tokenizer", f"{out} was built from another tokenizer config ({diff}); its datasets "
                          "were tokenized with it: give the experiment a new 'out', or delete that data folder")


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


def _recorded(name: str, dpath: Path) -> dict | None:
    """The ``dataset.json`` of the dataset folder ``dpath`` (None: no folder there). A folder without a
    readable one is not a dataset prepare wrote, and is never replaced: DataError naming it."""
    if not dpath.exists():
        return None
    try:
        rec = read_json(layout.dataset_record_path(dpath))
    except (OSError, ValueError):
        rec = None
    if not isinstance(rec, dict):
        raise DataError(f"{dpath}: exists but is not a dataset prepare wrote (no readable dataset.json), so "
                        f"dataset {name!r} is not written over it; move it away")
    return rec


def plan_data(out: str | Path, corpora: dict[str, Any], datasets: dict[str, DatasetSpec], seq_len: int,
              seed: int, thash: str | None) -> list[Stale]:
    """The datasets under ``out`` prepared from another spec than the config's, which :func:`prepare_data`
    would replace (``thash``: the hash of the tokenizer they are tokenized with, None when there is none
    yet). Reads only; a folder there that is no prepared dataset raises DataError."""
    for name in datasets:  # checked by the experiment's config too; a library caller gets the same refusal
        check_dataset_name(name)
    ctx = BuildContext(Path(out), corpora, datasets, seq_len, seed, thash)
    stale: list[Stale] = []
    for name in build_order(datasets):
        spec = datasets[name]
        builder = builder_of(spec)
        key = builder.key(name, spec, ctx)
        ctx.hashes[name] = spec_hash(key) if key is not None else None
        rec = _recorded(name, ctx.out / name)
        if rec is None:
            continue
        if key is not None and rec.get("hash") == ctx.hashes[name]:
            moved = changed(rec.get("sources"), builder.sources(spec, ctx))  # the same spec, an edited corpus?
            if moved is not None:
                stale.append(Stale(ctx.out / name, name, *moved))
            continue
        stale.append(Stale(ctx.out / name, name, *builder.why_stale(name, spec, key, rec, ctx)))
    return stale


def check_data(out: str | Path, tokenizer_cfg: TokenizerConfig, corpora: dict[str, Any],
               datasets: dict[str, DatasetSpec], seq_len: int, seed: int = 0, rebuild: bool = False) -> list[Stale]:
    """What :func:`prepare_data` would replace under ``out`` (:func:`plan_data` against the tokenizer already
    there); DataError naming the first, unless ``rebuild``. Writes nothing."""
    tok_dir = layout.tokenizer_dir(out)
    if tok_dir.is_dir() and not (tok_dir / "tokenizer.json").is_file() and (theirs := sorted(tok_dir.iterdir())):
        # prepare writes the tokenizer folder whole (io.atomic_dir): it would take these files with it
        raise DataError(f"{tok_dir}: holds files that are no tokenizer prepare made "
                        f"({', '.join(p.name for p in theirs[:5])}{', ...' if len(theirs) > 5 else ''}); "
                        "it is never written over: move them away or give another --out")
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
    from ..device import check_row_memory

    out = Path(out)
    check_row_memory(seq_len, workers, "seq_len")
    stale = check_data(out, tokenizer_cfg, corpora, datasets, seq_len, seed, rebuild)
    check_data_disk(out, datasets, {s.dataset for s in stale})
    out.mkdir(parents=True, exist_ok=True)
    first_corpus = next(iter(corpora.values())) if corpora else None
    if tokenizer_cfg.kind == "train" and first_corpus is None:
        raise ConfigError("tokenizer.kind", "training a tokenizer needs a corpus; add one under 'corpora' or load one")
    tok = build_tokenizer(tokenizer_cfg, first_corpus, layout.tokenizer_dir(out), progress)
    thash = tokenizer_hash(tok)
    # which tokenizer (config, content hash of its saved files) and its special ids: a rerun with another
    # tokenizer config is refused (build_tokenizer), and a changed one changes every dataset's key
    manifest: dict[str, Any] = {"tokenizer": {"path": layout.TOKENIZER, "sha256": thash, "vocab_size": tokenizer_size(tok),
                                              "config": tokenizer_record(tokenizer_cfg),
                                              "files_sha256": files_hash(layout.tokenizer_dir(out)),
                                              "special_ids": special_ids(tok).as_dict()},
                                "seq_len": seq_len, "datasets": {}}
    build_datasets(BuildContext(out, corpora, datasets, seq_len, seed, thash, tok, workers, progress), manifest,
                   {s.dataset for s in stale})
    write_json(out / layout.DATA_MANIFEST, manifest)
    return manifest


#: the least bytes a token takes in a shard (uint16 ids; larger vocabularies and the segment and loss-mask
#: arrays take more, the build's work units as much again)
TOKEN_BYTES_AT_LEAST = 2


def check_data_disk(out: Path, datasets: dict[str, DatasetSpec], rebuild: set[str] = frozenset()) -> None:
    """ConfigError naming the largest budget when the datasets not yet built under ``out`` (or to be rebuilt)
    need more disk than is free there, at :data:`TOKEN_BYTES_AT_LEAST` a token: ``tokens: 1e12`` stops here,
    not after hours of building."""
    todo = {n: s for n, s in datasets.items()
            if n in rebuild or not layout.dataset_record_path(out / n).is_file()}
    budgets = {n: getattr(s, "tokens", 0) + getattr(s, "val_tokens", 0) for n, s in todo.items()}
    if budgets:
        from ..device import check_disk

        largest = max(budgets, key=budgets.get)
        check_disk(TOKEN_BYTES_AT_LEAST * sum(budgets.values()), out, f"data.{largest}.tokens",
                   f"{sum(budgets.values()):,} tokens of {', '.join(sorted(budgets))}",
                   "give smaller budgets (or an --out on a larger disk)")


def build_datasets(ctx: BuildContext, manifest: dict, rebuild: set[str] = frozenset()) -> None:
    """Build every dataset of ``ctx.datasets`` not already up to date under ``ctx.out`` (those in ``rebuild``
    are rebuilt: their sources changed), each after those it reads (:func:`~.builder.build_order`), by the
    builder of its spec variant; its ``dataset.json`` (with its sources' fingerprints) joins
    ``manifest["datasets"]``."""
    for name in build_order(ctx.datasets):
        spec = ctx.datasets[name]
        builder = builder_of(spec)
        dpath = ctx.out / name
        key = builder.key(name, spec, ctx)
        h = ctx.hashes[name] = spec_hash(key)
        if name not in rebuild and _up_to_date(manifest, name, dpath, h):
            continue
        print(f"[preschool] data {name}: building {builder.describe(name, spec)}({dpath})")
        corpora = builder.sources(spec, ctx)
        sources = fingerprint(corpora)  # before the read: what it reads must still be these bytes after it
        with atomic_dir(dpath) as tmp:
            entry = builder.build(name, spec, key, h, ctx, tmp, dpath)
            moved = changed(sources, corpora)
            if moved is not None:
                raise DataError(f"{moved[1]} while dataset {name!r} was built from it ({moved[0]}); nothing "
                                "was written: rerun once the corpus stays as it is")
            if sources:
                entry["sources"] = sources
            write_json(layout.dataset_record_path(tmp), entry)
        manifest["datasets"][name] = entry


def _up_to_date(manifest: dict, name: str, dpath: Path, h: str) -> bool:
    """Whether ``dpath`` already holds dataset ``name`` built with hash ``h`` (then its entry joins ``manifest``)."""
    done = layout.dataset_record_path(dpath)
    if not (done.is_file() and read_json(done).get("hash") == h):
        return False
    manifest["datasets"][name] = read_json(done)
    print(f"[preschool] data {name}: up to date ({dpath})")
    return True
