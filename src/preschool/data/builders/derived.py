"""derived: a dataset built from another dataset of the experiment (``kind:`` + ``source:`` in ``data``).

A derived dataset is declared like any other dataset of an experiment and
built by ``prepare`` after the datasets it reads::

    data:
      base: {corpus: storybook, tokens: 1_200_000, val_tokens: 16_384}
      c4: {kind: compartmented, source: base, params: {n_compartments: 4}}

Its kind is a dataset builder like the others: a :class:`DatasetKind` subclass
registered in ``DATASET_BUILDERS`` with its config dataclass (``params``), in
its own file in ``data/builders/`` or in an extension package (``compartments/builders.py``:
``compartmented``, ``shifted``). The ``derived`` builder below reads the spec
(:class:`DerivedSpec`) and runs the kind it names. ``build`` writes ``train/``
and/or ``val/`` shard sets into the dataset folder and may add **parts**:
sub-folders ``<dataset>/<part>/val/`` that an arm training on the dataset
scores as ``val/<part>`` (one val set per compartment, say). The folder is
written atomically and rebuilt only when the kind, its params or the source's
content hash change (``dataset.json`` records them).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config import check
from ...errors import ConfigError
from ..builder import DATASET_BUILDERS, BuildContext, DatasetBuilder, DatasetSpec, dataset_entry, first_difference
from ..flat_spec import FlatRecord


class DatasetKind:
    """A derived dataset: ``params`` (the registered config) turn the ``source`` dataset into a new one.
    A subclass registers in ``DATASET_BUILDERS`` under its kind's name, ``config=`` its params dataclass."""

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def build(self, source: Path, out: Path, progress: bool = False) -> dict[str, dict]:
        """Write the dataset from ``source`` (a prepared dataset folder) into ``out``; return
        ``{split: shard manifest}`` for the splits written (``train``, ``val``)."""
        raise NotImplementedError

    def parts(self) -> list[str]:
        """Names of the val sets written as ``<out>/<part>/val/`` (scored as ``val/<part>``); none by default."""
        return []

    def vocab_size(self, source_vocab: int) -> int:
        """The vocabulary of the shards ``build`` writes from a source over ``source_vocab`` ids."""
        return source_vocab


def _is_kind(entry) -> bool:
    return isinstance(entry.cls, type) and issubclass(entry.cls, DatasetKind)


def kind_of(spec, field: str = "") -> DatasetKind:
    """The built :class:`DatasetKind` of a derived spec (its ``kind`` and ``params``); errors name
    ``<field>.kind`` / ``<field>.params``."""
    pre = f"{field}." if field else ""
    if spec.kind not in DATASET_BUILDERS or not _is_kind(DATASET_BUILDERS.get(spec.kind)):
        kinds = [e.name for e in DATASET_BUILDERS if _is_kind(e)]
        close = difflib.get_close_matches(spec.kind, kinds, n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(pre + "kind", f"unknown dataset kind {spec.kind!r}{hint} (known: {', '.join(kinds)})")
    return DATASET_BUILDERS.get(spec.kind).cls(DATASET_BUILDERS.build_config(spec.kind, spec.params, pre + "params"))


def dataset_parts(datasets: dict, name: str) -> list[str]:
    """The parts of dataset ``name`` of ``datasets`` (``{name: DatasetSpec}``, ``DatasetSpec.parts``); []
    for a base dataset."""
    return datasets[name].parts(f"data.{name}")


@dataclass(kw_only=True)
class DerivedSpec(FlatRecord, DatasetSpec):
    """``data.<name>: {kind: <dataset kind>, source: <dataset>, params: {...}}``: built from another dataset.

    ``params`` are the kind's config (its registered dataclass), not a generator's. No
    budgets of its own: the kind decides what of ``source`` it writes."""

    named_by = "kind"
    kind: str  # a registered dataset kind (a DatasetKind in DATASET_BUILDERS)
    source: str  # the dataset of this experiment it is built from
    params: dict[str, Any] = field(default_factory=dict)  # the kind's config

    def validate(self) -> None:
        kind_of(self)  # unknown kind / bad params name their field

    def check_refs(self, name: str, experiment: Any) -> None:
        check(self.source in experiment.data and self.source != name, f"data.{name}.source",
              f"no other dataset named {self.source!r}; have {sorted(experiment.data)}")

    @property
    def source_dataset(self) -> str | None:
        return self.source

    def parts(self, field: str) -> list[str]:
        return kind_of(self, field).parts()


@DATASET_BUILDERS.register("derived", config=DerivedSpec)
class DerivedBuilder(DatasetBuilder):
    """A derived kind applied to its source dataset; rebuilt when the kind, its params or the source change."""

    stage = 1  # after every tokenized dataset: a kind may read any of them

    def needs(self, spec) -> list[str]:
        return [spec.source]

    def unmet(self, name: str, spec) -> ConfigError:
        return ConfigError(f"data.{name}.source", f"no dataset named {spec.source!r} to derive from "
                           "(or a cycle of derived datasets)")

    def key(self, name: str, spec, ctx: BuildContext) -> dict | None:
        src = ctx.hashes.get(spec.source)
        return {"spec": spec.record(), "source": src} if src else None

    def why_stale(self, name: str, spec, key: dict | None, rec: dict, ctx: BuildContext) -> tuple[str, str]:
        d = first_difference(rec.get("spec"), spec.record(), f"data.{name}")
        if d is None:
            return f"data.{name}.source", f"dataset {spec.source!r} it is built from changes"
        field, _, detail = d.partition(" ")
        return field, detail[1:-1]

    def describe(self, name: str, spec) -> str:
        return f"{spec.kind} from {spec.source} "

    def build(self, name: str, spec, key: dict, h: str, ctx: BuildContext, tmp: Path, final: Path) -> dict:
        kind = kind_of(spec, f"data.{name}")
        m = kind.build(ctx.out / spec.source, tmp, ctx.progress)
        return dataset_entry({"hash": h, "spec": spec.record(), "source": spec.source, "parts": kind.parts()}, m)
