"""derived: a dataset built from another dataset of the experiment by a registered kind (``kind:`` + ``source:``;
data/derived.py, kinds in data/kinds/ and plug-ins)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config import check
from ...errors import ConfigError
from ..builder import DATASET_BUILDERS, BuildContext, DatasetBuilder, DatasetSpec, dataset_entry, first_difference
from ..derived import kind_of


@dataclass(kw_only=True)
class DerivedSpec(DatasetSpec):
    """``data.<name>: {kind: <dataset kind>, source: <dataset>, params: {...}}``: built from another dataset.

    ``params`` are the kind's config (its registered dataclass, ``DATASET_KINDS``), not a generator's. No
    budgets of its own: the kind decides what of ``source`` it writes."""

    named_by = "kind"
    recorded_flat = True
    kind: str  # a registered dataset kind (data/kinds/, a plug-in's kinds module)
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
