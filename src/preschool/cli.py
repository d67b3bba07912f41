"""``preschool`` command line. Each subcommand lives beside the code it drives.

A subcommand module exposes ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. Modules are imported only when their command runs, so
``preschool --help`` stays fast and a broken optional dependency in one
command does not break the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import PreschoolError

COMMANDS: dict[str, str] = {
    "run": "preschool.experiment_cli",
    "prepare": "preschool.data.cli",
    "export": "preschool.data.export_cli",
    "generate": "preschool.synthetic.cli",
    "transform": "preschool.transform_cli",
    "train": "preschool.train.cli",
    "eval": "preschool.evals.cli",
    "report": "preschool.report_cli",
    "compartments": "preschool.compartments.cli",
    "corpus": "preschool.corpora.cli",
    "plan": "preschool.plan",
    "launch": "preschool.launch",
}


def add_commands(sub, commands: dict[str, str], run_attr: str) -> None:
    """One sub-parser per ``name -> module`` (the module's ``HELP``, ``DESCRIPTION``, ``add_arguments``);
    the parsed namespace gets the module's ``run`` as ``run_attr``. Used for commands and ``transform`` kinds."""
    for name, modname in commands.items():
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(**{run_attr: mod.run})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="preschool",
        description="Pre-pretraining, language-learning tasks and compartmentalization experiments "
        "for small language models, with evaluation and statistics. "
        "Start with: preschool run examples/quickstart.yaml",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"preschool {__version__}")
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND"), COMMANDS, "_run")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except PreschoolError as e:
        print(f"preschool {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        # A full disk or a read-only --out met by a write that no atomic helper wraps (a lock file, a
        # folder made up front, a library's own writer): one line naming the path, as for any other.
        from .io import os_error_line

        line = os_error_line(e)
        if line is None:
            raise
        print(f"preschool {args.command}: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\npreschool {args.command}: interrupted; rerun the same command to resume.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
