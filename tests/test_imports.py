"""Dependencies point down: no import cycles among preschool modules, and the layers named in
CONTRIBUTING.md import only what is below them. Every import counts: imports inside functions
(cycles waiting for the first module-level use) and ``if TYPE_CHECKING:`` imports (a type hint
that names a module above is the same upward dependency, only unchecked)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "preschool"


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg[: len(pkg) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                elif (node.module or "").split(".")[0] == "preschool":
                    base = node.module.split(".")
                else:
                    continue
                t = ".".join(base)
                targets = [f"{t}.{a.name}" if f"{t}.{a.name}" in mods else t for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "preschool"]
            edges[mod].update(t for t in targets if t in mods and t != mod)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_walker_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(import_graph()) == []


def test_layers_import_only_downwards():
    edges = import_graph()

    def reaches(src_prefix: str, bad_prefixes: tuple[str, ...]) -> list[tuple[str, str]]:
        return [(m, t) for m, ts in edges.items() if m.startswith(src_prefix) for t in ts
                if t.startswith(bad_prefixes)]

    # analysis reads result files: never the runner, the trainer or the plug-ins that produce them
    assert reaches("preschool.analysis", ("preschool.experiment", "preschool.train", "preschool.compartments")) == []
    # evaluators load checkpoints through plug-in hooks, not by importing compartments; the report reads the
    # evaluators' results (analysis -> evals), so the numerics both use live below both (preschool/numerics.py)
    assert reaches("preschool.evals", ("preschool.compartments", "preschool.experiment", "preschool.analysis")) == []
    # callbacks use the trainer's public API only (no import of trainer.py at all)
    assert reaches("preschool.train.callbacks", ("preschool.train.trainer",)) == []
    # callbacks and checkpoint.py see the trainer through train/protocol.py, and the configs import no callback
    assert reaches("preschool.train.checkpoint", ("preschool.train.trainer",)) == []
    assert reaches("preschool.train.configs", ("preschool.train.callbacks",)) == []
    # synthetic/ and l2t/ build on data/, never the reverse: their dataset builders live in their own packages
    # (synthetic/builder.py, l2t/builder.py), where DATASET_BUILDERS finds them
    assert reaches("preschool.data", ("preschool.synthetic", "preschool.l2t")) == []


def test_type_checking_imports_count():
    # callbacks/base.py names TrainerView only under `if TYPE_CHECKING:`; the walker must still see it
    assert "preschool.train.protocol" in import_graph()["preschool.train.callbacks.base"]


PIPELINE = ("data", "synthetic", "l2t", "analysis", "evals", "launch", "experiment")


def package_graph(edges: dict[str, set[str]], packages=PIPELINE) -> dict[str, set[str]]:
    """The module graph folded onto the named top-level packages (``preschool.<name>`` and below)."""
    def top(m: str) -> str:
        return m.split(".")[1] if m.count(".") else m

    out: dict[str, set[str]] = {p: set() for p in packages}
    for m, ts in edges.items():
        for t in ts:
            a, b = top(m), top(t)
            if a != b and a in out and b in out:
                out[a].add(b)
    return out


def test_package_walker_folds_modules():
    g = package_graph({"preschool.data.a": {"preschool.l2t.b"}, "preschool.l2t.b": {"preschool.data.c"},
                       "preschool.data.c": set()}, ("data", "l2t"))
    assert _cycles(g) == [["data", "l2t"]]


def test_no_package_cycles_between_the_pipeline_packages():
    # issue #24 item 5: e.g. data's builders of synthetic/l2t data live in those packages, the prepare command
    # (which launches) is commands/prepare.py, and the numerics evals and analysis share are preschool/numerics.py
    assert _cycles(package_graph(import_graph())) == []
