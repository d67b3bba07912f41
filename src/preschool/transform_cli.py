"""``preschool transform KIND ...``: turn a text corpus into training data.

Each kind is a sub-subcommand living beside its code; ``TRANSFORMS`` maps the
kind to a module exposing ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int`` (the same contract as top-level commands). Add a kind
(e.g. ``compartments``) by adding one line here.
"""

from __future__ import annotations

import argparse
import importlib

HELP = "transform a corpus into training data (L2T, ...)"
DESCRIPTION = "Transform a text corpus into training shards. Kinds: " + ", ".join(["l2t"])

TRANSFORMS: dict[str, str] = {
    "l2t": "preschool.l2t.cli",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="transform_kind", metavar="KIND")
    for name, modname in TRANSFORMS.items():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name == modname:
                continue
            raise
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_transform_run=mod.run)
    parser.set_defaults(_transform_parser=parser)


def run(args: argparse.Namespace) -> int:
    fn = getattr(args, "_transform_run", None)
    if fn is None:
        args._transform_parser.print_help()
        return 2
    return int(fn(args) or 0)
