"""Name -> component registries with "did you mean" suggestions.

A component (generator, L2T task, evaluator, model preset...) is a config
dataclass plus a class; a module registers it once at import time:

    GENERATORS = Registry("generator")
    @GENERATORS.register("shuffle_dyck", config=ShuffleDyckConfig)
    class ShuffleDyck(Generator): ...

and users build it by name: ``GENERATORS.build("shuffle_dyck", {"k": 64})``.

Discovery: a registry made with ``packages`` finds its parts itself. A lookup
of a name not registered yet imports the module of that name in each package
(``dyck`` -> ``synthetic/dyck.py``, the documented file name) and nothing else
when that registers it. Otherwise, and for listing (``names()``, iteration,
``len``), it imports every module of those packages (sub-packages too; names
starting with ``_`` are skipped) and, in every extension package of
``plugins.PLUGINS``, the module or sub-package named ``plugin_module``. Before
either it imports the plug-ins from outside the package that every command
sees (``PRESCHOOL_PLUGINS``, installed ``preschool.plugins`` entry points;
``preschool.plugins``). So a new part is one new file in the package, or in a
plug-in, with nothing else to edit. A module that fails to import raises, so a
broken part is never silently missing.

A part registered from outside the package (a plug-in's) never takes a built-in
name silently: :meth:`Registry.register` looks the name up among the package's
parts first and refuses it in one line naming the plug-in's file, the registry
and the name, unless the plug-in passes ``override=True`` (recorded,
``plugins.note_override``).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
import threading
from dataclasses import dataclass
from types import FunctionType
from typing import Any, Callable, Iterator

from . import plugins
from .errors import ConfigError


@dataclass(frozen=True)
class Entry:
    name: str
    cls: Any
    config: type | None
    summary: str
    module: str = ""  # the module that registered it
    override: bool = False  # a plug-in's part that replaced the built-in of this name (register(override=True))

    @property
    def origin(self) -> str:
        """Where the part came from: ``preschool``, or ``plug-in <name>`` (``plugins.origin``)."""
        return plugins.origin(self.module)


class Registry:
    def __init__(self, kind: str, packages: tuple[str, ...] = (), plugin_module: str | None = None):
        self.kind = kind
        self.packages = tuple(packages)
        self.plugin_module = plugin_module
        self._entries: dict[str, Entry] = {}
        self._discovered = not self.packages and plugin_module is None
        self._discovering = False
        self._lock = threading.RLock()

    def discover(self) -> None:
        """Import the modules that hold this registry's parts (once; see the module docstring)."""
        plugins.use_installed()  # once per process; also for a registry without packages (presets...)
        if self._discovered:
            return
        with self._lock:  # another thread waits here until the parts are all found
            if self._discovered or self._discovering:
                return  # a module this thread is importing looked the registry up: it sees the parts found so far
            self._discovering = True
            try:
                for name in self.packages:
                    plugins.import_package(name)
                if self.plugin_module is not None:
                    plugins.plugin_parts(self.plugin_module)
                self._discovered = True  # not on error: the next lookup raises again instead of missing parts
            finally:
                self._discovering = False

    def register(self, name: str, config: type | None = None, override: bool = False) -> Callable[[Any], Any]:
        """Decorator: register ``cls`` (a class, or any object: a function, a table row) under ``name``.

        A plug-in's part (any module outside the package) may not take a name that a built-in part of this
        registry has (nor one another plug-in took): one-line ConfigError naming the plug-in's file, the
        registry and the name, unless it passes ``override=True``; then it replaces the built-in, for
        lookups and listings alike, and ``plugins.note_override`` records that (``experiment.yaml``'s
        ``plugins_used``, the report)."""

        caller = sys._getframe(1).f_globals.get("__name__", "")  # who registers: a table row has no module

        def deco(cls: Any) -> Any:
            module = (getattr(cls, "__module__", "") if isinstance(cls, (type, FunctionType)) else caller) or ""
            replaces = False  # a plug-in's part replacing the built-in of this name
            old = self._entries.get(name)
            if old is not None and old.cls is cls:
                return cls
            if plugins.is_core(module):
                if old is not None and old.override:
                    return cls  # a plug-in replaced this built-in on purpose: it keeps the name
                if old is not None:
                    raise ValueError(f"{self.kind} {name!r} registered twice ({old.module}, {module})")
            else:
                builtin = self._builtin(name)
                if old is not None and not plugins.is_core(old.module) and (builtin is None or not override):
                    raise ConfigError(plugins.source_of(module), f"registers {self.kind} {name!r}, which "
                                      f"{plugins.source_of(old.module)} registers too; rename one of them")
                if builtin is not None and not override:
                    raise ConfigError(plugins.source_of(module), f"registers {self.kind} {name!r}, a built-in "
                                      f"name ({builtin.module}); rename it, or register it with "
                                      "override=True to replace the built-in")
                if builtin is not None:
                    plugins.note_override(module, self.kind, name)
                    replaces = True
            doc = (getattr(cls, "__doc__", None) or "").strip().splitlines()
            self._entries[name] = Entry(name, cls, config, doc[0] if doc else "", module,
                                        override=replaces)
            try:
                cls.registry_name = name
            except (AttributeError, TypeError):  # a frozen or slotted object: its entry holds the name
                pass
            return cls

        return deco

    def _builtin(self, name: str) -> Entry | None:
        """The built-in part named ``name``, if any: its module's file is imported, else every module of the
        packages (a plug-in registering a name must not shadow a built-in that discovery finds later)."""
        if name not in self._entries and not self.find(name):
            self.discover()
        entry = self._entries.get(name)
        return entry if entry is not None and plugins.is_core(entry.module) else None

    def find(self, name: str) -> bool:
        """Whether ``name`` is registered once the module of that name in each package is imported (only
        it: looking one part up does not import the others); False leaves full discovery to the caller."""
        if name in self._entries:
            return True
        if self._discovered or not name.isidentifier() or name.startswith("_"):
            return False
        plugins.use_installed()
        for package in self.packages:
            if name in self._entries:
                break
            module = f"{package}.{name}"
            if _has_module(module):
                importlib.import_module(module)
        return name in self._entries

    def get(self, name: str, field: str = "") -> Entry:
        if not self.find(name):
            self.discover()
        if name not in self._entries:
            close = difflib.get_close_matches(name, list(self._entries), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            known = ", ".join(sorted(self._entries))
            raise ConfigError(field or self.kind, f"unknown {self.kind} {name!r}{hint} (known: {known})")
        return self._entries[name]

    def build_config(self, name: str, values: dict | None = None, field: str = "") -> Any:
        """Typed, validated config for component ``name`` from a plain dict."""
        from .config import from_dict

        entry = self.get(name, field)
        if entry.config is None:
            if values:
                raise ConfigError(field, f"{self.kind} {name!r} takes no parameters")
            return None
        return from_dict(entry.config, values or {}, field)

    def build(self, name: str, values: dict | None = None, field: str = "") -> Any:
        entry = self.get(name, field)
        cfg = self.build_config(name, values, field)
        return entry.cls(cfg) if entry.config is not None else entry.cls()

    def names(self, sort: bool = True) -> list[str]:
        """Every registered name (all discovered first), sorted, or in the order registered (``sort=False``:
        modules in discovery order, each module's parts in its own order)."""
        self.discover()
        return sorted(self._entries) if sort else list(self._entries)

    def __getitem__(self, name: str) -> Any:
        """The registered object itself (class, function or table row); ConfigError when unknown."""
        return self.get(name).cls

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries[n] for n in self.names())

    def __contains__(self, name: str) -> bool:
        if not self.find(name):
            self.discover()
        return name in self._entries

    def __len__(self) -> int:
        self.discover()
        return len(self._entries)


def _has_module(name: str) -> bool:
    """Whether module ``name`` exists (its package is imported to tell; a missing package is False)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False
