"""Dataset builders: how ``prepare`` turns each ``data.<name>`` spec into a dataset folder.

Every dataset of an experiment is built by the one builder that claims its spec
(:data:`DATASET_BUILDERS`, one builder per file: ``corpus`` and ``derived`` in
``data/builders/``; ``generator`` in ``synthetic/builder.py`` and ``l2t`` in
``l2t/builder.py``, because those packages build on ``data`` and ``data`` never imports
them). ``prepare`` (data/prepare.py) is then one
loop over :func:`build_order`: for each dataset, the builder says what it is built
from (:meth:`DatasetBuilder.key`, hashed into ``dataset.json``), why a folder
prepared earlier differs (:meth:`DatasetBuilder.why_stale`) and writes it
(:meth:`DatasetBuilder.build`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import check, to_dict
from ..errors import ConfigError
from ..registry import Registry

# Where builders live: every module of data/builders/, and the one builder module of each package above data
# that prepare builds from. A new builder is one new file in data/builders/ (or a package's builder.py).
DATASET_BUILDERS = Registry("dataset builder", packages=(
    "preschool.data.builders", "preschool.synthetic.builder", "preschool.l2t.builder"))


@dataclass
class BuildContext:
    """What every builder of one ``prepare`` sees."""

    out: Path  # the data folder: <out>/<dataset>/ per dataset, <out>/tokenizer/
    corpora: dict[str, Any]  # name -> CorpusConfig
    datasets: dict[str, Any]  # name -> DatasetSpec
    seq_len: int
    seed: int
    thash: str | None  # the tokenizer's hash (None: no tokenizer yet, when only planning)
    tok: Any = None  # the tokenizer (None when only planning)
    workers: int = 1
    progress: bool = False
    hashes: dict[str, str | None] = field(default_factory=dict)  # dataset -> hash, for those ordered before

    @property
    def row_len(self) -> int:
        return self.seq_len + 1


class DatasetBuilder:
    """Builds the datasets whose spec it :meth:`claims`. A subclass registers itself in its own file of
    ``data/builders/`` (or in ``synthetic/builder.py`` / ``l2t/builder.py``) with
    ``@DATASET_BUILDERS.register("<name>")``."""

    stage = 0  # builders of a lower stage build first (derived datasets: after every dataset they may read)

    def claims(self, spec) -> bool:
        """Whether this builder builds ``spec`` (exactly one builder claims a valid spec)."""
        raise NotImplementedError

    def validate(self, spec) -> None:
        """ConfigError naming the field of ``spec`` that this builder cannot build from."""

    def order(self, spec) -> int:
        """Position within the builder's stage (lower first; ties keep the config's order)."""
        return 0

    def needs(self, spec) -> list[str]:
        """Datasets of the experiment that must be built before ``spec``."""
        return []

    def unmet(self, name: str, spec) -> ConfigError:
        """The error when ``needs`` can never be met (a missing dataset or a cycle)."""
        return ConfigError(f"data.{name}", f"needs {self.needs(spec)}, which cannot all be built first")

    def key(self, name: str, spec, ctx: BuildContext) -> dict | None:
        """What the dataset is built from (its hash is ``dataset.json``'s ``hash``); None when that is not
        known yet (planning without a tokenizer, or a source whose hash is unknown)."""
        raise NotImplementedError

    def why_stale(self, name: str, spec, key: dict | None, rec: dict, ctx: BuildContext) -> tuple[str, str]:
        """(config key, detail): why the ``dataset.json`` ``rec`` found for dataset ``name`` differs from ``key``."""
        raise NotImplementedError

    def describe(self, name: str, spec) -> str:
        """What the build message says is built (after ``building``)."""
        return ""

    def build(self, name: str, spec, key: dict, h: str, ctx: BuildContext, tmp: Path, final: Path) -> dict:
        """Write dataset ``name`` into ``tmp`` (renamed to ``final`` once done); return its ``dataset.json``."""
        raise NotImplementedError


def builder_of(spec) -> DatasetBuilder:
    """The builder that claims ``spec``; ConfigError (field ``corpus``) when none does."""
    found = [b for b in (e.cls() for e in DATASET_BUILDERS) if b.claims(spec)]
    if not found:
        raise ConfigError("corpus", "give exactly one of 'corpus' (natural text) or 'generator' (synthetic)")
    if len(found) > 1:  # a builder's claims overlap another's: a bug in the builders, not in the config
        raise AssertionError(f"dataset builders {[b.registry_name for b in found]} all claim {spec}")
    return found[0]


def build_order(datasets: dict[str, Any]) -> list[str]:
    """The names of ``datasets`` in build order: stage by stage (:attr:`DatasetBuilder.stage`), and within a
    stage in rounds, each round every dataset whose :meth:`~DatasetBuilder.needs` earlier rounds built, by
    :meth:`~DatasetBuilder.order` (stable). A need never met raises the builder's :meth:`~DatasetBuilder.unmet`."""
    builders = {n: builder_of(s) for n, s in datasets.items()}
    done: list[str] = []
    for stage in sorted({b.stage for b in builders.values()}):
        pending = sorted((n for n in datasets if builders[n].stage == stage),
                         key=lambda n: builders[n].order(datasets[n]))
        while pending:
            ready = [n for n in pending if all(d in done for d in builders[n].needs(datasets[n]))]
            if not ready:
                raise builders[pending[0]].unmet(pending[0], datasets[pending[0]])
            done += ready
            pending = [n for n in pending if n not in ready]
    return done


def spec_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(to_dict(obj), sort_keys=True).encode()).hexdigest()[:16]


def dataset_entry(head: dict, manifests: dict[str, dict], **tail: Any) -> dict:
    """A ``dataset.json``: ``head``, then each split's shard manifest without its shard list, the
    largest vocabulary of the splits, then ``tail``."""
    return {**head, "splits": {s: {k: v for k, v in m.items() if k != "shards"} for s, m in manifests.items()},
            "vocab_size": max(m["vocab_size"] for m in manifests.values()), **tail}


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


class TokenizedBuilder(DatasetBuilder):
    """A dataset tokenized by the experiment's tokenizer (corpus, generator, L2T): what every such spec
    must satisfy, what it is built from and why an earlier build differs."""

    def validate(self, spec) -> None:
        check((spec.corpus is None) != (spec.generator is None), "corpus",
              "give exactly one of 'corpus' (natural text) or 'generator' (synthetic)")
        check(spec.tokens > 0, "tokens", f"must be > 0, got {spec.tokens}")
        check(spec.val_tokens >= 0, "val_tokens", f"must be >= 0, got {spec.val_tokens}")
        check(spec.unit_tokens >= 1, "unit_tokens", f"must be >= 1, got {spec.unit_tokens}")
        check(0.0 <= spec.val_fraction < 1.0, "val_fraction", f"must be in [0, 1), got {spec.val_fraction}")
        check(spec.l2t is None or spec.corpus is not None, "l2t", "L2T needs a 'corpus' to transform")
        check(spec.l2t is None or not spec.exclude, "exclude", "not supported together with 'l2t'")

    def key(self, name: str, spec, ctx: BuildContext) -> dict | None:
        if ctx.thash is None:
            return None
        return {"spec": spec.record(), "seq_len": ctx.seq_len, "seed": ctx.seed, "tokenizer": ctx.thash,
                "corpus": to_dict(ctx.corpora.get(spec.corpus)) if spec.corpus else None}

    def why_stale(self, name: str, spec, key: dict | None, rec: dict, ctx: BuildContext) -> tuple[str, str]:
        if key is None:
            return "tokenizer", f"the tokenizer it was tokenized with, {ctx.out / 'tokenizer'}, is gone"
        d = first_difference(rec["key"], key, "") if isinstance(rec.get("key"), dict) else None
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
            if isinstance(m, dict) and m.get("row_len") not in (None, ctx.seq_len + 1):
                return "seq_len", f"was {m['row_len'] - 1}, now {ctx.seq_len}"
            if isinstance(m, dict) and m.get("seed") not in (None, ctx.seed):
                return "seed", f"was {m['seed']}, now {ctx.seed}"
        return f"data.{name}", "built from another corpus, seed or tokenizer"

    def entry(self, spec, key: dict, h: str, manifests: dict[str, dict], **tail: Any) -> dict:
        return dataset_entry({"hash": h, "key": key, "spec": spec.record()}, manifests, **tail)
