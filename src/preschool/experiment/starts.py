"""Where a run of an experiment starts when it starts from another run of the same experiment.

``init_from: {arm: NAME, ...}`` (on an arm's ``train:``, the shared ``train:`` or a stage) names a run of
the same experiment, rung and seed: at the end of one of its stages (``stage: S``), at a step (``step: N``,
one it checkpoints), at its first checkpoint with at least ``pt_tokens: T`` language tokens, or at its end
(none of the three). The record of such a run names that run among its ``parents`` (trained first) and
its TrainConfig's ``init_from.path`` is the parent's checkpoint folder, known when the experiment is
loaded for ``stage``, ``step`` and the end (the steps are arithmetic on the budgets) and once the parent
has trained for ``pt_tokens`` (:func:`trainable_config` reads the parent's checkpoints then).

What is checked when the experiment is loaded, before any work (:func:`resolve_starts`): the arm exists and
is another one, the stage is one of its stages, the step one it checkpoints, and no run starts, through
others, from itself. The trainer checks the rest (train/init_from.py) before the run's first step.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import layout
from ..errors import ConfigError, DataError
from ..io import read_json
from ..layout import CKPT_META
from ..train.schedules import log_spaced_steps
from .branches import stage_steps


def starts_of(train) -> list[tuple[str, Any]]:
    """``(field, InitFrom)`` of a TrainConfig's starts: the run's (``init_from``) and its stages'."""
    out = [("init_from", train.init_from)] + [(f"stages[{i}].init_from", s.init_from)
                                             for i, s in enumerate(train.stages)]
    return [(w, init) for w, init in out if init is not None]


def checkpoint_steps(train, seq_len: int) -> set[int]:
    """The steps a run of ``train`` checkpoints: its schedule's (every ``checkpoint_every`` steps, or
    log-spaced) and every stage's end, as the checkpoint callback decides."""
    steps = stage_steps(train, seq_len)
    total = sum(steps)
    ends = {sum(steps[:i + 1]) for i in range(len(steps))}
    if train.checkpoint_schedule == "log":
        return log_spaced_steps(total, train.checkpoints_per_decade) | ends
    return set(range(train.checkpoint_every, total + 1, train.checkpoint_every)) | ends


def start_step(init, parent_train, seq_len: int, field: str) -> int | None:
    """The parent's step an ``init_from: {arm, ...}`` names (None for ``pt_tokens``: known once it trained);
    ConfigError naming ``field`` for a stage it does not have or a step it does not checkpoint."""
    steps = stage_steps(parent_train, seq_len)
    if init.pt_tokens is not None:
        return None
    if init.stage is not None:
        names = [s.name for s in parent_train.stages]
        if init.stage not in names:
            raise ConfigError(f"{field}.stage", f"arm {init.arm} has no stage {init.stage!r} (its stages: {names})")
        return sum(steps[:names.index(init.stage) + 1])
    if init.step is not None:
        ok = checkpoint_steps(parent_train, seq_len)
        if init.step not in ok:
            near = sorted(ok, key=lambda s: abs(s - init.step))[:3]
            raise ConfigError(f"{field}.step", f"arm {init.arm} writes no checkpoint at step {init.step} (nearest: "
                              f"{sorted(near)}; its checkpoint_every is {parent_train.checkpoint_every}, and every "
                              "stage end has one)")
        return init.step
    return sum(steps)


def resolve_starts(records: list, seq_len: int, written_at) -> list:
    """The records with every arm-named start resolved (module docstring): ``parents`` set, ``init_from.path``
    the parent's checkpoint where it is known; ``written_at(rec, field)``: the YAML key an error names."""
    by_key = {r.key: r for r in records}
    out = []
    for rec in records:
        parents = list(rec.parents)
        fixes: dict[str, Any] = {}
        for where, init in starts_of(rec.train):
            if init.arm is None:
                if init.path is not None and not Path(init.path).is_absolute():  # the working folder's, as every path
                    fixes[where] = replace(init, path=str(Path(init.path).resolve()))
                continue
            field = written_at(rec, where)
            if init.path is not None:
                raise ConfigError(f"{field}.path", "give arm: or path:, not both")
            key = type(rec.key)(rec.rung, init.arm, rec.seed)
            if key not in by_key:
                raise ConfigError(f"{field}.arm", f"no arm named {init.arm!r} in this experiment")
            if init.arm == rec.arm:
                raise ConfigError(f"{field}.arm", f"arm {rec.arm} cannot start from itself")
            parent = by_key[key]
            step = start_step(init, parent.train, seq_len, field)
            if step is not None:
                fixes[where] = replace(init, path=str(layout.checkpoint_dir(parent.run_dir, step)))
            parents.append(key)
        out.append(replace(rec, train=_with_starts(rec.train, fixes), parents=tuple(dict.fromkeys(parents)))
                   if fixes or parents != list(rec.parents) else rec)
    _refuse_cycles(out, written_at)
    return out


def _with_starts(train, fixes: Mapping[str, Any]):
    if not fixes:
        return train
    stages = [replace(s, init_from=fixes.get(f"stages[{i}].init_from", s.init_from)) for i, s in enumerate(train.stages)]
    return replace(train, init_from=fixes.get("init_from", train.init_from), stages=stages)


def _refuse_cycles(records: list, written_at) -> None:
    parents = {r.key: r.parents for r in records}
    for rec in records:
        seen, todo = set(), list(rec.parents)
        while todo:
            k = todo.pop()
            if k == rec.key:
                raise ConfigError(written_at(rec, "init_from"), f"arm {rec.arm} starts, through the arms it starts "
                                  "from, from itself")
            if k not in seen:
                seen.add(k)
                todo.extend(parents.get(k, ()))


def training_order(records: Iterable) -> list:
    """``records`` with every run after the runs it starts from (``parents``, a branch's parent); otherwise
    in their own order."""
    records = list(records)
    keys = {r.key for r in records}
    done: set = set()
    out = []
    pending = list(records)
    while pending:
        for rec in pending:
            if all(p in done or p not in keys for p in rec.parents):
                out.append(rec)
                done.add(rec.key)
                pending.remove(rec)
                break
        else:  # cannot happen after _refuse_cycles; keep the rest in order rather than loop
            out.extend(pending)
            break
    return out


def trainable_config(rec, by_key: Mapping, must: bool):
    """``rec.train`` with the ``pt_tokens`` starts resolved from the parent's checkpoints (the first with at
    least that many PT tokens, by its ``meta.json``). Not ``must``: a start the parent has not reached yet
    stays unresolved; ``must``: DataError naming the parent's run folder."""
    fixes = {}
    for where, init in starts_of(rec.train):
        if init.arm is None or init.path is not None:
            continue
        parent = by_key[type(rec.key)(rec.rung, init.arm, rec.seed)]
        hit = None
        for _, ckpt in layout.list_checkpoints(parent.run_dir, required=False):
            meta = read_json(ckpt / CKPT_META) if (ckpt / CKPT_META).is_file() else {}
            if meta.get("pt_tokens", -1) >= init.pt_tokens:
                hit = ckpt
                break
        if hit is None:
            if must:
                raise DataError(f"{parent.run_dir}: no checkpoint with {init.pt_tokens:,} PT tokens yet, which "
                                f"arm {rec.arm} seed {rec.seed} starts from ({where}); train arm {init.arm} first")
            continue
        fixes[where] = replace(init, path=str(hit))
    return _with_starts(rec.train, fixes)
