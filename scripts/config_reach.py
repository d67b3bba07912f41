"""How far an experiment config travels: the functions it reaches from the commands that run an experiment
(``run_experiment``: data, training, evaluation, the report) and submit one (``launch``), along calls that pass
it on or a part of it (issue #39 item 1, issue #46 item 2).

Method, an approximation from the source alone (no type inference):

- every module of ``src/preschool`` is parsed; a function is a module-level ``def`` or a method of a class;
- *the config classes* are ``ExperimentConfig`` and, to a fixed point, every class named in the annotation of
  a field of a config class (``ArmSpec``, ``StageConfig``, ``DatasetSpec``...) and every subclass of one (a
  variant); a *holder* is a class with a field ``cfg: ExperimentConfig`` (the loaded file or the resolved
  experiment that carries the config);
- inside a reached function, a value is *the config* (the whole: the config, a view of it, ``holder.cfg``), a
  *holder*, or a *part*: an attribute of the config or of a part, a subscript of one, what iterating one
  gives (``for arm in cfg.arms``, ``enumerate``/``zip``/``sorted`` of one, ``.items()``/``.values()``), except
  attributes that are plain values (a field annotated with scalars only in every config class that has it:
  ``name``, ``seed``, ``out``, a property such as ``out_dir -> Path``). A view is a call of ``at_rung``,
  ``rung_views``, ``ladder_views`` or ``report_view`` on the config or a holder, or ``replace(<it>, ...)``.
  What a function *computes* from the config (a resolved TrainConfig, a run record, ``to_dict(cfg)``) is
  not the config: a record is a resolved copy, and ``holder.runs`` is not followed;
- names bound (assignment, ``for``, comprehension, ``:=``) from such an expression carry its kind, to a fixed
  point;
- a call that passes the config, a holder or a part as an argument reaches its callee when the callee is a
  function of the package the caller can name: a ``def`` of the same module, a name imported from a package
  module (module-level or inside a function, through re-exports), ``module.func`` of an imported package
  module, a method of the caller's class through ``self``/``cls``, or a class's ``__init__``/``__post_init__``/
  ``validate`` when the class is constructed; the callee's parameters that received it carry the kind on;
- a method called on the config reaches the method of that name of ``ExperimentConfig``, on a part the
  methods of that name of the other config classes, on a holder those of the holder classes (``self``
  carrying the kind);
- a *stop* is a distinct function reached (the roots included); the files are the modules holding them. A
  stop is *back up the import order* when it receives the whole config or a holder (not just a part) and its
  module does not import, directly or through others, the module that defines ``ExperimentConfig``: it
  handles an object whose type it cannot name (duck typing across the layers).

Run: ``python scripts/config_reach.py [SRC]`` (SRC defaults to this checkout's ``src/preschool``); prints
the count of stops, files and stops back up the import order, then the stops by file (``^``: back up).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOTS = (("preschool.experiment", "run_experiment"), ("preschool.launch", "launch"))
CONFIG = "ExperimentConfig"
VIEW_METHODS = ("at_rung", "rung_views", "ladder_views", "report_view")
ITERATING = ("enumerate", "zip", "sorted", "reversed", "list", "tuple", "dict", "iter")
MAPPING_METHODS = ("items", "values", "keys", "get")
SCALARS = {"str", "int", "float", "bool", "Path", "None", "list", "tuple", "set", "Literal", "Optional", "dict"}
WHOLE, HOLDER, PART = "config", "holder", "part"
_RANK = (PART, WHOLE, HOLDER)


def _modules(src: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(src.rglob("*.py")):
        parts = list(p.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


class _Index:
    """Every function and class of the package, what each module's names refer to, and its imports."""

    def __init__(self, src: Path):
        self.mods = _modules(src)
        self.funcs: dict[tuple[str, str], ast.FunctionDef] = {}  # (module, "f" or "Class.m") -> def
        self.classes: dict[tuple[str, str], ast.ClassDef] = {}
        self.methods: dict[str, list[tuple[str, str]]] = defaultdict(list)  # method name -> functions
        self.names: dict[str, dict[str, tuple[str, str]]] = {}  # module -> local name -> (module, name)
        self.imports: dict[str, set[str]] = defaultdict(set)  # module -> package modules it imports
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
                        here = pkg[: len(pkg) - (node.level - 1)]
                        base = ".".join(here + (node.module.split(".") if node.module else []))
                    elif (node.module or "").split(".")[0] == "preschool":
                        base = node.module
                    else:
                        continue
                    for a in node.names:
                        sub = f"{base}.{a.name}"
                        names[a.asname or a.name] = (sub, "") if sub in self.mods else (base, a.name)
                        self.imports[mod].add(sub if sub in self.mods else base)
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.split(".")[0] == "preschool" and a.name in self.mods:
                            names[a.asname or a.name] = (a.name, "")
                            self.imports[mod].add(a.name)
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

    def imports_of(self, mod: str) -> set[str]:
        """Every package module ``mod`` imports, directly or through others (a package through its face)."""
        seen, todo = set(), [mod]
        while todo:
            m = todo.pop()
            for t in self.imports.get(m, ()):
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen


def _annotation_names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            return _annotation_names(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _fields(cls: ast.ClassDef) -> dict[str, ast.AST]:
    """A class's annotated fields and its properties' return annotations, name -> annotation."""
    out = {n.target.id: n.annotation for n in cls.body
           if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for n in cls.body:
        if isinstance(n, ast.FunctionDef) and any(isinstance(d, ast.Name) and d.id == "property"
                                                  for d in n.decorator_list):
            out[n.name] = n.returns
    return out


class _Types:
    """The config classes, the holder classes and the plain attribute names of a package (module docstring)."""

    def __init__(self, index: _Index):
        self.config = next((k for k in index.classes if k[1] == CONFIG), None)
        found: set[tuple[str, str]] = {self.config} if self.config else set()
        while True:
            before = len(found)
            for key in list(found):
                for ann in _fields(index.classes[key]).values():
                    for name in _annotation_names(ann):
                        hit = index.follow(key[0], name)
                        if hit in index.classes:
                            found.add(hit)
            for key, cls in index.classes.items():  # variants: subclasses of a config class
                bases = {index.follow(key[0], b.id) for b in cls.bases if isinstance(b, ast.Name)}
                if bases & found:
                    found.add(key)
            if len(found) == before:
                break
        self.classes = found
        self.holders = {k for k, c in index.classes.items() if CONFIG in _annotation_names(_fields(c).get("cfg"))}
        kinds: dict[str, set[bool]] = defaultdict(set)
        for key in found:
            for name, ann in _fields(index.classes[key]).items():
                kinds[name].add(bool(_annotation_names(ann)) and _annotation_names(ann) <= SCALARS)
        self.plain = {name for name, k in kinds.items() if k == {True}}


def _kind(node: ast.AST | None, env: dict[str, str], types: _Types) -> str | None:
    """What ``node`` evaluates to: the config (WHOLE), a HOLDER of it, a PART of it, or None."""
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.Attribute):
        k = _kind(node.value, env, types)
        if k == HOLDER:
            return WHOLE if node.attr == "cfg" else None
        if k in (WHOLE, PART):
            return None if node.attr in types.plain else PART
        return None
    if isinstance(node, (ast.Subscript, ast.Starred)):
        return PART if _kind(node.value, env, types) else None
    if isinstance(node, ast.IfExp):
        return _kind(node.body, env, types) or _kind(node.orelse, env, types)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in VIEW_METHODS:
            return _kind(f.value, env, types)
        if isinstance(f, ast.Attribute) and f.attr in MAPPING_METHODS and _kind(f.value, env, types):
            return PART
        if isinstance(f, ast.Name) and f.id == "replace" and node.args:
            return _kind(node.args[0], env, types)
        if isinstance(f, ast.Name) and f.id in ITERATING and any(_kind(a, env, types) for a in node.args):
            return PART
    return None


def _bind(target: ast.AST, kind: str, env: dict[str, str], value: ast.AST | None = None) -> None:
    """Give the names ``target`` binds ``kind`` (of ``for i, x in enumerate(...)``, ``x`` only)."""
    if (isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name) and value.func.id == "enumerate"):
        target = target.elts[1]
    for n in ast.walk(target):
        if isinstance(n, ast.Name) and n.id not in env:
            env[n.id] = kind


def _derived(fn: ast.FunctionDef, start: dict[str, str], types: _Types) -> dict[str, str]:
    env = dict(start)
    while True:
        before = len(env)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and (k := _kind(node.value, env, types)):
                for t in node.targets:
                    _bind(t, k, env)
            elif isinstance(node, ast.AnnAssign) and (k := _kind(node.value, env, types)):
                _bind(node.target, k, env)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and (k := _kind(node.iter, env, types)):
                _bind(node.target, PART if k == WHOLE else k, env, node.iter)
            elif isinstance(node, ast.NamedExpr) and (k := _kind(node.value, env, types)):
                env.setdefault(node.target.id, k)
        if len(env) == before:
            return env


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args]


def _callees(index: _Index, types: _Types, mod: str, cls: str | None, call: ast.Call, env: dict[str, str]) -> list:
    """``(function, bound_self_kind)`` the call may reach (bound_self_kind None: a plain call)."""
    f = call.func
    out = []
    if isinstance(f, ast.Name):
        hit = index.follow(mod, f.id)
        if hit is not None and hit in index.funcs:
            out.append((hit, None))
        elif hit is not None:  # a class: its constructor and what runs on construction
            out += [((hit[0], f"{hit[1]}.{m}"), "new") for m in ("__init__", "__post_init__", "validate")
                    if (hit[0], f"{hit[1]}.{m}") in index.funcs]
    elif isinstance(f, ast.Attribute):
        base = f.value
        kind = _kind(base, env, types)
        if isinstance(base, ast.Name) and base.id in ("self", "cls") and cls \
                and (mod, f"{cls}.{f.attr}") in index.funcs:
            out.append(((mod, f"{cls}.{f.attr}"), env.get(base.id, "new")))
        elif isinstance(base, ast.Name) and base.id in index.names.get(mod, {}) \
                and index.names[mod][base.id][1] == "":  # module.func
            hit = index.follow(index.names[mod][base.id][0], f.attr)
            if hit is not None and hit in index.funcs:
                out.append((hit, None))
        elif kind is not None and f.attr not in MAPPING_METHODS:
            owners = {WHOLE: {types.config}, HOLDER: types.holders, PART: types.classes - {types.config}}[kind]
            out += [(key, kind) for key in index.methods.get(f.attr, [])
                    if (key[0], key[1].split(".")[0]) in owners]
    return out


def _root_kind(fn: ast.FunctionDef, types: _Types) -> tuple[str, str]:
    """The first parameter of a root and what it holds (annotated with a holder class: a holder)."""
    p = (fn.args.posonlyargs + fn.args.args)[0]
    holders = {name for _, name in types.holders}
    return p.arg, HOLDER if _annotation_names(p.annotation) & holders else WHOLE


def reach(src: Path, roots=ROOTS) -> dict[tuple[str, str], dict[str, str]]:
    """Every function reached from the ``roots`` (module, function) -> its parameters that receive the config,
    a holder or a part, with that kind."""
    index = _Index(src)
    types = _Types(index)
    got: dict[tuple[str, str], dict[str, str]] = {}
    todo = []
    for root in roots:
        start = index.follow(*root)
        if start is not None and start in index.funcs:
            name, kind = _root_kind(index.funcs[start], types)
            got[start] = {name: kind}
            todo.append(start)
    while todo:
        key = todo.pop()
        fn = index.funcs[key]
        mod, qual = key
        cls = qual.split(".")[0] if "." in qual else None
        env = _derived(fn, got[key], types)
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            args = [a for a in call.args if not isinstance(a, ast.Starred)]
            passes = {i: k for i, a in enumerate(args) if (k := _kind(a, env, types))}
            kws = {kw.arg: k for kw in call.keywords if kw.arg and (k := _kind(kw.value, env, types))}
            on_kind = _kind(call.func.value, env, types) if isinstance(call.func, ast.Attribute) else None
            if not passes and not kws and not on_kind:
                continue
            for callee, bound in _callees(index, types, mod, cls, call, env):
                params = _params(index.funcs[callee])
                offset = 1 if bound is not None and params else 0
                new = {params[i + offset]: k for i, k in passes.items() if i + offset < len(params)}
                new.update({p: k for p, k in kws.items() if p in params})
                if bound in (WHOLE, HOLDER, PART) and params:
                    new[params[0]] = bound
                changed = callee not in got
                have = got.setdefault(callee, {})
                for p, k in new.items():  # a holder outranks the whole config, which outranks a part
                    if p not in have or _RANK.index(k) > _RANK.index(have[p]):
                        have[p] = k
                        changed = True
                if changed:
                    todo.append(callee)
    return got


def back_up(src: Path, got: dict[tuple[str, str], dict[str, str]]) -> set[tuple[str, str]]:
    """The stops of ``got`` back up the import order (module docstring)."""
    index = _Index(src)
    home = _Types(index).config[0]
    return {key for key, params in got.items() if set(params.values()) & {WHOLE, HOLDER}
            and key[0] != home and home not in index.imports_of(key[0])}


def measure(src: Path) -> dict[str, int]:
    """``{"stops", "files", "back_up"}`` of the package at ``src``."""
    got = reach(src)
    return {"stops": len(got), "files": len({m for m, _ in got}), "back_up": len(back_up(src, got))}


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "src" / "preschool"
    got = reach(src)
    up = back_up(src, got)
    by_file = defaultdict(list)
    for mod, qual in got:
        by_file[mod].append(qual + ("^" if (mod, qual) in up else ""))
    print(f"{len(got)} stops in {len(by_file)} files, {len(up)} back up the import order")
    for mod in sorted(by_file):
        print(f"  {mod}: {', '.join(sorted(by_file[mod]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
