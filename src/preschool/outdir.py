"""The ``--out`` of a command that writes one folder whole: ``export``, ``transform l2t``, ``generate``.

Such a command builds its output in a temp folder and renames it onto ``--out``
(``io.atomic_dir``), so whatever ``--out`` held before is gone afterwards.
:func:`claim_output` decides, before any slow work, whether that is allowed:

- ``--out`` may not be an input, lie inside one or hold one (``export RUN/data/pt
  --out RUN/data`` would delete the run's data);
- it must be missing, an empty folder, or an earlier output of the same command:
  recognised by that command's manifest (``export.json``, the L2T ``manifest.json``,
  a generated shard set's ``manifest.json``) and holding nothing else (a
  ``notes.txt`` put beside an export makes the folder no longer only ours);
- it is locked while the command works (``lock.output_lock`` with ``beside``: the
  lock file is ``<parent>/.<name>.preschool.lock``, since the folder itself is
  replaced): a second writer stops, naming the first (pid, host, start, command);
- it is resolved once, first (:func:`resolve_out`), and every check, the lock and the
  write use that one absolute path: a symbolic link is followed (the output is written
  at the link's target, the link keeps pointing there), a link to nothing is refused,
  and so is the folder the command runs in or one above it (``--out .``, ``../here``
  from inside ``here``), which writing whole would pull from under the user's shell.

Each refusal is a :class:`~preschool.errors.ConfigError` on ``--out``: one line naming the
folder and what is in the way, raised before anything is written.

Example (what ``export_dataset`` does)::

    with claim_output(out, "preschool export ...", export_entries, inputs=[dataset_dir]) as out:
        with atomic_dir(out) as tmp:
            ...
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .errors import ConfigError
from .lock import LOCK_NAME, output_lock

#: ``ours(folder)``: the entry names an earlier output of the command holds, read from its manifest, or
#: None when ``folder`` is not such an output
Recogniser = Callable[[Path], "set[str] | None"]


def check_no_overlap(out: str | Path, inputs: Iterable[str | Path | None], field: str = "--out") -> None:
    """Refuse an output that is one of ``inputs``, lies inside one or holds one (missing inputs are skipped)."""
    o = Path(out).resolve()
    for raw in inputs:
        if raw is None or not Path(raw).exists():
            continue
        i = Path(raw).resolve()
        if o == i or o.is_relative_to(i):
            raise ConfigError(field, f"{out} is inside the input {raw}; writing it would replace that input's "
                              "files: give an --out outside it")
        if i.is_relative_to(o):
            raise ConfigError(field, f"{out} holds the input {raw}; writing it would delete that input: give an "
                              "--out outside it")


def check_replaceable(out: str | Path, ours: Recogniser, what: str, field: str = "--out") -> None:
    """Refuse ``out`` unless it is missing, an empty folder, or ``what``'s earlier output and nothing else."""
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise ConfigError(field, f"{out} exists and is not a folder: give a new or empty folder")
    entries = sorted(e.name for e in out.iterdir() if e.name != LOCK_NAME)
    if not entries:
        return
    known = ours(out)
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    if known is None:
        raise ConfigError(field, f"{out} is not empty and not an earlier {what} output (it holds {shown}); "
                          f"{what} replaces its --out whole: give a new or empty folder")
    extra = [e for e in entries if e not in known]
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        raise ConfigError(field, f"{out} is an earlier {what} output but also holds {shown}, which replacing it "
                          "would delete: move that out or give another --out")


def resolve_out(out: str | Path, field: str = "--out") -> Path:
    """The absolute path ``out`` names, links and ``..`` resolved: what the command then checks, locks and
    writes. ConfigError on ``field`` for a link to nothing, and for the folder the command runs in or one
    above it (replacing it whole would leave the shell in a deleted folder, or delete what holds it)."""
    given = Path(out)
    if given.is_symlink() and not given.exists():
        raise ConfigError(field, f"{out} is a link to {os.readlink(given)}, which does not exist: make that folder "
                          "or give another --out")
    target = given.resolve()
    try:
        here = Path.cwd().resolve()
    except OSError:  # the folder this runs in is gone: nothing to protect
        return target
    if here == target or here.is_relative_to(target):
        where = "the folder this command runs in" if here == target else "a folder above the one this command runs in"
        raise ConfigError(field, f"{out} is {where} ({target}); the output replaces its --out whole: give a new "
                          "folder beside it")
    return target


@contextlib.contextmanager
def claim_output(out: str | Path, command: str, ours: Recogniser, what: str,
                 inputs: Iterable[str | Path | None] = (), field: str = "--out") -> Iterator[Path]:
    """Hold ``out`` for the ``with`` block once it may be written whole (see the module docstring); yields the
    resolved path (:func:`resolve_out`), the one the block must write.

    ``command`` is what a second writer is told is running; ``what`` names the command in refusals
    (``"export"``); ``ours`` recognises its earlier outputs; ``inputs`` are the paths it reads.
    """
    out = resolve_out(out, field)
    check_no_overlap(out, list(inputs), field)
    check_replaceable(out, ours, what, field)  # before the lock: a refusal leaves no lock file behind
    with output_lock(out, command, beside=True):
        check_replaceable(out, ours, what, field)  # again under the lock: a writer may have finished meanwhile
        yield out


def read_manifest(path: Path) -> dict | None:
    """The JSON object at ``path``, or None when it is missing or not a JSON object (then not ours)."""
    import json

    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None
