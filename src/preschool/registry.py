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
starting with ``_`` are skipped) and, in every plug-in package of
``plugins.PLUGINS``, the module or sub-package named ``plugin_module``. Before
either it imports the plug-ins from outside the package that every command
sees (``PRESCHOOL_PLUGINS``, installed ``preschool.plugins`` entry points;
``preschool.plugins``). So a new part is one new file in the package, or in a
plug-in, with nothing else to edit. A module that fails to import raises, so a
broken part is never silently missing.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import threading
from dataclasses import dataclass
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

    def register(self, name: str, config: type | None = None) -> Callable[[Any], Any]:
        def deco(cls: Any) -> Any:
            if name in self._entries and self._entries[name].cls is not cls:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            doc = (cls.__doc__ or "").strip().splitlines()
            self._entries[name] = Entry(name, cls, config, doc[0] if doc else "", getattr(cls, "__module__", ""))
            cls.registry_name = name
            return cls

        return deco

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

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._entries)

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
