from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pytest

from preschool.config import Partial, apply_overrides, check, from_dict, overlay, to_dict, validate
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


@dataclass
class Settings:
    inner: Inner = field(default_factory=Inner)
    extra: Inner | None = None
    table: dict[str, Any] = field(default_factory=dict)
    rate: float = 0.1
    name: str = "s"

    def validate(self):
        check(self.rate < 1 or self.inner.tokens > 1, "rate", "a rate >= 1 needs inner.tokens > 1")


@dataclass
class Layered:
    base: Settings = field(default_factory=Settings)
    over: Annotated[dict[str, Any], Partial(Settings, exclude={"name": "names are set elsewhere"})] = \
        field(default_factory=dict)


def test_overlay_is_checked_and_typed_on_load_and_applied_field_by_field():
    cfg = from_dict(Layered, {"over": {"rate": "2", "inner": {"tokens": "1e3"}, "table": {"b": 2}}})
    assert cfg.over == {"rate": 2.0, "inner": {"tokens": 1000}, "table": {"b": 2}}  # typed, not yet merged
    base = Settings(inner=Inner(tokens=1, mode="b"), table={"a": 1}, rate=0.5)
    got = overlay(base, cfg.over, {"extra": {"mode": "b"}})
    # nested configs and mappings are overlaid key by key (inner.mode and table.a survive), the rest replaced
    assert got == Settings(inner=Inner(tokens=1000, mode="b"), extra=Inner(mode="b"), table={"a": 1, "b": 2}, rate=2.0)
    assert base.table == {"a": 1} and base.inner.tokens == 1  # the base is untouched
    validate(got)
    with pytest.raises(ConfigError, match="needs inner.tokens"):  # checks across fields run on the result
        validate(overlay(base, {"rate": 2.0}))


@pytest.mark.parametrize("over, field_, msg", [
    ({"rat": 1}, "over.rat", "did you mean 'rate'"),
    ({"rate": "fast"}, "over.rate", "expected a number"),
    ({"inner": {"mode": "c"}}, "over.inner.mode", "must be one of"),
    ({"inner": {"tokenz": 1}}, "over.inner.tokenz", "did you mean 'tokens'"),
    ({"name": "x"}, "over.name", "names are set elsewhere"),
    ([1, 2], "over", "expected a mapping of Settings fields"),
])
def test_overlay_errors_name_the_field(over, field_, msg):
    with pytest.raises(ConfigError, match=msg) as e:
        from_dict(Layered, {"over": over})
    assert e.value.field == field_


def test_a_list_or_mapping_key_with_nothing_under_it_is_empty():
    # YAML `inner:` / `table:` with no value is null; an Optional field keeps None
    assert from_dict(Outer, {"name": "x", "inner": None}).inner == []
    got = from_dict(Settings, {"table": None, "extra": None})
    assert got.table == {} and got.extra is None


def test_overrides():
    d = apply_overrides({"a": {"b": 1}, "arms": [{"name": "x"}]}, ["a.b=2", "arms.0.name=y", "c=[1,2]"])
    assert d == {"a": {"b": 2}, "arms": [{"name": "y"}], "c": [1, 2]}


def test_an_override_into_a_single_value_says_to_set_it_whole():
    """A stage written with the `schedule: constant` shorthand has no schedule.warmup to set by dots."""
    with pytest.raises(ConfigError, match=r"single value \('constant'\).*set it whole instead "
                                          r"\(arms.0.stages.0.schedule='\{warmup: ...\}'") as e:
        apply_overrides({"arms": [{"stages": [{"schedule": "constant"}]}]}, ["arms.0.stages.0.schedule.warmup=3"])
    assert e.value.field == "arms.0.stages.0.schedule.warmup"
    got = apply_overrides({"arms": [{"stages": [{"schedule": "constant"}]}]},
                          ["arms.0.stages.0.schedule={name: constant, warmup: 3}"])
    assert got["arms"][0]["stages"][0]["schedule"] == {"name": "constant", "warmup": 3}


def test_registry_did_you_mean():
    r = Registry("widget")

    @r.register("shuffle_dyck", config=Inner)
    class W:
        def __init__(self, cfg):
            self.cfg = cfg

    assert r.build("shuffle_dyck", {"tokens": 3}).cfg.tokens == 3
    with pytest.raises(ConfigError, match="did you mean 'shuffle_dyck'"):
        r.get("shuffle_dyk")


@dataclass
class Renamed:
    """A config whose key ``size`` was once spelled ``old_size`` (the upgrade_raw hook)."""

    size: int = 1

    @classmethod
    def upgrade_raw(cls, data, path):
        if "old_size" not in data:
            return data, []
        at = f"{path}." if path else ""
        data = {k: v for k, v in data.items() if k != "old_size"} | {"size": data["old_size"]}
        return data, [f"{at}old_size -> {at}size"]


@dataclass
class Holder:
    items: list[Renamed] = field(default_factory=list)


def test_upgrade_raw_reads_old_spellings_with_one_warning_per_load():
    with pytest.warns(FutureWarning) as rec:
        h = from_dict(Holder, {"items": [{"old_size": 3}, {"size": 4}, {"old_size": 5}]})
    assert [i.size for i in h.items] == [3, 4, 5]
    assert len(rec) == 1  # the whole load warns once, naming every old field
    msg = str(rec[0].message)
    assert "items[0].old_size -> items[0].size" in msg and "items[2].old_size -> items[2].size" in msg
    assert "items[1]" not in msg


def test_upgrade_raw_runs_before_unknown_keys_and_is_silent_for_the_current_spelling():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_dict(Holder, {"items": [{"size": 2}]}).items[0].size == 2
    with pytest.raises(ConfigError, match="did you mean 'size'") as e:
        from_dict(Holder, {"items": [{"sise": 2}]})
    assert e.value.field == "items[0].sise"
