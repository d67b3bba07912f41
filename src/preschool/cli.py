"""``preschool`` command line: one module per command, ``preschool/commands/<name>.py``.

A command module exposes ``HELP`` (one line, a string literal), ``ORDER`` (its place in ``--help``, an
integer literal), ``add_arguments(parser)`` and ``run(args) -> int``; its file's stem is the command's
name, so a new command is one new file and no edit. A module is imported only when its command is the
one on the command line: the commands are found by listing ``commands/`` and ``preschool --help`` reads
each ``HELP`` and ``ORDER`` from the module's source, importing none of them, so it stays fast and a broken
optional dependency in one command does not break the others. (``preschool transform``'s kinds are
found the same way in ``preschool/transforms/``.) A plug-in adds a command by registering
``COMMANDS.register("<name>")(Command("<its module>", order))`` in its ``commands`` module.

Every command takes ``--plugins A,B`` (modules, ``.py`` files, folders: parts from
outside the package, imported before the command runs; ``preschool.plugins``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import errno
import importlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PreschoolError, StdoutClosed, StdoutError
from .registry import Registry

@dataclass(frozen=True)
class Command:
    """A command (or a ``transform`` kind) as its registry holds it: the module that implements it
    (``HELP``, ``add_arguments``, ``run``; imported only when it is the command run) and its place in
    ``--help`` (``order``, then the name)."""

    module: str
    order: int = 100


def _literal(path: Path, name: str) -> Any:
    """The value of the module-level ``name = <literal>`` in the source at ``path`` (None when there is none)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]
                and isinstance(node.value, ast.Constant)):
            return node.value.value
    return None


def _source(modname: str) -> Path | None:
    """The source file of module ``modname`` of this package, without importing it."""
    parts = modname.split(".")
    path = Path(__file__).resolve().parent.joinpath(*parts[1:]).with_suffix(".py")
    return path if parts[0] == __package__ and path.is_file() else None


class ModuleRegistry(Registry):
    """A registry of command modules (``preschool``'s commands, ``transform``'s kinds): every module of its
    package, a folder of preschool, is registered under its file's stem with the ``ORDER`` its source
    states, listed without importing it (a plug-in's ``plugin_module`` registers its own
    :class:`Command`)."""

    def __init__(self, kind: str, package: str, plugin_module: str):
        super().__init__(kind, plugin_module=plugin_module)
        self.package = package

    def discover(self) -> None:
        folder = Path(__file__).resolve().parent.joinpath(*self.package.split(".")[1:])
        for path in sorted(folder.glob("*.py")):
            if not path.stem.startswith("_") and not self.find(path.stem):
                order = _literal(path, "ORDER")
                command = Command(f"{self.package}.{path.stem}", 100 if order is None else int(order))
                self.register(path.stem)(command)
        super().discover()


def help_line(modname: str) -> str:
    """The module's ``HELP`` read from its source without importing it (imported when not a literal there)."""
    path = _source(modname)
    help_text = _literal(path, "HELP") if path is not None else None
    return help_text if isinstance(help_text, str) else importlib.import_module(modname).HELP


# one module per command in preschool/commands/ (file stem = command name), or a plug-in's `commands` module
COMMANDS = ModuleRegistry("command", "preschool.commands", plugin_module="commands")


def add_commands(sub, commands: Registry, run_attr: str, only: str | None = None,
                 plugins_option: bool = False) -> None:
    """One sub-parser per :class:`Command` of the registry ``commands`` (its module's ``HELP``,
    ``DESCRIPTION``, ``add_arguments``); the parsed namespace gets the module's ``run`` as ``run_attr``. Used
    for commands and ``transform`` kinds. With ``only``, the other names get their help line alone and their
    modules are not imported. With ``plugins_option``, each also takes ``--plugins``."""
    for entry in sorted(commands, key=lambda e: (e.cls.order, e.name)):
        name, modname = entry.name, entry.cls.module
        if only is not None and name != only:
            sub.add_parser(name, help=help_line(modname))
            continue
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        if plugins_option:
            p.add_argument("--plugins", metavar="A,B", default=None,
                           help="plug-ins with parts from outside preschool, imported first: modules, .py files, "
                           "folders, comma-separated (also PRESCHOOL_PLUGINS; an experiment's `plugins:`)")
        p.set_defaults(**{run_attr: mod.run})


def command_of(argv: list[str]) -> str:
    """The command ``argv`` names: its first argument that is not an option ("" when none; the top-level
    options take no value)."""
    return next((a for a in argv if not a.startswith("-")), "")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The full parser; given ``argv``, only the command it names is imported and built in full."""
    parser = argparse.ArgumentParser(
        prog="preschool",
        description="Pre-pretraining, language-learning tasks and compartmentalization experiments "
        "for small language models, with evaluation and statistics. "
        "Start with: preschool run examples/quickstart.yaml",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"preschool {__version__}")
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND"), COMMANDS, "_run",
                 None if argv is None else command_of(argv), plugins_option=True)
    return parser


class _Stdout(io.RawIOBase):
    """File descriptor 1 for :func:`_checked_stdout`: a failed write says it was standard output's."""

    def __init__(self, fd: int):
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b) -> int:
        try:
            return os.write(self._fd, b)
        except OSError as e:
            # what cannot be written is dropped: later writes (and the exit's flush) go nowhere, quietly
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), self._fd)
            if e.errno == errno.EPIPE:
                raise StdoutClosed("standard output was closed by its reader") from None
            raise StdoutError(f"cannot write standard output ({os.strerror(e.errno)})") from None


@contextlib.contextmanager
def _checked_stdout():
    """Within: ``sys.stdout`` writes the process's standard output so that a reader that stopped reading
    (``| head -1``) or a full disk raises :class:`StdoutClosed` / :class:`StdoutError` instead of an
    OSError from whichever ``print`` met it, and text its encoding cannot hold (an arm named ``café``
    under ``PYTHONIOENCODING=ascii``) is written escaped (``caf\\xe9``), as Python writes stderr. What is
    still buffered is written before the block ends, so its failure is raised here, not as "Exception
    ignored" at exit. A ``sys.stdout`` that is not the process's (a test capturing it) is left alone. Under
    ``torchrun`` only rank 0 writes it: every rank runs the same command, and the others' copies of its lines
    (interleaved mid-line in a pipe) told the user nothing new; errors still go to each rank's stderr."""
    old = sys.stdout
    if os.environ.get("RANK", "0") not in ("", "0"):  # torchrun: rank 0 speaks for every rank, once
        sys.stdout = open(os.devnull, "w", encoding="utf-8")
        try:
            yield
        finally:
            sys.stdout.close()
            sys.stdout = old
        return
    try:
        fd = old.fileno() if old is not None and old is sys.__stdout__ else None
    except (OSError, ValueError, io.UnsupportedOperation):
        fd = None
    if fd is None:
        yield
        return
    old.flush()
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(_Stdout(fd)), encoding=old.encoding,
                                  errors="backslashreplace", line_buffering=old.line_buffering)
    try:
        yield
        sys.stdout.flush()
    finally:
        sys.stdout = old


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # building the parser finds the commands, which loads PRESCHOOL_PLUGINS and installed plug-ins
        parser = build_parser(argv)
    except PreschoolError as e:
        name = command_of(argv)
        print(f"preschool{' ' + name if name else ''}: error: {e}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        with _checked_stdout():
            if getattr(args, "plugins", None):
                from .plugins import split_names, use

                use(split_names(args.plugins), named_by="--plugins")
            return int(args._run(args) or 0)
    except StdoutClosed:
        return 128 + 13  # as a command killed by SIGPIPE ends (`cat file | head -1`): no word, nothing lost
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
    except SystemExit as e:
        # no command ends itself this way (each returns its status): a part (a plug-in's generator, evaluator,
        # callback) did, and its bare exit status would be all the user saw
        from .plugins import raised_at

        print(f"preschool {args.command}: error: a part called sys.exit({e.code!r}) while the command ran"
              f"{raised_at(e)}; what it was writing was not finished (a part raises an error, it does not end "
              "the process)", file=sys.stderr)
        return 2


if __name__ == "__main__":  # python -m preschool.cli: the commands register with the module preschool.cli
    from preschool.cli import main as _main

    sys.exit(_main())
