"""``preschool transform KIND ...``: turn a text corpus into training data.

Each kind is a sub-subcommand: a module of ``preschool/transforms/`` named after the kind, with the same
contract as a command module (``HELP``, ``ORDER``, ``add_arguments(parser)``, ``run(args) -> int``; see
``preschool/cli.py``), found in ``TRANSFORMS`` without importing it. Add a kind with one new file there, or
in a plug-in's ``transforms`` module (``TRANSFORMS.register("<kind>")(Command("<its module>"))``); nothing
here changes.
"""

from __future__ import annotations

import argparse

from ..cli import ModuleRegistry, add_commands

HELP = "transform a corpus into training data (L2T, ...)"
ORDER = 40  # its place in `preschool --help`
DESCRIPTION = ("Transform a text corpus into training shards; the kinds are listed below "
               "(one file each in preschool/transforms/).")

TRANSFORMS = ModuleRegistry("transform kind", "preschool.transforms", plugin_module="transforms")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_commands(parser.add_subparsers(dest="transform_kind", metavar="KIND"), TRANSFORMS, "_transform_run")
    parser.set_defaults(_transform_parser=parser)


def run(args: argparse.Namespace) -> int:
    fn = getattr(args, "_transform_run", None)
    if fn is None:
        args._transform_parser.print_help()
        return 2
    return int(fn(args) or 0)
