"""How long the part-listing commands take to start (issue 32, item 2): wall time against ``python -c pass``.

Runs, each ``--repeats`` times in a fresh interpreter (the median is kept):

- ``python -c pass`` (the baseline: the interpreter alone),
- ``preschool --help`` (reads each command's help line, imports no command),
- ``preschool generate --list`` (every generator found and described),
- ``preschool eval --list`` (every evaluator found),

and prints each median in seconds, its ratio to the baseline, whether it is
under the issue's 1 s target, and whether torch was imported (finding parts must
not import it). It also counts the function-level imports left in the package
(``import`` statements inside a function, which eager discovery once needed to
stay cheap), the figure the issue tracks.

    PYTHONPATH=src python benchmarks/cli_startup.py              # 5 runs each
    PYTHONPATH=src python benchmarks/cli_startup.py --repeats 1
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_memory import cpu_model  # noqa: E402  (the machine line every benchmark prints)

SRC = Path(__file__).resolve().parents[1] / "src"
MAIN = "import sys; from preschool.cli import main; sys.exit(main())"
# after the command, say whether torch was imported (stderr, so --list output is untouched)
PROBE = "import atexit, sys; atexit.register(lambda: print('torch:', 'torch' in sys.modules, file=sys.stderr)); "
COMMANDS = {"python -c pass": None, "preschool --help": ["--help"], "preschool generate --list": ["generate", "--list"],
            "preschool eval --list": ["eval", "--list"]}


def run_once(args: list[str] | None) -> tuple[float, bool]:
    """Wall seconds of one fresh interpreter running ``preschool ARGS`` (None: ``pass``); whether torch loaded."""
    code = "pass" if args is None else PROBE + MAIN
    env = {**os.environ, "PYTHONPATH": str(SRC), "PRESCHOOL_PLUGINS": ""}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *(args or [])], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode not in (0, 2):  # --help exits 0; a bare parser error would be 2
        raise SystemExit(f"{args}: exit {out.returncode}\n{out.stderr}")
    return seconds, "torch: True" in out.stderr


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
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}, {args.repeats} run(s) each, median")
    base = None
    for name, argv in COMMANDS.items():
        runs = [run_once(argv) for _ in range(args.repeats)]
        median = statistics.median(s for s, _ in runs)
        base = base or median
        torch = "" if argv is None else f"  torch imported: {'yes' if any(t for _, t in runs) else 'no'}"
        target = "" if argv is None else f"  under 1 s: {'yes' if median < 1.0 else 'NO'}"
        print(f"{name:<28} {median:6.3f} s  {median / base:5.1f}x python -c pass{target}{torch}")
    print(f"function-level imports left in src/preschool: {function_level_imports(SRC / 'preschool')}")


if __name__ == "__main__":
    main()
