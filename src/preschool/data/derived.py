"""Derived dataset kinds: a dataset built from another prepared dataset (``kind:`` + ``source:`` in ``data``).

A derived dataset is declared like any other dataset of an experiment and
built by ``prepare`` after the datasets it reads::

    data:
      base: {corpus: storybook, tokens: 1_200_000, val_tokens: 16_384}
      c4: {kind: compartmented, source: base, params: {n_compartments: 4}}

A kind is a :class:`DatasetKind` subclass registered in :data:`DATASET_KINDS`
with its config dataclass (``params``), in its own file in ``data/kinds/`` (the
registry imports every module there on first use) or in a plug-in's
``kinds`` module (``compartments/kinds.py``: ``compartmented``, ``shifted``). ``build`` writes
``train/`` and/or ``val/`` shard sets into the dataset folder and may add
**parts**: sub-folders ``<dataset>/<part>/val/`` that an arm training on the
dataset scores as ``val/<part>`` (one val set per compartment, say). The
folder is written atomically and rebuilt only when the kind, its params or
the source's content hash change (``dataset.json`` records them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..registry import Registry

DATASET_KINDS = Registry("dataset kind", packages=("preschool.data.kinds",), plugin_module="kinds")


class DatasetKind:
    """A derived dataset: ``params`` (the registered config) turn the ``source`` dataset into a new one."""

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


def kind_of(spec, field: str = "") -> DatasetKind:
    """The built :class:`DatasetKind` of a derived spec (its ``kind`` and ``params``; ``DerivedSpec`` in
    data/builders/derived.py); errors name ``<field>.kind`` / ``<field>.params``."""
    pre = f"{field}." if field else ""
    entry = DATASET_KINDS.get(spec.kind, pre + "kind")
    return entry.cls(DATASET_KINDS.build_config(spec.kind, spec.params, pre + "params"))


def dataset_parts(datasets: dict, name: str) -> list[str]:
    """The parts of dataset ``name`` of ``datasets`` (``{name: DatasetSpec}``, ``DatasetSpec.parts``); []
    for a base dataset."""
    return datasets[name].parts(f"data.{name}")
