"""``preschool transform KIND ...``: turn a text corpus into training data.

Each kind is a sub-subcommand living beside its code: a module exposing ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int`` (the same contract as top-level
commands), registered in ``TRANSFORMS`` by a file of ``preschool/transforms/`` named
after the kind (``TRANSFORMS.register("l2t")(Command("preschool.l2t.cli"))``). Add a
kind (e.g. ``compartments``) with one new file there, or in a plug-in's
``transforms`` module; nothing here changes.
"""

from __future__ import annotations

import argparse

from .registry import Registry

HELP = "transform a corpus into training data (L2T, ...)"
DESCRIPTION = ("Transform a text corpus into training shards; the kinds are listed below "
               "(one file each in preschool/transforms/).")

TRANSFORMS = Registry("transform kind", packages=("preschool.transforms",), plugin_module="transforms")


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
