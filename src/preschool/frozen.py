"""Deeply read-only copies of config objects: what a resolved experiment hands every step.

:func:`freeze` copies a config (a dataclass instance, a list, a dict, nested to any depth) into one that
refuses every change: assigning or deleting a field of a frozen dataclass instance raises
:class:`dataclasses.FrozenInstanceError`, changing a frozen list or mapping raises :class:`TypeError`. The copy
is what it copies: a frozen dataclass instance is of the same class (``type(x) is TrainConfig`` still
holds), a frozen list a ``list`` and a frozen mapping a ``dict``, so ``isinstance`` checks, registries keyed by
class, ``to_dict`` and equality with a config built by hand keep working. Nothing in the copy is shared with
the original, so neither can change the other.

How a dataclass instance is frozen: its class gets, the first time one of its instances is frozen, a
``__setattr__`` / ``__delattr__`` that refuse a change to an instance this module froze and pass every other
instance on to the class's own (so the class's other instances, and its ``__init__``, behave as before).

What builds on a frozen value gets its own: ``dataclasses.replace`` (and ``config.overlay``) of a frozen
instance returns a new, changeable instance (its untouched fields still the frozen values), and
``copy.copy`` / ``copy.deepcopy`` / a pickle round trip return changeable copies.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from typing import Any

__all__ = ["FrozenDict", "FrozenList", "freeze", "is_frozen"]


def _refuse(self, *args, **kwargs):
    raise TypeError(f"a frozen {type(self).__mro__[1].__name__} cannot be changed (it is part of a resolved "
                    "experiment; copy it to change the copy)")


class FrozenList(list):
    """A list that refuses every change."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo) -> list:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self):
        return list, (list(self),)


class FrozenDict(dict):
    """A mapping that refuses every change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo) -> dict:
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self):
        return dict, (dict(self),)


# ids of the dataclass instances freeze() made (each removed when its instance is collected, before the id can
# name another object); a copy, a pickle or a replace() is a new instance, so it is not in here
_FROZEN_IDS: set[int] = set()
_GUARDED = "_preschool_frozen_guard"  # set on a class whose instances can be frozen


def _guard(cls: type) -> None:
    """Give dataclass ``cls`` the ``__setattr__`` / ``__delattr__`` that refuse a change to a frozen instance."""
    if cls.__dict__.get(_GUARDED):
        return
    setter, deleter = cls.__setattr__, cls.__delattr__

    def __setattr__(self, name, value):
        if id(self) in _FROZEN_IDS:
            raise dataclasses.FrozenInstanceError(
                f"cannot assign to field {name!r}: this {type(self).__name__} is frozen (part of a resolved "
                "experiment; dataclasses.replace gives a copy to change)")
        setter(self, name, value)

    def __delattr__(self, name):
        if id(self) in _FROZEN_IDS:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}: this {type(self).__name__} "
                                                  "is frozen")
        deleter(self, name)

    type.__setattr__(cls, "__setattr__", __setattr__)
    type.__setattr__(cls, "__delattr__", __delattr__)
    type.__setattr__(cls, _GUARDED, True)


def is_frozen(value: Any) -> bool:
    """Whether ``value`` is a frozen dataclass instance, list or mapping (what :func:`freeze` returns)."""
    return isinstance(value, (FrozenList, FrozenDict)) or id(value) in _FROZEN_IDS


def freeze(value: Any) -> Any:
    """A deeply read-only copy of ``value`` (see the module docstring); scalars, strings, paths and other
    immutable values are kept as they are, a tuple stays a tuple and a set becomes a frozenset. A value
    already frozen is returned as it is."""
    if is_frozen(value):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        obj = object.__new__(cls)
        state = vars(value) if hasattr(value, "__dict__") else {f.name: getattr(value, f.name)
                                                                 for f in dataclasses.fields(value)}
        for k, v in state.items():
            object.__setattr__(obj, k, freeze(v))
        _guard(cls)
        _FROZEN_IDS.add(id(obj))
        weakref.finalize(obj, _FROZEN_IDS.discard, id(obj))
        return obj
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    if isinstance(value, dict):
        return FrozenDict((k, freeze(v)) for k, v in value.items())
    if type(value) is tuple:
        return tuple(freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    return value
