"""The compartments extension package's dataset builders: the derived kinds ``compartmented`` and ``shifted`` (data/builders/derived.py).

``compartmented`` (Howe & Wingate's training presentation; compartments/dataset.py)::

    c4: {kind: compartmented, source: base, params: {n_compartments: 4, translation: {fraction: 0.25}}}

writes ``c4/train/`` (every source training row in one compartment, or a
translation row; ``plan.npy`` beside it) and one val set per compartment as
parts ``c4/c<i>/val/`` (the same source val rows shifted into each
compartment), plus ``c4/translation/val/`` when there are translation rows.
An arm training on ``c4`` scores them as ``val/c0``, ..., ``val/translation``.

``shifted`` (the audit's forced compartments; spec B.6)::

    novels_shifted: {kind: shifted, source: novels, params: {index: 1, of: 2}}

copies ``train/`` and ``val/`` with every id moved into compartment ``index``
of an offset presentation of ``of`` compartments (vocabulary ``of * V + 1``),
so no id is shared with the unshifted presentation.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..config import check
from ..data.builder import DATASET_BUILDERS
from ..data.builders.derived import DatasetKind
from ..data.shards import ShardSet, ShardWriter
from ..errors import DataError
from .dataset import CompartmentsConfig, write_compartment_val, write_compartmented, write_translation_val
from ..layout import MANIFEST
from .presentation import build_presentation


def _split(source: Path, split: str) -> Path:
    path = Path(source) / split
    if not (path / MANIFEST).is_file():
        raise DataError(f"{path}: the source dataset has no {split} split (give it {split}_tokens > 0)"
                        if split == "val" else f"{path}: the source dataset has no {split} split")
    return path


@DATASET_BUILDERS.register("compartmented", config=CompartmentsConfig)
class Compartmented(DatasetKind):
    """The source shown in c compartments: a compartmented training set and one val set per compartment."""

    def parts(self) -> list[str]:
        c = self.cfg.n_compartments
        return [f"c{i}" for i in range(c)] + (["translation"] if self.cfg.translation.fraction > 0 else [])

    def vocab_size(self, source_vocab: int) -> int:
        return self.cfg.build_presentation(source_vocab).vocab_size

    def build(self, source: Path, out: Path, progress: bool = False) -> dict[str, dict]:
        cfg, val = self.cfg, _split(source, "val")
        if cfg.translation.fraction > 0:
            write_translation_val(val, out / "translation" / "val", cfg)
        manifest = write_compartmented(_split(source, "train"), out / "train", cfg, progress=progress)
        tmp = out / "_val_sets"
        write_compartment_val(val, tmp, cfg)
        for i in range(cfg.n_compartments):
            (out / f"c{i}").mkdir(parents=True, exist_ok=True)
            (tmp / f"c{i}").rename(out / f"c{i}" / "val")
        shutil.rmtree(tmp)
        return {"train": manifest}


@dataclass
class ShiftConfig:
    """Move every id into compartment ``index`` of an offset presentation of ``of`` compartments."""

    index: int = 1
    of: int = 2

    def validate(self) -> None:
        check(self.of >= 2, "of", f"needs >= 2 compartments, got {self.of}")
        check(1 <= self.index < self.of, "index", f"must be in [1, of), got {self.index} (0 is the unshifted one)")


def shift_shard_set(src: str | Path, out: str | Path, k: int, n_presentations: int) -> dict:
    """Copy a shard set with every id moved into compartment ``k`` of an offset presentation."""
    src = ShardSet(src)
    pres = build_presentation("offset", n_presentations, src.vocab_size)
    arrays = [a for a in src.array_names if a != "tokens"]
    with ShardWriter(out, src.row_len, pres.vocab_size, arrays=arrays) as w:
        for a in range(0, len(src), 8192):
            idx = range(a, min(len(src), a + 8192))
            extra = {n: src.rows(idx, n) for n in arrays}
            w.add_rows(pres.encode(src.rows(idx), k), **extra)
        return w.close(source={"kind": "audit_shift", "path": str(src.path), "presentation_index": k},
                       compartments={"presentation": pres.manifest(), "compartment": k})


@DATASET_BUILDERS.register("shifted", config=ShiftConfig)
class Shifted(DatasetKind):
    """The source with every id shifted into another compartment (no id shared with the source)."""

    def vocab_size(self, source_vocab: int) -> int:
        return build_presentation("offset", self.cfg.of, source_vocab).vocab_size

    def build(self, source: Path, out: Path, progress: bool = False) -> dict[str, dict]:
        return {split: shift_shard_set(Path(source) / split, out / split, self.cfg.index, self.cfg.of)
                for split in ("train", "val") if (Path(source) / split / MANIFEST).is_file()}
