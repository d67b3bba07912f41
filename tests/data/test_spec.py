"""Dataset specs: one typed variant per builder, chosen by the key that names the kind; every shipped config
records each dataset exactly as the one flat spec before the variants did (so prepared data is reused)."""

import dataclasses
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from preschool.config import from_dict, load_yaml, to_dict
from preschool.data.builder import DatasetSpec, builder_of, spec_hash
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.builders.derived import DerivedSpec
from preschool.data.engine import DEFAULT_UNIT_TOKENS
from preschool.errors import ConfigError
from preschool.l2t.builder import L2TSpec
from preschool.synthetic.builder import GeneratorSpec

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted([*REPO.glob("examples/*.yaml"), *REPO.glob("examples/paper/*.yaml"),
                  *REPO.glob("docs/results/**/*.yaml")])


@dataclass
class FlatSpec:
    """The dataset spec before the variants (src/preschool/data/prepare.py at fa2446f), field for field: the
    oracle of what a dataset records."""

    corpus: str | None = None
    generator: str | None = None
    preset: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    render: Literal["text", "reserved"] = "text"
    tokens: int = 0
    val_tokens: int = 0
    val_fraction: float = 0.02
    pack: Literal["concat", "pad"] = "concat"
    exact_fill: bool = False
    exclude: list[str] = field(default_factory=list)
    l2t: dict[str, Any] | None = None
    unit_tokens: int = DEFAULT_UNIT_TOKENS
    kind: str | None = None
    source: str | None = None

    def record(self) -> dict:  # as it was: every field, kind and source only for a derived dataset
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("kind", "source") or self.kind}


def _needs_shared(path) -> bool:
    return "shared/data" in path.read_text() and not (REPO.parent / "shared" / "data").is_dir()


def _load(path):
    if _needs_shared(path):
        pytest.skip("needs ../shared/data")
    from preschool.experiment import load_experiment

    return load_experiment(path).cfg


def test_there_are_configs_of_every_kind(monkeypatch):
    monkeypatch.chdir(REPO)
    kinds = {type(s) for p in CONFIGS if not _needs_shared(p) for s in _load(p).data.values()}
    # L2T examples read a corpus under ../shared/data
    assert kinds >= {CorpusSpec, GeneratorSpec, DerivedSpec} and (L2TSpec in kinds or _needs_shared(
        REPO / "examples" / "l2t_blimp.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_config_records_each_dataset_as_the_flat_spec_did(path, monkeypatch):
    monkeypatch.chdir(REPO)  # examples read ../shared/data relative to the repository root
    raw = load_yaml(path)["data"]
    cfg = _load(path)
    assert set(cfg.data) == set(raw)
    for name, spec in cfg.data.items():
        # `separator` came after the flat spec and stays out of the record (CorpusSpec.record); a saved
        # experiment.yaml (docs/results) lists it with every other field
        was = from_dict(FlatSpec, {k: v for k, v in raw[name].items() if k != "separator"}).record()
        now = spec.record()
        assert json.dumps(now) == json.dumps(was), name  # same keys, order and values: dataset.json unchanged
        assert spec_hash(now) == spec_hash(was)


@pytest.mark.parametrize("raw, cls", [
    ({"corpus": "c", "tokens": 8}, CorpusSpec),
    ({"corpus": "c", "l2t": {"scenario": "shared"}, "tokens": 8}, L2TSpec),  # its corpus is L2T's text
    ({"l2t": {}, "corpus": "c", "tokens": 8}, L2TSpec),
    ({"generator": "stack", "tokens": 8}, GeneratorSpec),
    ({"kind": "shifted", "source": "a"}, DerivedSpec),
])
def test_the_key_that_names_the_kind_picks_the_variant_and_its_builder(raw, cls):
    spec = from_dict(DatasetSpec, raw, "data.x")
    assert type(spec) is cls
    assert builder_of(spec).registry_name == {CorpusSpec: "corpus", L2TSpec: "l2t", GeneratorSpec: "generator",
                                              DerivedSpec: "derived"}[cls]
    assert from_dict(DatasetSpec, to_dict(spec), "data.x") == spec  # what experiment.yaml saves reads back


@pytest.mark.parametrize("raw, field, words", [
    ({"corpus": "c", "tokens": 8, "render": "reserved"}, "data.x.render", "corpus"),
    ({"corpus": "c", "tokens": 8, "params": {"k": 2}}, "data.x.params", "corpus"),
    ({"generator": "stack", "tokens": 8, "val_fraction": 0.1}, "data.x.val_fraction", "generator"),
    ({"generator": "stack", "tokens": 8, "exclude": ["pt"]}, "data.x.exclude", "generator"),
    ({"corpus": "c", "l2t": {}, "tokens": 8, "exclude": ["pt"]}, "data.x.exclude", "l2t"),
    ({"kind": "shifted", "source": "a", "tokens": 5}, "data.x.tokens", "derived"),
    ({"kind": "shifted", "source": "a", "unit_tokens": 100}, "data.x.unit_tokens", "derived"),
])
def test_a_field_of_another_kind_names_itself_and_the_kind(raw, field, words):
    with pytest.raises(ConfigError, match="does not apply to a " + words) as e:
        from_dict(DatasetSpec, raw, "data.x")
    assert e.value.field == field


def test_a_saved_flat_spec_reads_as_its_kind_without_a_warning():
    """experiment.yaml saved before the variants held every field for every dataset, at its default where
    it meant nothing: such a file reads as it did, quietly (docs/results keeps some)."""
    flat = to_dict(FlatSpec(generator="stack", preset=None, params={"n_ops": 4}, tokens=64, render="reserved"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = from_dict(DatasetSpec, flat, "data.x")
    assert type(spec) is GeneratorSpec and spec.params == {"n_ops": 4} and spec.render == "reserved"
    assert spec.record() == FlatSpec(**flat).record()


@pytest.mark.parametrize("raw, field, match", [
    ({"corpus": "c", "generator": "stack", "tokens": 8}, "data.x.generator", "built one way"),
    ({"kind": "shifted", "source": "a", "corpus": "c"}, "data.x.corpus", "built one way"),
    ({"tokens": 8}, "data.x", "give one of 'corpus'"),
    ({"corpsu": "c", "tokens": 8}, "data.x", "did you mean 'corpus'"),
    ({"l2t": {"scenario": "shared"}, "tokens": 8}, "data.x.corpus", "missing"),  # L2T transforms a corpus
    ({"kind": "shifted"}, "data.x.source", "missing"),
    ({"corpus": "c", "tokens": 8, "tokenz": 3}, "data.x.tokenz", "did you mean 'tokens'"),
])
def test_a_spec_that_names_no_kind_or_two_says_so(raw, field, match):
    with pytest.raises(ConfigError, match=match) as e:
        from_dict(DatasetSpec, raw, "data.x")
    assert e.value.field == field
