"""How long the part-listing commands take to start (issue 32, item 2): wall time against ``python -c pass``.

Runs, each ``--repeats`` times in a fresh interpreter (the median is kept):

- ``python -c pass`` (the baseline: the interpreter alone),
- ``preschool --help`` (reads each command's help line, imports no command),
- ``preschool generate --list`` (every generator found and described),
- ``preschool eval --list`` (every evaluator found),

and prints each median wall time in seconds, its ratio to the baseline, whether
it is under the issue's 1 s target, the median CPU time (user + system) of the
process, and the installed libraries it imported (listing must not import torch
& co.; ``tests/test_cli.py`` checks that). On a shared machine the wall time
follows the load; the CPU time much less so: quote both.

The package's bytecode is compiled once, untimed, into a temporary cache first
(``PYTHONPYCACHEPREFIX``), so every timed run reads it as an installed package
does, whatever ``PYTHONDONTWRITEBYTECODE`` says; the source tree gets no
``__pycache__``. It also counts the function-level imports left in the package
(``import`` statements inside a function, which eager discovery once needed to
stay cheap), the figure the issue tracks.

    PYTHONPATH=src python benchmarks/cli_startup.py              # 5 runs each
    PYTHONPATH=src python benchmarks/cli_startup.py --repeats 1
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_memory import cpu_model  # noqa: E402  (the machine line every benchmark prints)

SRC = Path(__file__).resolve().parents[1] / "src"
# After the command, name the installed libraries it imported: top-level modules it loaded from
# site-packages (on stderr, after a marker, so the command's own output is untouched).
PROBE = """\
import atexit, sys, sysconfig
_before = set(sys.modules)  # what the interpreter loaded before the command (site's .pth hooks)
def _libs():
    roots = tuple({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    names = {n.split(".")[0] for n, m in list(sys.modules.items())
             if n not in _before and str(getattr(m, "__file__", None) or "").startswith(roots)}
    print("\\nlibraries:", " ".join(sorted(names)), file=sys.stderr)
atexit.register(_libs)
import sys
from preschool.cli import main
sys.exit(main())
"""
COMMANDS = {"python -c pass": None, "preschool --help": ["--help"], "preschool generate --list": ["generate", "--list"],
            "preschool eval --list": ["eval", "--list"]}


def child_env(pycache: str) -> dict[str, str]:
    """The environment of every run: this checkout's package, no plug-in from the environment, bytecode
    read from (and written once to) ``pycache``."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "PRESCHOOL_PLUGINS": "", "PYTHONPYCACHEPREFIX": pycache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(args: list[str] | None, env: dict[str, str]) -> tuple[float, float, list[str]]:
    """Wall seconds and CPU seconds (user + system) of one fresh interpreter running ``preschool ARGS``
    (None: ``pass``), and the installed libraries it imported."""
    code = "pass" if args is None else PROBE
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *(args or [])], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 2):  # --help exits 0; a bare parser error would be 2
        raise SystemExit(f"{args}: exit {out.returncode}\n{out.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = next((x for x in out.stderr.splitlines() if x.startswith("libraries:")), "libraries:")
    return seconds, cpu, line.split()[1:]


def function_level_imports(root: Path) -> int:
    """``import`` / ``from ... import`` statements inside a function (at any depth), over every module under
    ``root``; each counted once."""

    class Count(ast.NodeVisitor):
        def __init__(self) -> None:
            self.depth = self.n = 0

        def visit_FunctionDef(self, node: ast.AST) -> None:
            self.depth += 1
            self.generic_visit(node)
            self.depth -= 1

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Import(self, node: ast.AST) -> None:
            self.n += self.depth > 0

        visit_ImportFrom = visit_Import

    counter = Count()
    for path in root.rglob("*.py"):
        counter.visit(ast.parse(path.read_text(encoding="utf-8")))
    return counter.n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per command; the median is kept (default 5)")
    args = ap.parse_args()
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}, {args.repeats} run(s) each, median; "
          f"load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="cli_startup_pyc_") as pycache:
        env = child_env(pycache)
        for argv in COMMANDS.values():  # compile the bytecode once, untimed
            run_once(argv, env)
        base = None
        for name, argv in COMMANDS.items():
            runs = [run_once(argv, env) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            base = base or wall
            target = "" if argv is None else f"  under 1 s: {'yes' if wall < 1.0 else 'NO'}"
            libs = "" if argv is None else f"  libraries: {' '.join(sorted({n for r in runs for n in r[2]})) or '-'}"
            print(f"{name:<28} {wall:6.3f} s  {wall / base:5.1f}x python -c pass  cpu {cpu:5.3f} s{target}{libs}")
    print(f"function-level imports left in src/preschool: {function_level_imports(SRC / 'preschool')}")


if __name__ == "__main__":
    main()
