"""Derived dataset kinds: built after their source by prepare, rebuilt only when the kind, its params or the
source change, parts exposed by name."""

import json
from dataclasses import dataclass

import numpy as np
import pytest

from preschool.data.builder import DATASET_BUILDERS, BuildContext, builder_of, spec_hash
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.builders.derived import DatasetKind, DerivedSpec, dataset_parts
from preschool.data.prepare import build_datasets
from preschool.data.shards import ShardSet, ShardWriter
from preschool.errors import ConfigError
from preschool.synthetic.builder import GeneratorSpec


@dataclass
class PlusConfig:
    add: int = 1


BUILDS = []


@DATASET_BUILDERS.register("test_plus", config=PlusConfig)
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




def _build(out, specs, thash="t1"):
    """prepare's dataset loop over ``specs`` (the tokenized dataset ``src`` already there, built with tokenizer
    ``thash``: its dataset.json says so); returns the manifest's datasets."""
    ctx = BuildContext(out, {"c": {}}, specs, 4, 0, thash)
    if "src" in specs:
        key = builder_of(specs["src"]).key("src", specs["src"], ctx)
        (out / "src" / "dataset.json").write_text(json.dumps({"hash": spec_hash(key)}))
    manifest = {"datasets": {}}
    build_datasets(ctx, manifest)
    return manifest["datasets"]


def test_built_once_rebuilt_on_change_and_parts_named(tmp_path):
    _source(tmp_path)
    BUILDS.clear()
    specs = {"src": CorpusSpec(corpus="c", tokens=1), "plus": DerivedSpec(kind="test_plus", source="src")}
    entry = _build(tmp_path, specs)["plus"]
    assert entry["source"] == "src" and entry["parts"] == ["shifted"] and entry["vocab_size"] == 11
    assert ShardSet(tmp_path / "plus" / "train").rows([0]).tolist() == [[1, 2, 3, 4, 5]]
    assert (tmp_path / "plus" / "shifted" / "val" / "manifest.json").is_file()
    _build(tmp_path, specs)
    assert BUILDS == [1]  # up to date: not rebuilt
    _build(tmp_path, specs, thash="t2")
    specs["plus"] = DerivedSpec(kind="test_plus", source="src", params={"add": 2})
    _build(tmp_path, specs, thash="t2")
    assert BUILDS == [1, 1, 2]  # the source changed, then the params
    assert dataset_parts(specs, "plus") == ["shifted"] and dataset_parts(specs, "src") == []


def test_a_missing_source_names_the_field(tmp_path):
    specs = {"plus": DerivedSpec(kind="test_plus", source="nope")}
    with pytest.raises(ConfigError, match=r"data\.plus\.source"):
        _build(tmp_path, specs)


def test_datasets_build_after_what_they_read():
    """One order for every builder: tokenized datasets first (Control sets after the sets they exclude),
    derived ones in rounds after their sources, each round in the config's order."""
    from preschool.data.builder import build_order

    specs = {"d1": DerivedSpec(kind="test_plus", source="d2"), "ctl": CorpusSpec(corpus="c", tokens=1, exclude=["a"]),
             "d2": DerivedSpec(kind="test_plus", source="a"), "a": CorpusSpec(corpus="c", tokens=1),
             "d3": DerivedSpec(kind="test_plus", source="ctl"), "g": GeneratorSpec(generator="stack", tokens=1)}
    assert build_order(specs) == ["a", "g", "ctl", "d2", "d3", "d1"]
    assert [builder_of(specs[n]).registry_name for n in ("a", "g", "d1")] == ["corpus", "generator", "derived"]
    specs["d2"] = DerivedSpec(kind="test_plus", source="d1")
    with pytest.raises(ConfigError, match=r"data\.d1\.source"):  # a cycle
        build_order(specs)
