"""Shared prefixes trained once: which run of an experiment branches from which, and where.

Two runs train their first ``k`` stages identically (the same weights, optimizer state, data position,
RNG, checkpoints and logged rows at every step of them) when everything that decides those steps is
the same (:func:`prefix_key`):

- every TrainConfig setting but the display-only ones (``progress``, ``tensorboard``, ``wandb``): the
  model, the seed, the batch, the optimizer, the precision, the cadence of checkpoints, validation and
  logs, ``val``, ``keep_optimizer_state``, the run's ``init_from`` ...;
- the first ``k`` stages, field by field (data, tokens, schedule, group, carry-over rules, a stage's
  ``init_from``);
- what later stages tell those: for every group the first ``k`` stages touch, the budgets and data of
  all its stages (its schedule spans their summed steps) and, per stage, whether its group resumes
  later (its optimizer state is then paused into the checkpoint at the stage's end); with a log-spaced
  checkpoint or evaluation schedule, every stage's budget and data (the steps depend on the run's length);
- which datasets the run is given (name -> folder: the vocabulary is the largest of them), which it
  validates on when ``val`` is unset (every stage dataset with a ``val/`` split, later stages' included),
  and the callbacks (name -> config).

The runs of an experiment are taken in order (each rung, arms, seeds); a run branches from the earliest
earlier run with which it shares the most leading stages (at least one), at that run's step at the
end of them. Its run folder then gets the parent's checkpoints and metrics rows up to that step and
resumes there (:func:`preschool.train.branch.fork_run`); the parent keeps the training state of that
checkpoint. Nothing else about either run changes: the branch's checkpoints at and after the branch
point equal, byte for byte, those of the same run trained from its start
(tests/experiment/test_branches.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..config import to_dict

# TrainConfig fields that change nothing a run computes or writes into its folder's history
DISPLAY_ONLY = frozenset({"progress", "tensorboard", "wandb"})


@dataclass(frozen=True)
class Branch:
    """Where a run branches: from ``parent`` (a run key) after its first ``stages`` stages, at ``step``,
    which ``tokens`` tokens took (what the branch does not train again)."""

    parent: Any  # the parent's RunKey (rung, arm, seed)
    stages: int
    step: int
    tokens: int


def stage_steps(train, seq_len: int) -> list[int]:
    """Each stage's optimizer steps: ceil(tokens / (batch_size x seq_len)), as the trainer counts them."""
    return [math.ceil(s.tokens / (train.batch_size * seq_len)) for s in train.stages]


def prefix_key(rec, k: int, has_val: Callable[[Any, str], bool]) -> str:
    """What must be equal for two runs to train their first ``k`` stages identically (module docstring),
    as one string. ``rec``: a RunRecord; ``has_val(rec, dataset name)``: whether it has a ``val/`` split."""
    tree = to_dict(rec.train)
    stages = tree.pop("stages")
    common = {k2: v for k2, v in tree.items() if k2 not in DISPLAY_ONLY}
    train = rec.train
    groups = {s.group for s in train.stages[:k] if s.group is not None}
    group_stages = {g: [[s.tokens, to_dict(s.data)] for s in train.stages if s.group == g] for g in sorted(groups)}
    resumes = [s.group is not None and any(t.group == s.group for t in train.stages[i + 1:])
               for i, s in enumerate(train.stages[:k])]
    log_spaced = train.checkpoint_schedule == "log" or train.eval_schedule == "log"
    whole = [[s.tokens, to_dict(s.data)] for s in train.stages] if log_spaced else None
    val = list(train.val) if train.val is not None else \
        [n for n in dict.fromkeys(n for s in train.stages for n in s.datasets) if has_val(rec, n)]
    key = {"train": common, "stages": stages[:k], "groups": group_stages, "resumes": resumes, "length": whole,
           "datasets": {n: str(p) for n, p in sorted(rec.datasets.items())}, "val": val,
           "callbacks": to_dict(dict(rec.callbacks))}
    return json.dumps(key, sort_keys=True, default=str)


def plan_branches(records: Iterable, seq_len: int, has_val: Callable[[Any, str], bool],
                  blocked: Callable[[Any], bool] = lambda rec: False) -> dict[Any, Branch]:
    """``run key -> Branch`` for every run that branches from an earlier one (module docstring).

    ``blocked(rec)``: a run that must train from its own start (it starts from another run's weights
    through a callback, say); it may still be a parent."""
    records = list(records)
    out: dict[Any, Branch] = {}
    for j, rec in enumerate(records):
        if blocked(rec):
            continue
        best: tuple[int, Any] | None = None
        for earlier in records[:j]:
            n = min(len(earlier.train.stages), len(rec.train.stages))
            k = next((k for k in range(n, 0, -1)
                      if prefix_key(earlier, k, has_val) == prefix_key(rec, k, has_val)), 0)
            if k and (best is None or k > best[0]):
                best = (k, earlier)
        if best is None:
            continue
        k, parent = best
        # the parent's own branch point at or past this one: branch from its parent instead (one copy fewer)
        while parent.key in out and out[parent.key].stages >= k:
            parent = next(r for r in records if r.key == out[parent.key].parent)
        steps = stage_steps(rec.train, seq_len)[:k]
        tokens = sum(n * rec.train.batch_size * seq_len for n in steps)
        out[rec.key] = Branch(parent.key, k, sum(steps), tokens)
    return out


def branch_points(branches: Mapping[Any, Branch]) -> dict[Any, set[int]]:
    """parent key -> the steps whose checkpoints it must keep with their training state."""
    out: dict[Any, set[int]] = {}
    for b in branches.values():
        out.setdefault(b.parent, set()).add(b.step)
    return out
