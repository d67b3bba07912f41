"""How parts are found: the packages the registries walk, the extension packages inside preschool, and plug-ins.

Words: a *plug-in* is always parts from outside the package (a module, ``.py`` file or folder of your
own, or an installed distribution's entry point); an *extension package* is a package inside preschool
built the same way (``compartments``, :data:`PLUGINS`), which the core never imports.

Every registry that takes parts from files (generators, L2T tasks, evaluators,
dataset builders (derived dataset kinds among them), report sections, callbacks,
model presets, export formats, corpus sources, GPUs, commands, ``transform``
kinds, compartment presentations; see :class:`preschool.registry.Registry`)
finds a part by its name in the module of that name (``dyck`` in
``synthetic/dyck.py``), and imports every module of its own package
(:func:`import_package`) when it lists them or the name is not a file's. A part
is therefore one file in that package and registers itself when imported; there
is no list to edit.

**Parts from outside the package** (your own repository) are plug-ins named by

- an experiment's ``plugins: [my_lab.tasks, ./my_tasks.py, ./my_tasks/]``,
- ``preschool <command> --plugins my_lab.tasks,./my_tasks.py ...``, or the
  environment variable ``PRESCHOOL_PLUGINS`` (the same list, for every command
  and every Slurm job that inherits it),
- an installed distribution's ``preschool.plugins`` entry point (its value is a
  module; found by every command, nothing to name).

A relative path resolves against the folder the command runs in, wherever it is named (as every
relative path a command is given does: docs/reliability.md, "Relative paths").

Each is imported once (:func:`use`): a module name is imported (a package with
every module under it), a ``.py`` file is imported as a module named after its
stem, a folder with ``__init__.py`` as a package named after the folder, any
other folder as its ``.py`` files. A part in it registers exactly as a part
inside does (``@GENERATORS.register(...)``), and ``preschool generate --list``
/ ``eval --list`` say where each part came from (:func:`origin`). One that fails
to import is a ConfigError naming it; :func:`loaded` records each with its
version and the sha256 of its source (``experiment.yaml``'s ``plugins_used``),
and :func:`announce` prints one stderr line per plug-in as it is loaded. Refused,
each in one line naming the plug-in: a file or folder module named after one the
standard library, an installed distribution or ``sys.path`` provides (checked
before import, :func:`_refuse_shadowing`); a part taking a built-in name without
``override=True`` (``Registry.register``); ``sys.exit`` / ``KeyboardInterrupt``
at import.

Files and folders are imported in this process and the processes it forks; a
Slurm or Ray task of ``prepare --executor slurm|ray`` imports the same ones: the job
records each plug-in's path and sha256 (:func:`for_workers`) and the task imports
those files before anything else, refusing one whose sha256 changed
(:func:`use_recorded`), so it needs the same paths on every node (a shared folder).

**Extension packages** (``PLUGINS``) are packages inside preschool that extend the core without
being imported by it, so dependencies point down (``evals`` loads a
compartments checkpoint without importing ``compartments``). A registry also
imports, in each, the module or sub-package named after the kind of part it
holds (``Registry.plugin_module``): ``synthetic`` (generators), ``l2t_tasks``,
``evals``, ``builders`` (dataset builders and derived kinds), ``sections`` (report
sections), ``callbacks``, ``presets``, ``families`` (model families), ``exporters``, ``sources``, ``gpus``,
``commands``, ``transforms``, ``minimal_pairs_presets``, ``paradigms`` (storybook
minimal-pair paradigms), ``presentations``. Only those modules are imported, so an extension package's heavy
modules (torch) load when used. What is not a registry part goes in its
``plugin`` module, imported by :func:`load_plugins`: today the
checkpoint-loader hook (:func:`register_checkpoint_hook`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import ConfigError

PLUGINS: tuple[str, ...] = ("preschool.compartments",)
ENV = "PRESCHOOL_PLUGINS"  # comma-separated plug-ins for every command (relative paths: the working folder)
ENTRY_POINTS = "preschool.plugins"  # the entry-point group an installed distribution declares its plug-in in

_loaded = False
_checkpoint_hooks: list[Callable[[Any, Path], Any]] = []
_CORE = Path(__file__).resolve().parent


def import_package(name: str) -> None:
    """Import module ``name`` and, when it is a package, every module under it (recursively; names starting
    with ``_`` are skipped, so ``__main__`` and private helpers never run). Import errors propagate."""
    module = importlib.import_module(name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", None) or []):
        if not info.name.startswith("_"):
            import_package(f"{name}.{info.name}")


def _plugin_module(package: str, module: str) -> str | None:
    """``<package>.<module>`` when the plug-in has it, else None (only a missing module is skipped)."""
    full = f"{package}.{module}"
    return full if importlib.util.find_spec(full) is not None else None


def plugin_parts(module: str) -> None:
    """Import, in every extension package, the module or sub-package ``module`` (walked like a core
    package)."""
    for package in PLUGINS:
        full = _plugin_module(package, module)
        if full is not None:
            import_package(full)


def load_plugins() -> None:
    """Import every extension package's ``plugin`` module once (the checkpoint hook), and the plug-ins from
    outside (:func:`use_installed`)."""
    global _loaded
    use_installed()
    if _loaded:
        return
    _loaded = True
    for package in PLUGINS:
        full = _plugin_module(package, "plugin")
        if full is not None:
            importlib.import_module(full)


def register_checkpoint_hook(fn: Callable[[Any, Path], Any]) -> Callable[[Any, Path], Any]:
    """``fn(model, checkpoint_dir) -> model`` runs on every model the evaluators load (after ``from_pretrained``),
    e.g. to re-attach weights that live outside the HF architecture. Must return the model unchanged when the
    checkpoint is not its kind."""
    if fn not in _checkpoint_hooks:
        _checkpoint_hooks.append(fn)
    return fn


def checkpoint_hooks() -> list[Callable[[Any, Path], Any]]:
    load_plugins()
    return list(_checkpoint_hooks)


# ----------------------------------------------------------------------------- plug-ins from outside


@dataclass(frozen=True)
class Plugin:
    """One plug-in from outside the package, imported."""

    plugin: str  # as named: a module, or a file or folder made absolute
    named_by: str  # where it was named: "plugins" (an experiment), "--plugins", PRESCHOOL_PLUGINS, "entry point <n>"
    modules: tuple[str, ...]  # the module names it was imported as
    root: Path | None  # its source: the file or folder (None: a module without a file)
    version: str | None  # its distribution's version, when it is installed as one
    sha256: str | None = None  # of its source as it was imported (source_hash; None without a root)

    @property
    def label(self) -> str:
        """How a listing names it: ``plug-in <name>`` (``<dist> <version>`` for an entry point)."""
        return f"plug-in {self.plugin}" + (f" ({self.named_by})" if self.named_by.startswith("entry point") else "")

    def owns(self, module: str) -> bool:
        """Whether ``module`` is one of its modules (or under one)."""
        return any(module == m or module.startswith(m + ".") for m in self.modules)

    def record(self) -> dict:
        """What ``experiment.yaml`` records of it: name, where named, version, sha256 of its source as
        imported, and (only when it has some) the built-in parts it overrides (``registry``, ``name``)."""
        out = {"plugin": self.plugin, "named_by": self.named_by, "version": self.version, "sha256": self.sha256}
        mine = [{"registry": o["registry"], "name": o["name"]} for o in _overrides if self.owns(o["module"])]
        return {**out, "overrides": mine} if mine else out


_outside: dict[str, Plugin] = {}
_overrides: list[dict] = []  # {"registry", "name", "module"}: a built-in part a plug-in replaced (override=True)
_installed_done = False
_lock = threading.RLock()


def source_hash(root: Path) -> str:
    """sha256 of a plug-in's source: the file's (as ``sha256sum`` prints it), or for a folder of every file
    under it by relative path (compiled caches left out), so the record changes exactly when its code does."""
    if root.is_file():
        return hashlib.sha256(root.read_bytes()).hexdigest()
    h = hashlib.sha256()
    for p in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def split_names(text: str | None) -> list[str]:
    """The plug-ins of a comma-separated list (``--plugins``, ``PRESCHOOL_PLUGINS``)."""
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def use(names: list[str] | tuple[str, ...], base: Path | None = None, named_by: str = "plugins") -> list[Plugin]:
    """Import the plug-ins ``names`` (modules, ``.py`` files, folders; relative paths against ``base``, default
    the working folder), each once; ConfigError naming ``named_by`` and the plug-in when one is missing or
    fails to import. Returns them, as imported."""
    out = []
    for i, name in enumerate(names):
        field = f"{named_by}[{i}]" if named_by == "plugins" else named_by
        out.append(_use_one(str(name), base, field, named_by))
    return out


def _is_path(name: str) -> bool:
    return "/" in name or os.sep in name or name.endswith(".py") or name.startswith(".")


def _use_one(name: str, base: Path | None, field: str, named_by: str) -> Plugin:
    path = Path(name).expanduser()
    if _is_path(name) and not path.is_absolute():
        path = (base or Path.cwd()) / path
    key = str(path.resolve()) if _is_path(name) else name
    with _lock:
        if key in _outside:
            return _outside[key]
        if _is_path(name):
            if not path.exists():
                raise ConfigError(field, f"plug-in {name!r}: no such file or folder ({path.resolve()})")
            root = path.resolve()
            digest = source_hash(root)  # before importing: the hash is that of the code that runs
            modules = _import_path(root, name, field)
            plugin = Plugin(key, named_by, tuple(modules), root, None, digest)
        else:
            module = _import(name, name, field, lambda: import_package(name))
            root = _module_root(module)
            plugin = Plugin(key, named_by, (name,), root, _version_of(name),
                            source_hash(root) if root is not None else None)
        _outside[key] = plugin
        announce(plugin)
        return plugin


def announce(plugin: Plugin) -> None:
    """One stderr line per plug-in once it is imported: a ``plugins:`` key or ``--plugins`` runs its code,
    so every command (plan and ``--list`` too) says which file ran, and which version of it."""
    where = plugin.root if plugin.root is not None else plugin.plugin
    sha = f"sha256 {plugin.sha256[:12]}" if plugin.sha256 else "no source file"
    print(f"[preschool] loaded plug-in {where} ({sha}; named by {plugin.named_by})", file=sys.stderr, flush=True)


def _import(name: str, shown: str, field: str, do: Callable[[], Any]) -> Any:
    """Run the import ``do``; any failure is a one-line ConfigError naming the plug-in and the cause."""
    try:
        do()
        return sys.modules.get(name)
    except ConfigError:
        raise
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise ConfigError(field, f"plug-in {shown!r}: no module named {name!r} (not installed, not on "
                              "PYTHONPATH; a file or folder is named by its path, e.g. ./my_parts.py)") from None
        raise ConfigError(field, f"plug-in {shown!r} failed to import: {type(e).__name__}: {e}") from None
    except (SystemExit, KeyboardInterrupt) as e:
        # importing a plug-in defines and registers parts; ending the process there would end the command
        # with the plug-in's exit status and no word, so it is named like any other failure
        what = f"called sys.exit({e.code!r})" if isinstance(e, SystemExit) else "raised KeyboardInterrupt"
        raise ConfigError(field, f"plug-in {shown!r} {what} while being imported{raised_at(e)}; a plug-in "
                          "only defines and registers parts") from None
    except Exception as e:  # noqa: BLE001 - whatever a plug-in raises, the user gets one line naming it
        raise ConfigError(field, f"plug-in {shown!r} failed to import: {type(e).__name__}: {e}{raised_at(e)}") \
            from None


def raised_at(e: BaseException) -> str:
    """`` (file:line)`` of the plug-in's own line that raised ``e``: the last frame outside the package
    ("" when every frame is preschool's)."""
    where = ""
    tb = e.__traceback__
    while tb is not None:
        if not Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_CORE):
            where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
        tb = tb.tb_next
    return where


def _import_path(path: Path, shown: str, field: str) -> list[str]:
    """Import a plug-in file or folder; the module names it became."""
    if path.is_file():
        if path.suffix != ".py":
            raise ConfigError(field, f"plug-in {shown!r}: a file plug-in is a .py file")
        _refuse_shadowing(path, path.stem, shown, field)
        return [_import_file(path, path.stem, shown, field)]
    if (path / "__init__.py").is_file():
        _refuse_shadowing(path / "__init__.py", path.name, shown, field)
        name = _import_file(path / "__init__.py", path.name, shown, field, package=path)
        _import(name, shown, field, lambda: import_package(name))
        return [name]
    files = sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ConfigError(field, f"plug-in {shown!r}: the folder {path} has no .py file and no __init__.py")
    for p in files:  # all checked before any runs: a refused folder imports nothing
        _refuse_shadowing(p, p.stem, shown, field)
    return [_import_file(p, p.stem, shown, field) for p in files]


def _refuse_shadowing(file: Path, name: str, shown: str, field: str) -> None:
    """ConfigError when module ``name`` (what ``file`` would be imported as) is one that the standard library,
    an installed distribution or another file on ``sys.path`` provides: registered under that name, the
    plug-in would replace it for every later ``import`` in the process (``./json.py``, ``./tokenizers.py``)."""
    owner = None
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        owner = "the standard library"
    elif name in _distribution_modules():
        owner = f"the installed distribution {_distribution_modules()[name][0]}"
    elif name not in sys.modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None) if spec is not None else None
        if spec is not None and (origin is None or Path(origin).resolve() != file.resolve()):
            owner = f"{origin or 'a module'} (on sys.path)"
    if owner is not None:
        raise ConfigError(field, f"plug-in {shown!r}: its file {file.name if file.name != '__init__.py' else name} "
                          f"would be imported as module {name!r}, which {owner} provides, and hide it from every "
                          "later import; rename it (e.g. my_lab_" + name + ")")


_dist_modules: dict[str, list[str]] | None = None


def _distribution_modules() -> dict[str, list[str]]:
    """Top-level module name -> the installed distributions that provide it (read once per process)."""
    global _dist_modules
    if _dist_modules is None:
        from importlib import metadata

        _dist_modules = dict(metadata.packages_distributions())
    return _dist_modules


def _import_file(file: Path, name: str, shown: str, field: str, package: Path | None = None) -> str:
    """Import ``file`` as module ``name`` (registered in sys.modules, so dataclasses and pickling find it)."""
    old = sys.modules.get(name)
    if old is not None:
        if Path(getattr(old, "__file__", "") or "").resolve() == file:
            return name
        raise ConfigError(field, f"plug-in {shown!r}: its module name {name!r} is taken by "
                          f"{getattr(old, '__file__', None) or 'a built-in module'}; rename the file or folder")
    spec = importlib.util.spec_from_file_location(
        name, file, submodule_search_locations=[str(package)] if package is not None else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module

    def run() -> None:
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)  # a broken plug-in is never half there: the next use raises again
            raise

    _import(name, shown, field, run)
    return name


def _module_root(module: Any) -> Path | None:
    """A module's source: its package folder, or its file."""
    paths = list(getattr(module, "__path__", None) or [])
    if paths:
        return Path(paths[0]).resolve()
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None


def _version_of(module: str) -> str | None:
    """The version of the installed distribution that holds ``module`` (None: not installed as one)."""
    from importlib import metadata

    dists = metadata.packages_distributions().get(module.split(".")[0]) or []
    return metadata.version(dists[0]) if dists else None


def use_installed() -> None:
    """Import, once per process, the plug-ins of ``PRESCHOOL_PLUGINS`` and every installed
    ``preschool.plugins`` entry point (each registry does this before it looks a part up)."""
    global _installed_done
    if _installed_done:
        return
    with _lock:
        if _installed_done:
            return
        _installed_done = True  # before importing: a plug-in that looks a part up must not come back here
        try:
            use(split_names(os.environ.get(ENV)), named_by=ENV)
            from importlib import metadata

            for ep in metadata.entry_points(group=ENTRY_POINTS):
                dist = getattr(ep, "dist", None)
                named = f"entry point {ep.name!r} of {dist.name} {dist.version}" if dist else f"entry point {ep.name!r}"
                if ep.value in _outside:
                    continue
                module, _, hook = ep.value.partition(":")

                def do(module=module, hook=hook, ep=ep) -> None:
                    import_package(module)
                    if hook:  # "module:function": the function is called once the module is imported
                        ep.load()()

                mod = _import(module, f"{ep.value} ({named})", named, do)
                root = _module_root(mod)
                _outside[ep.value] = Plugin(ep.value, named, (module,), root, dist.version if dist else None,
                                            source_hash(root) if root is not None else None)
                announce(_outside[ep.value])
        except BaseException:
            _installed_done = False  # the next lookup raises again: a broken plug-in is never silently missing
            raise


def for_workers() -> list[dict]:
    """What a job run elsewhere (a Slurm or Ray task of ``prepare``) needs to import the same plug-ins: each
    named one (not the entry points, which every process finds itself) as ``{"plugin", "root", "sha256"}``
    (:func:`use_recorded` on the worker)."""
    use_installed()
    return [{"plugin": p.plugin, "root": str(p.root) if p.root is not None else None, "sha256": p.sha256}
            for p in _outside.values() if not p.named_by.startswith("entry point")]


def use_recorded(records: list[dict], named_by: str = "the job") -> None:
    """On a worker: import the plug-ins a job recorded (:func:`for_workers`), refusing one whose source is
    missing here or differs from what the job recorded (its sha256), so every task runs the code the
    command that made the job ran. ConfigError naming the plug-in, both hashes and what to do."""
    for r in records:
        plugin, sha = r["plugin"], r.get("sha256")
        root = Path(plugin) if _is_path(plugin) else _spec_root(plugin)
        if root is None or not root.exists():
            raise ConfigError(named_by, f"plug-in {plugin!r} is not on this machine (the job was made with it; "
                              "the same file or module must be at the same place on every node)")
        now = source_hash(root)  # before importing: a changed plug-in never runs
        if sha is not None and now != sha:
            raise ConfigError(named_by, f"plug-in {plugin!r} changed since the job was made (sha256 {sha[:12]} "
                              f"then, {now[:12]} here: {root}); rerun the command, so that its tasks run the "
                              "code it records")
        use([plugin], named_by=named_by)


def _spec_root(module: str) -> Path | None:
    """Where module ``module`` would be imported from (its package folder or file), without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    return Path(spec.origin).resolve() if spec.origin else None


def loaded() -> list[dict]:
    """Every plug-in from outside imported so far, as ``experiment.yaml`` records it (:meth:`Plugin.record`)."""
    use_installed()
    return [p.record() for p in _outside.values()]


def is_core(module: str) -> bool:
    """Whether ``module`` is preschool's own (the package and its extension packages), not a plug-in's."""
    if module != "preschool" and not module.startswith("preschool."):
        return False
    file = getattr(sys.modules.get(module), "__file__", None)
    return file is None or Path(file).resolve().is_relative_to(_CORE)


def source_of(module: str) -> str:
    """How an error names the code of ``module``: ``plug-in <its file>`` (the module's name without one)."""
    file = getattr(sys.modules.get(module), "__file__", None)
    return f"plug-in {file or module}"


def note_override(module: str, registry: str, name: str) -> None:
    """Record that ``module`` (a plug-in's) replaced the built-in ``name`` of ``registry`` on purpose
    (``register(name, override=True)``): its plug-in's record in ``experiment.yaml`` lists it."""
    entry = {"registry": registry, "name": name, "module": module}
    if entry not in _overrides:
        _overrides.append(entry)


def overrides() -> list[dict]:
    """Every built-in part a plug-in replaced so far: ``{"registry", "name", "plugin"}``."""
    return [{"registry": o["registry"], "name": o["name"], "plugin": source_of(o["module"])[len("plug-in "):]}
            for o in _overrides]


def origin(module: str) -> str:
    """Where the part defined in ``module`` came from: ``preschool`` (the package and its extension packages),
    ``plug-in <name>`` for a plug-in from outside, else the module's name."""
    mod = sys.modules.get(module)
    file = Path(getattr(mod, "__file__", "") or "").resolve() if mod is not None else None
    if module == "preschool" or module.startswith("preschool.") and file is not None and file.is_relative_to(_CORE):
        return "preschool"
    for p in _outside.values():
        if p.owns(module):
            return p.label
        if file is not None and p.root is not None and (file == p.root or file.is_relative_to(p.root)):
            return p.label
    return module
