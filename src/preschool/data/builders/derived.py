"""derived: a dataset built from another dataset of the experiment by a registered kind (``kind:`` + ``source:``;
data/derived.py, kinds in data/kinds/ and plug-ins)."""

from __future__ import annotations

from pathlib import Path

from ...config import check
from ...errors import ConfigError
from ..builder import DATASET_BUILDERS, BuildContext, DatasetBuilder, dataset_entry, first_difference


@DATASET_BUILDERS.register("derived")
class DerivedBuilder(DatasetBuilder):
    """A derived kind applied to its source dataset; rebuilt when the kind, its params or the source change."""

    stage = 1  # after every tokenized dataset: a kind may read any of them

    def claims(self, spec) -> bool:
        return spec.kind is not None

    def validate(self, spec) -> None:
        check(spec.source is not None, "source", f"a derived dataset (kind {spec.kind!r}) names its source dataset")
        check(spec.corpus is None and spec.generator is None and spec.l2t is None, "kind",
              "a derived dataset is built from its source: no corpus, generator or l2t")
        from ..derived import kind_of

        kind_of(spec)  # unknown kind / bad params name their field

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
        from ..derived import kind_of

        kind = kind_of(spec, f"data.{name}")
        m = kind.build(ctx.out / spec.source, tmp, ctx.progress)
        return dataset_entry({"hash": h, "spec": spec.record(), "source": spec.source, "parts": kind.parts()}, m)
