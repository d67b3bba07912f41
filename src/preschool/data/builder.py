"""Dataset builders: how ``prepare`` turns each ``data.<name>`` spec into a dataset folder.

Every dataset of an experiment is built by the builder of its spec's variant
(:data:`DATASET_BUILDERS`, one builder per file: ``corpus`` and ``derived`` in
``data/builders/``, the kinds of derived dataset ``derived`` runs registered beside them;
``generator`` in ``synthetic/builder.py`` and ``l2t`` in
``l2t/builder.py``, because those packages build on ``data`` and ``data`` never imports
them). ``prepare`` (data/prepare.py) is then one
loop over :func:`build_order`: for each dataset, the builder says what it is built
from (:meth:`DatasetBuilder.key`, hashed into ``dataset.json``), why a folder
prepared earlier differs (:meth:`DatasetBuilder.why_stale`) and writes it
(:meth:`DatasetBuilder.build`).

Each builder registers with the spec class it reads (``config=``): a :class:`DatasetSpec`
variant, a dataclass with only that kind's fields, chosen from the YAML by the key that names
the kind (:attr:`DatasetSpec.named_by`: ``corpus``, ``generator``, ``l2t``, ``kind``). A new
way to build a dataset is therefore one file: its spec variant and its builder.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .. import layout
from ..config import check, to_dict
from ..errors import ConfigError
from ..registry import Registry
from .engine import DEFAULT_UNIT_TOKENS
from .flat_spec import FLAT_FIELDS, saved_default

# Where builders live: every module of data/builders/, the one builder module of each package above data
# that prepare builds from, and a plug-in's `builders` module. A new builder (with its spec variant), or a
# new kind of derived dataset (data/builders/derived.py), is one new file in data/builders/ (or a
# package's builder.py).
DATASET_BUILDERS = Registry("dataset builder", packages=(
    "preschool.data.builders", "preschool.synthetic.builder", "preschool.l2t.builder"), plugin_module="builders")


@dataclass
class DatasetSpec:
    """One named dataset of an experiment (``data.<name>``), read as the variant of the builder that builds it.

    The YAML key that names the kind picks the variant (:meth:`choose_variant`): ``kind:`` a derived
    dataset (``data/builders/derived.py``), ``l2t:`` L2T samples of a corpus (``l2t/builder.py``),
    ``corpus:`` natural text (``data/builders/corpus.py``), ``generator:`` synthetic items
    (``synthetic/builder.py``); a plug-in builder brings its own variant. Each variant is a dataclass
    subclass with only its own fields and ``validate()``; a field of another kind is a ConfigError naming
    ``data.<name>.<field>`` and the kind. What every variant offers the rest of preschool:
    :meth:`record`, :meth:`check_refs`, :attr:`source_dataset`, :attr:`has_val`, :meth:`parts`.
    """

    named_by: ClassVar[str] = ""  # the YAML key that names this kind (a field of the variant)

    @classmethod
    def choose_variant(cls, data: dict, path: str) -> type:
        """The variant class that reads the raw mapping ``data`` (config.from_dict's hook): the one whose
        :attr:`named_by` key is set (not null). A kind whose key is a field of another kind that is named
        too gives way to it (``corpus:`` + ``l2t:`` is L2T); two kinds named, or none, is a ConfigError."""
        if cls is not DatasetSpec:
            return cls  # a variant read directly
        variants = spec_variants()
        named = [v for v in variants if data.get(v.named_by) is not None]
        named = [v for v in named if not any(v.named_by in _init_fields(o) for o in named if o is not v)]
        if len(named) == 1:
            return named[0]
        ways = ", ".join(f"{v.named_by!r} ({variants[v]})" for v in variants)
        if not named:
            close = [c for k in data for c in difflib.get_close_matches(str(k), [v.named_by for v in variants], 1)]
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(path, f"says not how the dataset is built: give one of {ways}{hint}")
        a, b = sorted(named, key=lambda v: list(data).index(v.named_by))[:2]
        raise ConfigError(_field(path, b.named_by), f"a dataset is built one way: {a.named_by!r} ({variants[a]}) "
                          f"or {b.named_by!r} ({variants[b]}), not both")

    @classmethod
    def upgrade_raw(cls, data: dict, path: str) -> tuple[dict, list[str]]:
        """``data`` without the fields of other kinds that hold the flat spec's default (what a saved config of
        that time wrote for every dataset; ``data/flat_spec.py``); any other value of another kind's field is a ConfigError naming
        ``<path>.<field>`` and this kind. Keys of no kind are left for from_dict's "unknown key"."""
        own = _init_fields(cls)
        others = set(FLAT_FIELDS).union(*(_init_fields(v) for v in spec_variants()))
        out = {}
        for k, v in data.items():
            if k in own or k not in others:
                out[k] = v
            elif not saved_default(k, v):
                raise ConfigError(_field(path, k), f"does not apply to a {spec_variants().get(cls, cls.__name__)} "
                                  f"dataset (named by {cls.named_by!r}), which takes: {', '.join(own)}")
        return out, []

    def validate(self) -> None:
        """ConfigError naming the field (relative to the spec) that its builder cannot build from."""

    def record(self) -> dict:
        """The spec as recorded in ``dataset.json`` and hashed: its fields (a built-in kind records the flat
        form it had before the variants: ``data/flat_spec.FlatRecord``)."""
        return to_dict(self)

    def check_refs(self, name: str, experiment: Any) -> None:
        """Checks that need the rest of the experiment (``corpora``, ``data``, ``seq_len``, ``seed``): the
        corpora and datasets this spec names exist. Errors name ``data.<name>.<field>``."""

    @property
    def source_dataset(self) -> str | None:
        """The dataset of the experiment this one is derived from (None: built from corpora or a generator)."""
        return None

    @property
    def has_val(self) -> bool:
        """Whether the dataset writes a ``val/`` split of its own."""
        return False

    def parts(self, field: str) -> list[str]:
        """The val sets written as ``<dataset>/<part>/val/`` (scored as ``val/<part>``); errors name ``field``."""
        return []

    def document_start(self) -> str | None:
        """``"bos"`` when this kind always puts BOS before each document (L2T, as its reference), else None: a
        corpus dataset's ``separator: auto`` follows it, so every arm of an experiment separates documents alike."""
        return None


@dataclass(kw_only=True)
class TokenizedSpec(DatasetSpec):
    """A dataset tokenized by the experiment's tokenizer (corpus, generator, L2T): its token budgets."""

    tokens: int = 0  # training tokens to build (rounded down to whole rows)
    val_tokens: int = 0  # held-out tokens to build
    unit_tokens: int = DEFAULT_UNIT_TOKENS  # work unit size (data/engine.py): sets the bytes; the worker count does not

    def validate(self) -> None:
        check(self.tokens > 0, "tokens", f"must be > 0, got {self.tokens}")
        check(self.val_tokens >= 0, "val_tokens", f"must be >= 0, got {self.val_tokens}")
        check(self.unit_tokens >= 1, "unit_tokens", f"must be >= 1, got {self.unit_tokens}")

    def check_refs(self, name: str, experiment: Any) -> None:
        # budgets are cut into whole rows of seq_len + 1 tokens: one under a row would build no split at
        # all (or no val/ split that train.val and has_val count on), so it is refused before any write
        row = experiment.seq_len + 1
        for key, budget in (("tokens", self.tokens), ("val_tokens", self.val_tokens)):
            check(budget == 0 or budget >= row, f"data.{name}.{key}",
                  f"{budget} tokens make no row of seq_len + 1 = {row} tokens; give at least {row}"
                  + (" (or 0: no val split)" if key == "val_tokens" else "") + ", or a shorter seq_len")

    @property
    def has_val(self) -> bool:
        return self.val_tokens > 0


@dataclass(kw_only=True)
class DocumentSpec(TokenizedSpec):
    """A tokenized dataset read from one of the experiment's corpora, split into train/val by document."""

    corpus: str  # name of an entry in the experiment's ``corpora``
    val_fraction: float = 0.02  # share of documents held out (by document id hash); val_tokens come from them

    def validate(self) -> None:
        super().validate()
        check(0.0 <= self.val_fraction < 1.0, "val_fraction", f"must be in [0, 1), got {self.val_fraction}")

    def check_refs(self, name: str, experiment: Any) -> None:
        super().check_refs(name, experiment)
        check(self.corpus in experiment.corpora, f"data.{name}.corpus",
              f"no corpus named {self.corpus!r}; have {sorted(experiment.corpora)}")


def _init_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def _field(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def spec_variants() -> dict[type, str]:
    """Every spec variant a builder reads (``config=`` of its registration) -> the builder's name (the kinds
    of derived dataset register their params instead: they are built by ``derived``)."""
    out = {e.config: e.name for e in DATASET_BUILDERS
           if isinstance(e.config, type) and issubclass(e.config, DatasetSpec)}
    keys = [v.named_by for v in out]
    if len(set(keys)) != len(keys) or not all(keys):  # a bug in the builders, not in a config
        raise AssertionError(f"every dataset spec variant needs its own named_by key, got {keys}")
    return out


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
    """Builds the datasets of its spec variant. A subclass registers itself with that variant in its own file
    of ``data/builders/`` (or in ``synthetic/builder.py`` / ``l2t/builder.py``) with
    ``@DATASET_BUILDERS.register("<name>", config=<its DatasetSpec subclass>)``."""

    stage = 0  # builders of a lower stage build first (derived datasets: after every dataset they may read)

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

    def sources(self, spec, ctx: BuildContext) -> dict[str, Any]:
        """The corpora (name -> CorpusConfig) the dataset reads: their local files are fingerprinted into
        ``dataset.json`` and checked before it is reused (data/fingerprint.py)."""
        return {}

    def build(self, name: str, spec, key: dict, h: str, ctx: BuildContext, tmp: Path, final: Path) -> dict:
        """Write dataset ``name`` into ``tmp`` (renamed to ``final`` once done); return its ``dataset.json``."""
        raise NotImplementedError


def builder_of(spec: DatasetSpec) -> DatasetBuilder:
    """The builder registered with the spec's variant class."""
    for e in DATASET_BUILDERS:
        if e.config is type(spec):
            return e.cls()
    raise TypeError(f"no dataset builder reads a {type(spec).__name__}; known: "
                    f"{sorted(v.__name__ for v in spec_variants())}")


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
    """A dataset tokenized by the experiment's tokenizer (a :class:`TokenizedSpec`: corpus, generator, L2T):
    what it is built from and why an earlier build differs."""

    def key(self, name: str, spec: TokenizedSpec, ctx: BuildContext) -> dict | None:
        if ctx.thash is None:
            return None
        corpus = spec.corpus if isinstance(spec, DocumentSpec) else None
        return {"spec": spec.record(), "seq_len": ctx.seq_len, "seed": ctx.seed, "tokenizer": ctx.thash,
                "corpus": to_dict(ctx.corpora.get(corpus)) if corpus else None}

    def why_stale(self, name: str, spec, key: dict | None, rec: dict, ctx: BuildContext) -> tuple[str, str]:
        if key is None:
            return "tokenizer", f"the tokenizer it was tokenized with, {layout.tokenizer_dir(ctx.out)}, is gone"
        d = first_difference(rec["key"], key, "") if isinstance(rec.get("key"), dict) else None
        if d is None:  # a dataset.json from before builds recorded their key: compare what it does record
            d = first_difference(rec.get("spec"), spec.record(), "spec")
        if d:
            path, _, detail = d.partition(" ")
            detail = detail[1:-1]
            if path.startswith("spec."):
                return f"data.{name}.{path[len('spec.'):]}", detail
            if path.startswith("corpus.") and isinstance(spec, DocumentSpec):
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

    def sources(self, spec, ctx: BuildContext) -> dict[str, Any]:
        corpus = spec.corpus if isinstance(spec, DocumentSpec) else None
        return {corpus: ctx.corpora[corpus]} if corpus in ctx.corpora else {}

    def entry(self, spec, key: dict, h: str, manifests: dict[str, dict], **tail: Any) -> dict:
        return dataset_entry({"hash": h, "key": key, "spec": spec.record()}, manifests, **tail)
