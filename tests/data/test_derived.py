"""Derived dataset kinds: built after their source by prepare, rebuilt only when the kind, its params or the
source change, parts exposed by name."""

from dataclasses import dataclass

import numpy as np
import pytest

from preschool.data.derived import DATASET_KINDS, DatasetKind, dataset_parts
from preschool.data.prepare import DatasetSpec, _prepare_derived
from preschool.data.shards import ShardSet, ShardWriter
from preschool.errors import ConfigError


@dataclass
class PlusConfig:
    add: int = 1


BUILDS = []


@DATASET_KINDS.register("test_plus", config=PlusConfig)
class Plus(DatasetKind):
    """Every id + ``add`` (a test kind); one part, ``shifted``, holding the same rows as val."""

    def parts(self):
        return ["shifted"]

    def vocab_size(self, source_vocab):
        return source_vocab + self.cfg.add

    def build(self, source, out, progress=False):
        BUILDS.append(self.cfg.add)
        src = ShardSet(source / "train")
        man = {}
        for folder in (out / "train", out / "shifted" / "val"):
            with ShardWriter(folder, src.row_len, src.vocab_size + self.cfg.add) as w:
                w.add_rows(src.rows(range(len(src))) + self.cfg.add)
                man[folder.parent.name if folder.name == "val" else "train"] = w.close()
        return {"train": man["train"]}


def _source(out):
    with ShardWriter(out / "src" / "train", 5, 10) as w:
        w.add_rows(np.arange(20).reshape(4, 5) % 10)
        w.close()


def test_built_once_rebuilt_on_change_and_parts_named(tmp_path):
    _source(tmp_path)
    BUILDS.clear()
    specs = {"src": DatasetSpec(corpus="c", tokens=1), "plus": DatasetSpec(kind="test_plus", source="src")}
    manifest = {"datasets": {"src": {"hash": "h1"}}}
    _prepare_derived(tmp_path, specs, manifest, progress=False)
    entry = manifest["datasets"]["plus"]
    assert entry["source"] == "src" and entry["parts"] == ["shifted"] and entry["vocab_size"] == 11
    assert ShardSet(tmp_path / "plus" / "train").rows([0]).tolist() == [[1, 2, 3, 4, 5]]
    assert (tmp_path / "plus" / "shifted" / "val" / "manifest.json").is_file()
    _prepare_derived(tmp_path, specs, {"datasets": {"src": {"hash": "h1"}}}, progress=False)
    assert BUILDS == [1]  # up to date: not rebuilt
    _prepare_derived(tmp_path, specs, {"datasets": {"src": {"hash": "h2"}}}, progress=False)
    specs["plus"] = DatasetSpec(kind="test_plus", source="src", params={"add": 2})
    _prepare_derived(tmp_path, specs, {"datasets": {"src": {"hash": "h2"}}}, progress=False)
    assert BUILDS == [1, 1, 2]  # the source changed, then the params
    assert dataset_parts(specs, "plus") == ["shifted"] and dataset_parts(specs, "src") == []


def test_a_missing_source_names_the_field(tmp_path):
    specs = {"plus": DatasetSpec(kind="test_plus", source="nope")}
    with pytest.raises(ConfigError, match=r"data\.plus\.source"):
        _prepare_derived(tmp_path, specs, {"datasets": {}}, progress=False)
