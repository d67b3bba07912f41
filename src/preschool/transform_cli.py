"""``preschool transform KIND ...``: turn a text corpus into training data.

Each kind is a sub-subcommand living beside its code; ``TRANSFORMS`` maps the
kind to a module exposing ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int`` (the same contract as top-level commands). Add a kind
(e.g. ``compartments``) by adding one line here.
"""

from __future__ import annotations

import argparse

HELP = "transform a corpus into training data (L2T, ...)"
DESCRIPTION = "Transform a text corpus into training shards. Kinds: l2t"

TRANSFORMS: dict[str, str] = {  # kind -> module
    "l2t": "preschool.l2t.cli",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .cli import add_commands

    add_commands(parser.add_subparsers(dest="transform_kind", metavar="KIND"), TRANSFORMS, "_transform_run")
    parser.set_defaults(_transform_parser=parser)


def run(args: argparse.Namespace) -> int:
    fn = getattr(args, "_transform_run", None)
    if fn is None:
        args._transform_parser.print_help()
        return 2
    return int(fn(args) or 0)
