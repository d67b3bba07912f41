from dataclasses import dataclass, field
from typing import Literal

import pytest

from preschool.config import apply_overrides, check, from_dict, to_dict
from preschool.errors import ConfigError
from preschool.registry import Registry


@dataclass
class Inner:
    tokens: int = 1
    mode: Literal["a", "b"] = "a"

    def validate(self):
        check(self.tokens > 0, "tokens", f"must be > 0, got {self.tokens}")


@dataclass
class Outer:
    name: str
    inner: list[Inner] = field(default_factory=list)
    rate: float = 0.1
    flag: bool = False


def test_nested_build_and_coercion():
    o = from_dict(Outer, {"name": "x", "inner": [{"tokens": "1e3"}, {"mode": "b"}], "rate": 1, "flag": "true"})
    assert o.inner[0].tokens == 1000 and o.inner[1].mode == "b" and o.rate == 1.0 and o.flag is True
    assert to_dict(o)["inner"][0] == {"tokens": 1000, "mode": "a"}


@pytest.mark.parametrize("data, field_, msg", [
    ({"name": "x", "inner": [{}, {"tokens": -5}]}, "inner[1].tokens", "must be > 0"),
    ({"name": "x", "inner": [{"tokenz": 3}]}, "inner[0].tokenz", "did you mean 'tokens'"),
    ({"name": "x", "inner": [{"mode": "c"}]}, "inner[0].mode", "must be one of"),
    ({"inner": []}, "name", "missing"),
    ({"name": "x", "rate": "fast"}, "rate", "expected a number"),
])
def test_errors_name_the_field(data, field_, msg):
    with pytest.raises(ConfigError, match=msg) as e:
        from_dict(Outer, data)
    assert e.value.field == field_


def test_overrides():
    d = apply_overrides({"a": {"b": 1}, "arms": [{"name": "x"}]}, ["a.b=2", "arms.0.name=y", "c=[1,2]"])
    assert d == {"a": {"b": 2}, "arms": [{"name": "y"}], "c": [1, 2]}


def test_registry_did_you_mean():
    r = Registry("widget")

    @r.register("shuffle_dyck", config=Inner)
    class W:
        def __init__(self, cfg):
            self.cfg = cfg

    assert r.build("shuffle_dyck", {"tokens": 3}).cfg.tokens == 3
    with pytest.raises(ConfigError, match="did you mean 'shuffle_dyck'"):
        r.get("shuffle_dyk")
