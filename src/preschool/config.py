"""Typed configs: dataclasses built from YAML/dicts, validated on construction.

Every config in preschool is a plain ``@dataclass``. ``from_dict`` builds one
from a dict (recursively, including lists of dataclasses and
``dict[str, dataclass]``), coerces YAML scalars to the annotated types, rejects
unknown keys with a "did you mean", and then calls the dataclass's
``validate()`` (if any). Every error is a :class:`ConfigError` whose ``field``
is the dotted path of the bad value, so users see e.g.
``arms[1].stages[0].tokens: must be > 0, got -5``.

Some configs are layered: an experiment's shared ``train:`` settings and an
arm's own are *overlays* of ``TrainConfig`` (a few of its fields, each checked
and typed on load, ``Annotated[dict, Partial(TrainConfig)]``), applied in order
to a typed config by :func:`overlay`.

A config whose YAML spelling changed keeps reading the old one through one
hook: a classmethod ``upgrade_raw(data, path) -> (data, notes)`` on the
dataclass rewrites its raw mapping into the current spelling before unknown
keys are checked, and returns one note per old spelling it met
(``"stages[0].warmup -> stages[0].schedule.warmup"``). ``from_dict`` gathers
the notes of a whole load (nested configs included) into one
``FutureWarning``. Code that upgrades stored configs without a user to tell
(the run-folder check) calls the hook itself and drops the notes.

A config that comes in variants (a dataset of ``data``: corpus, generator, L2T,
derived, ...) is a dataclass base whose classmethod ``choose_variant(data, path)
-> type`` names the variant class (a subclass) that reads a raw mapping; a
field typed with the base is then read as that variant (``upgrade_raw`` and
``validate()`` are the variant's).
"""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import math
import os
import stat
import types
import typing
import warnings
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Union

import yaml

from .errors import ConfigError
from .seeds import check_seed


def check(cond: bool, field: str, message: str) -> None:
    """Raise ConfigError(field, message) unless ``cond``; the validate() helper."""
    if not cond:
        raise ConfigError(field, message)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _coerce(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        partial = next((m for m in tp.__metadata__ if isinstance(m, Partial)), None)
        return partial_from_dict(partial, value, path) if partial else _coerce(args[0], value, path)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        others = [a for a in args if a is not type(None)]
        if len(others) == 1:  # an optional value: the one type's own error ("did you mean") says more
            return _coerce(others[0], value, path)
        errors = {}
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, path)
            except ConfigError as e:
                errors[a] = e
        # a mapping meant for the one config class (else the one mapping type), a list for the one list type:
        # that member's own error names the field
        classes = [a for a in errors if dataclasses.is_dataclass(a)] if isinstance(value, dict) else []
        shaped = classes or [a for a in errors if _holds(a, value)]
        if len(shaped) == 1:
            raise errors[shaped[0]]
        raise ConfigError(path, f"value {value!r} matches none of {[getattr(a, '__name__', str(a)) for a in args]}")
    if origin is Literal:
        if value not in args:
            close = difflib.get_close_matches(str(value), [str(a) for a in args], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(path, f"must be one of {list(args)}, got {value!r}{hint}")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(path, f"expected a mapping for {tp.__name__}, got {type(value).__name__}")
        return from_dict(tp, value, path)
    # a key written with nothing under it (`overrides:`) is YAML null: an empty list or mapping, not an error
    if value is None and (origin is list or tp is list):
        return []
    if value is None and (origin is dict or tp is dict):
        return {}
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {value!r}")
        inner = args[0] if args else Any
        out = [_coerce(inner, v, _join(path, i)) for i, v in enumerate(value)]
        return tuple(out) if (origin is tuple or tp is tuple) else out
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"expected a mapping, got {value!r}")
        kt, vt = args if args else (Any, Any)
        return {_coerce(kt, k, path): _coerce(vt, v, _join(path, str(k))) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(path, f"expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(path, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                f = float(value.replace("_", ""))
            except ValueError:
                raise ConfigError(path, f"expected an integer, got {value!r}") from None
            if f.is_integer():
                return int(f)
        raise ConfigError(path, f"expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(path, f"expected a number, got {value!r}")
        number = None
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise ConfigError(path, f"expected a number, got {value!r}")
        # the one check of every float field: YAML's .inf / .nan (or 1e400) would reach the budget arithmetic
        # (an OverflowError in round()) or a comparison that NaN passes silently
        if not math.isfinite(number):
            raise ConfigError(path, f"must be a finite number, got {value!r}")
        return number
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(path, f"expected a string, got {value!r}")
    if tp is Path:
        return Path(value)
    return value


def _holds(tp: Any, value: Any) -> bool:
    """Whether ``tp`` is a container type of ``value``'s kind: a mapping type for a mapping, a list or tuple type
    for a list (which member of a union a value was meant for, so that member's error is shown)."""
    origin = typing.get_origin(tp) or tp
    if isinstance(value, dict):
        return origin is dict
    if isinstance(value, (list, tuple)):
        return origin in (list, tuple)
    return False


# the old spellings met by the from_dict call in progress (None: no load in progress); the outermost
# call warns once for all of them, so a file with ten old-style stages gives one warning, not ten
_OLD_SPELLINGS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("old_spellings", default=None)


def from_dict(cls: type, data: dict | None, path: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``; unknown keys and bad values name their field.

    Old spellings that ``cls`` (or a nested config) upgrades via ``upgrade_raw`` are read as the
    new ones, with one ``FutureWarning`` per call naming each old field path and its new spelling.
    """
    notes = _OLD_SPELLINGS.get()
    if notes is not None:
        return _from_dict(cls, data, path, notes)
    notes = []
    token = _OLD_SPELLINGS.set(notes)
    try:
        obj = _from_dict(cls, data, path, notes)
    finally:
        _OLD_SPELLINGS.reset(token)
    if notes:
        shown = "; ".join(notes[:6]) + (f"; and {len(notes) - 6} more" if len(notes) > 6 else "")
        warnings.warn(f"old config spelling read as the new one (write the new one; the old is read for now): "
                      f"{shown}", FutureWarning, stacklevel=2)
    return obj


def _from_dict(cls: type, data: dict | None, path: str, notes: list[str]) -> Any:
    data = dict(data or {})
    choose = getattr(cls, "choose_variant", None)
    if choose is not None:  # a config that comes in variants: the raw mapping says which class reads it
        cls = choose(data, path)
    upgrade = getattr(cls, "upgrade_raw", None)
    if upgrade is not None:
        data, met = upgrade(data, path)
        notes.extend(met)
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise _unknown_key(cls, unknown[0], list(fields), path)
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _coerce(hints[name], data[name], _join(path, name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(_join(path, name), f"required by {cls.__name__} but missing")
    obj = cls(**kwargs)
    validate(obj, path)
    return obj


def _unknown_key(cls: type, key: Any, known: list[str], path: str) -> ConfigError:
    """The error for ``key`` that is no field of ``cls`` (``known``), with the closest name as a hint."""
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(_join(path, str(key)), f"unknown key for {cls.__name__}{hint} (known: {', '.join(known)})")


@dataclass(frozen=True)
class Partial:
    """Type marker for an overlay: ``Annotated[dict[str, Any], Partial(TrainConfig)]`` holds some fields of
    ``TrainConfig``. ``exclude`` maps fields the overlay may not set to the reason (where they go instead)."""

    cls: type
    exclude: Mapping[str, str] = dc_field(default_factory=dict)


def partial_from_dict(partial: Partial, data: Any, path: str = "") -> dict[str, Any]:
    """The overlay ``data`` for ``partial.cls``: every key a field of the class (unknown keys get a "did
    you mean"), every value coerced to the field's type, nested dataclass values overlays themselves.

    Checks across fields (``validate()``) wait for :func:`overlay`: an overlay alone is not a config.
    """
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping of {partial.cls.__name__} fields, got {data!r}")
    hints = typing.get_type_hints(partial.cls, include_extras=True)
    names = [f.name for f in dataclasses.fields(partial.cls) if f.init and f.name not in partial.exclude]
    out: dict[str, Any] = {}
    for k, v in data.items():
        where = _join(path, str(k))
        if k in partial.exclude:
            raise ConfigError(where, partial.exclude[k])
        if k not in names:
            raise _unknown_key(partial.cls, k, names, path)
        inner = dataclass_of(hints[k])
        if inner is not None and isinstance(v, dict):
            out[k] = partial_from_dict(Partial(inner), v, where)  # checked field by field, completed by overlay
        else:
            out[k] = _coerce(hints[k], v, where)
    return out


def dataclass_of(tp: Any) -> type | None:
    """The dataclass in a field type (``WandbConfig`` of ``WandbConfig | None``), or None."""
    if dataclasses.is_dataclass(tp):
        return tp
    if typing.get_origin(tp) in (Union, types.UnionType):
        return next((a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)), None)
    return None


def overlay(obj: Any, *overlays: Mapping[str, Any]) -> Any:
    """``obj`` (a config dataclass) with each overlay's fields set in turn, ``dataclasses.replace``-style.

    A nested dataclass field is overlaid field by field (where ``obj`` has None, onto the nested class's
    defaults: an optional nested config has a default for every field), and a mapping field is merged
    key by key, so an arm that sets ``model.overrides.rope_theta`` keeps the shared ``overrides``; every
    other value replaces the one below. Nothing is validated here: call :func:`validate` on the result.
    """
    for ov in overlays:
        changes = {}
        for k, v in ov.items():
            cur = getattr(obj, k)
            if isinstance(v, dict) and dataclasses.is_dataclass(cur):
                changes[k] = overlay(cur, v)
            elif isinstance(v, dict) and cur is None and (dc := dataclass_of(_field_type(obj, k))) is not None:
                changes[k] = overlay(dc(), v)  # the class's defaults, overlaid (validated with the result)
            elif isinstance(v, dict) and isinstance(cur, dict):
                changes[k] = deep_merge(cur, v)
            else:
                changes[k] = v
        obj = dataclasses.replace(obj, **changes)
    return obj


def _field_type(obj: Any, name: str) -> Any:
    return typing.get_type_hints(type(obj))[name]


def validate(obj: Any, path: str = "") -> None:
    """Run ``obj.validate()``, re-rooting any ConfigError at ``path``; first, in any config, a field named
    ``seed`` must hold a seed (:func:`preschool.seeds.check_seed`), so no config class can forget it."""
    if dataclasses.is_dataclass(obj) and "seed" in {f.name for f in dataclasses.fields(obj)} \
            and isinstance(getattr(obj, "seed"), int):
        check_seed(obj.seed, _join(path, "seed") if path else "seed")
    fn = getattr(obj, "validate", None)
    if fn is None:
        return
    try:
        fn()
    except ConfigError as e:
        if path and not e.field.startswith(path):
            raise ConfigError(_join(path, e.field) if e.field else path, str(e).split(": ", 1)[-1]) from None
        raise


def to_dict(obj: Any) -> Any:
    """Plain-data (YAML/JSON-safe) view of a config."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


#: the most bytes a config file may hold: the largest committed config is about 10 KB; more is no config
#: (``/dev/zero`` or a data file named by mistake), refused before it is read whole
CONFIG_MAX_BYTES = 8 << 20


def read_config_bytes(path: str | Path) -> bytes:
    """The bytes of the config file ``path``: a regular file of at most :data:`CONFIG_MAX_BYTES`; ConfigError
    naming it when it is missing, a folder, or anything else (a FIFO nobody writes would be waited on for
    ever, a device such as ``/dev/zero`` read without end: opened without blocking, refused unread)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError("", f"config file not found: {p}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(str(p), "is a folder, not a config file (give the YAML file inside it)")
        if not stat.S_ISREG(mode):
            raise ConfigError(str(p), "is not a regular file (a FIFO, socket or device); a config is a YAML file")
        raw = b""
        while len(raw) <= CONFIG_MAX_BYTES and (chunk := os.read(fd, CONFIG_MAX_BYTES + 1 - len(raw))):
            raw += chunk
    finally:
        os.close(fd)
    if len(raw) > CONFIG_MAX_BYTES:
        raise ConfigError(str(p), f"is larger than {CONFIG_MAX_BYTES:,} bytes, more than any config holds; is it "
                          "the file you meant?")
    return raw


def load_yaml(path: str | Path) -> dict:
    """The mapping in the YAML file ``path`` (:func:`read_config_bytes`); ConfigError naming the file when it
    cannot be read, is not UTF-8 (with the byte and line), not YAML (``file:line:column``), writes a key
    twice in one mapping, or is not a mapping."""
    p = Path(path)
    raw = read_config_bytes(p)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(str(p), f"not UTF-8 text (byte 0x{raw[e.start]:02x} at line {line}, offset {e.start}); "
                          "save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
    try:
        data = _parse_yaml(text, str(p))
    except yaml.YAMLError as e:
        raise yaml_error(e, str(p)) from None
    if not isinstance(data, dict):
        raise ConfigError(str(p), "top level must be a mapping")
    return data


def yaml_error(e: yaml.YAMLError, where: str, in_file: bool = True) -> ConfigError:
    """One line for PyYAML's error ``e`` about the text of ``where`` (a file; else a ``--set`` key):
    ``where:line:column: not valid YAML (what is wrong; in what)``, where PyYAML prints 3 to 8 lines."""
    mark = getattr(e, "problem_mark", None) if in_file else None
    at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark is not None else where
    what = "; ".join(x for x in (getattr(e, "problem", None), getattr(e, "context", None)) if x) or str(e)
    if isinstance(e, DuplicateKey):
        return ConfigError(at, f"{what}; YAML keeps only the last, so the other would be lost without a word: "
                           "keep one")
    return ConfigError(at, f"not valid YAML ({' '.join(what.split())})")


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping that writes one key twice (YAML 1.2 forbids it; PyYAML keeps the last)."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key written twice in one mapping (:class:`DuplicateKey`)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` merges; its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                break
            if first is not key_node.start_mark:
                raise DuplicateKey(None, None, f"key {key!r} is written twice in one mapping (first at line "
                                   f"{first.line + 1})", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


#: the most values a config may hold once its YAML aliases are expanded: the largest committed config holds
#: about 1,000; a few lines of nested aliases (an "alias bomb") expand to billions, gigabytes before any check
ALIAS_BUDGET = 100_000


def _parse_yaml(text: str, field: str) -> Any:
    """The plain data of the YAML ``text``, every alias expanded into its own copy (:func:`_expanded`);
    ConfigError on ``field`` when it nests too deeply or expands beyond :data:`ALIAS_BUDGET` (yaml.YAMLError
    when it is no YAML or writes a key twice: the caller says what that means)."""
    try:
        return _expanded(yaml.load(text, Loader=_Loader), field)  # noqa: S506 - a SafeLoader
    except RecursionError:
        raise ConfigError(field, "nests values too deeply to be a config") from None


def _expanded(data: Any, field: str) -> Any:
    """A copy of loaded YAML ``data`` in which a value used through aliases (``&stage`` ... ``*stage``) is a
    copy per use, so an override of one arm's stage (arms.2.stages.0.tokens=...) does not change the arms
    sharing it. Counted as it is made: more than :data:`ALIAS_BUDGET` values, or an alias inside the value
    it names (a loop), is a ConfigError on ``field`` before the copy grows."""
    count = 0
    open_: set[int] = set()  # the containers being copied: meeting one again is a loop

    def copy(value: Any) -> Any:
        nonlocal count
        count += 1
        if count > ALIAS_BUDGET:
            raise ConfigError(field, f"holds more than {ALIAS_BUDGET:,} values once its YAML aliases (*name) are "
                              "expanded (nested aliases?); write the values out or nest fewer aliases")
        if not isinstance(value, (dict, list)):
            return value
        if id(value) in open_:
            raise ConfigError(field, "a YAML alias (*name) sits inside the value it names (an alias inside "
                              "itself): it never ends")
        open_.add(id(value))
        try:
            if isinstance(value, dict):
                return {copy(k): copy(v) for k, v in value.items()}
            return [copy(v) for v in value]
        finally:
            open_.discard(id(value))

    return copy(data)


def override_value(raw: str, field: str = "--set") -> Any:
    """A ``--set`` value: parsed as YAML (``3``, ``true``, ``[1, 2]``), or the text itself when it is
    not valid YAML (``**/*``, ``a: b: c``). Aliases are expanded within :data:`ALIAS_BUDGET` (ConfigError
    on ``field`` beyond it)."""
    try:
        return _parse_yaml(raw, field)
    except DuplicateKey as e:  # YAML, but one key would be lost
        raise yaml_error(e, field, in_file=False) from None
    except yaml.YAMLError:
        return raw


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``a.b.c=value`` overrides to a nested dict; list items by index (``arms.0.name=x``).

    ``value`` is read as YAML (``3``, ``true``, ``[1, 2]``); text that is not valid YAML
    (``glob=**/*``) is taken as the string it is. A path through a missing list item or
    into a scalar raises ConfigError naming the override's key.
    """
    data = typing.cast(dict, yaml.safe_load(yaml.safe_dump(data)))  # deep copy of plain data
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(ov, "override must look like key.path=value")
        key, raw = ov.split("=", 1)
        value = override_value(raw, key)
        parts = key.split(".")
        if not all(parts):
            raise ConfigError(key, "override key has an empty part (write key.path=value)")
        node: Any = data
        for i, part in enumerate(parts):
            where = ".".join(parts[:i]) or "the top level"
            last = i == len(parts) - 1
            if isinstance(node, list):
                if not (part.isdigit() and int(part) < len(node)):
                    valid = f"use an index 0..{len(node) - 1}" if node else "it has no items to set"
                    raise ConfigError(key, f"{where} is a list of {len(node)} item(s): {valid}, not {part!r}")
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    if node.get(part) is None:  # a missing or null section becomes a mapping
                        node[part] = {}
                    node = node[part]
            else:
                # e.g. a stage's `schedule: constant` shorthand: the whole value can still be set
                raise ConfigError(key, f"{where} is a single value ({node!r}), so it has no {part!r} inside; "
                                  f"set it whole instead ({where}='{{{part}: ...}}' for a mapping)")
    return data


def deep_merge(a: dict, b: dict) -> dict:
    """``a`` updated by ``b``, recursing into nested mappings (inputs untouched)."""
    import copy

    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out
