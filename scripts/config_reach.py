"""How far an experiment config travels: the functions reached from ``run_experiment`` along calls that pass
the config on, or an object derived from it (issue #39: "following run_experiment's cfg through the calls
that pass it on").

Method, an approximation from the source alone (no type inference):

- every module of ``src/preschool`` is parsed; a function is a module-level ``def`` or a method of a class;
- *the config* is the experiment config, a view of it or the loaded file that holds it: inside a reached
  function, the parameters that received it, and (to a fixed point) every name bound (assignment,
  ``for``, comprehension, ``:=``) from an expression that is the config: such a name, its ``.cfg``, a
  subscript of it, a call of one of its view methods (``at_rung``, ``rung_views``, ``ladder_views``,
  ``report_view``) or ``replace(<the config>, ...)``; the pieces resolved from it (arms, TrainConfigs, run
  records) are not the config;
- a call that passes the config as an argument reaches its callee when the callee is a function of the
  package the caller can name: a ``def`` of the same module, a name imported from a package module
  (module-level or inside a function, through re-exports), ``module.func`` of an imported package module,
  a method of the caller's class through ``self``/``cls``, or a class's ``__init__``/``__post_init__``/
  ``validate`` when the class is constructed; the callee's parameters that received it carry it on;
- a method called on the config (``cfg.train_config(...)``) reaches the method of that name of
  :data:`CONFIG_CLASSES`, ``self`` carrying the config;
- a stop is a distinct function reached (the root included); the files are the modules holding them.

Run: ``python scripts/config_reach.py [SRC]`` (SRC defaults to this checkout's ``src/preschool``); prints
the count of stops and files, then the stops by file.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = ("preschool.experiment", "run_experiment", "exp")
CONFIG_CLASSES = ("ExperimentConfig", "Experiment")  # the types the config is held in
VIEW_METHODS = ("at_rung", "rung_views", "ladder_views", "report_view")


def _modules(src: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(src.rglob("*.py")):
        parts = list(p.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


class _Index:
    """Every function of the package and what each module's names refer to."""

    def __init__(self, src: Path):
        self.mods = _modules(src)
        self.funcs: dict[tuple[str, str], ast.FunctionDef] = {}  # (module, "f" or "Class.m") -> def
        self.classes: dict[tuple[str, str], ast.ClassDef] = {}
        self.methods: dict[str, list[tuple[str, str]]] = defaultdict(list)  # method name -> functions
        self.names: dict[str, dict[str, tuple[str, str]]] = {}  # module -> local name -> (module, name)
        for mod, path in self.mods.items():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
            names: dict[str, tuple[str, str]] = {}
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.funcs[(mod, node.name)] = node
                    names[node.name] = (mod, node.name)
                elif isinstance(node, ast.ClassDef):
                    self.classes[(mod, node.name)] = node
                    names[node.name] = (mod, node.name)
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            key = (mod, f"{node.name}.{item.name}")
                            self.funcs[key] = item
                            self.methods[item.name].append(key)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = ".".join(pkg[: len(pkg) - (node.level - 1)] + (node.module.split(".") if node.module else []))
                    elif (node.module or "").split(".")[0] == "preschool":
                        base = node.module
                    else:
                        continue
                    for a in node.names:
                        sub = f"{base}.{a.name}"
                        names[a.asname or a.name] = (sub, "") if sub in self.mods else (base, a.name)
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.split(".")[0] == "preschool" and a.name in self.mods:
                            names[a.asname or a.name] = (a.name, "")
            self.names[mod] = names

    def follow(self, mod: str, name: str, seen=None) -> tuple[str, str] | None:
        """Where ``name`` of module ``mod`` is defined (through re-exports), or None."""
        seen = seen or set()
        if (mod, name) in seen:
            return None
        seen.add((mod, name))
        if (mod, name) in self.funcs or (mod, name) in self.classes:
            return mod, name
        target = self.names.get(mod, {}).get(name)
        if target is None or target[1] == "":
            return None
        return self.follow(*target, seen)


def _is_config(node: ast.AST | None, derived: set[str]) -> bool:
    """Whether ``node`` evaluates to the config (or a view of it, or the file holding it)."""
    if isinstance(node, ast.Name):
        return node.id in derived
    if isinstance(node, ast.Attribute):
        return node.attr == "cfg" and _is_config(node.value, derived)
    if isinstance(node, (ast.Subscript, ast.Starred)):
        return _is_config(node.value, derived)
    if isinstance(node, ast.IfExp):
        return _is_config(node.body, derived) or _is_config(node.orelse, derived)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in VIEW_METHODS:
            return _is_config(f.value, derived)
        return isinstance(f, ast.Name) and f.id == "replace" and bool(node.args) and _is_config(node.args[0], derived)
    return False


def _bound(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _derived(fn: ast.FunctionDef, start: set[str]) -> set[str]:
    derived = set(start)
    while True:
        before = len(derived)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _is_config(node.value, derived):
                for t in node.targets:
                    derived |= _bound(t)
            elif isinstance(node, ast.AnnAssign) and _is_config(node.value, derived):
                derived |= _bound(node.target)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and _is_config(node.iter, derived):
                derived |= _bound(node.target)
            elif isinstance(node, ast.NamedExpr) and _is_config(node.value, derived):
                derived.add(node.target.id)
        if len(derived) == before:
            return derived


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args]


def _callees(index: _Index, mod: str, cls: str | None, call: ast.Call, derived: set[str]) -> list:
    """``(function, bound_self)`` the call may reach."""
    f = call.func
    out = []
    if isinstance(f, ast.Name):
        hit = index.follow(mod, f.id)
        if hit is not None and hit in index.funcs:
            out.append((hit, False))
        elif hit is not None:  # a class: its constructor and what runs on construction
            out += [((hit[0], f"{hit[1]}.{m}"), True) for m in ("__init__", "__post_init__", "validate")
                    if (hit[0], f"{hit[1]}.{m}") in index.funcs]
    elif isinstance(f, ast.Attribute):
        base = f.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls") and cls and (mod, f"{cls}.{f.attr}") in index.funcs:
            out.append(((mod, f"{cls}.{f.attr}"), True))
        elif isinstance(base, ast.Name) and base.id in index.names.get(mod, {}) \
                and index.names[mod][base.id][1] == "":  # module.func
            hit = index.follow(index.names[mod][base.id][0], f.attr)
            if hit is not None and hit in index.funcs:
                out.append((hit, False))
        elif _is_config(base, derived):  # a method of the config
            out += [(key, True) for key in index.methods.get(f.attr, []) if key[1].split(".")[0] in CONFIG_CLASSES]
    return out


def reach(src: Path, root=ROOT) -> dict[tuple[str, str], set[str]]:
    """Every function reached from ``root`` (module, function, parameter) -> its derived parameters."""
    index = _Index(src)
    start = index.follow(root[0], root[1])
    got: dict[tuple[str, str], set[str]] = {start: {root[2]}}
    todo = [start]
    while todo:
        key = todo.pop()
        fn = index.funcs[key]
        mod, qual = key
        cls = qual.split(".")[0] if "." in qual else None
        derived = _derived(fn, got[key])
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            args = [a for a in call.args if not isinstance(a, ast.Starred)]
            passes = [i for i, a in enumerate(args) if _is_config(a, derived)]
            kws = [k.arg for k in call.keywords if k.arg and _is_config(k.value, derived)]
            on_derived = isinstance(call.func, ast.Attribute) and _is_config(call.func.value, derived)
            if not passes and not kws and not on_derived:
                continue
            for callee, bound in _callees(index, mod, cls, call, derived):
                params = _params(index.funcs[callee])
                offset = 1 if bound and params else 0
                new = {params[i + offset] for i in passes if i + offset < len(params)} | set(kws) & set(params)
                if bound and on_derived and params:
                    new.add(params[0])
                if not new and callee in got:
                    continue
                if callee not in got or not new <= got[callee]:
                    got[callee] = got.get(callee, set()) | new
                    todo.append(callee)
    return got


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "src" / "preschool"
    got = reach(src)
    by_file = defaultdict(list)
    for mod, qual in got:
        by_file[mod].append(qual)
    print(f"{len(got)} stops in {len(by_file)} files")
    for mod in sorted(by_file):
        print(f"  {mod}: {', '.join(sorted(by_file[mod]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
