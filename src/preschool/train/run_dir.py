"""A run folder's fingerprint: what ``config.yaml`` records and whether a folder may be resumed.

:func:`run_config_tree` is what the trainer writes to ``<run>/config.yaml`` (the
resolved config, the dataset paths and the content hashes of the datasets the
stages train on); :func:`check_run_dir` compares a config and its data with a
folder's record before anything trains there (the runner calls it for finished
runs too, so a changed config is never silently reported as done).
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Mapping

from .. import config as C
from ..data.prepare import first_difference as _diff  # "path (was a, now b)" of two plain-data trees
from ..data.shards import content_sha256
from ..errors import ConfigError, DataError
from ..layout import run_config_path
from .configs import TrainConfig, resolve_reserved_ids

_RESUME_FREE = {"progress", "tensorboard", "wandb", "cpu_heap", "activation_checkpointing", "eval_every",
                "eval_schedule", "evals_per_decade", "val", "val_rows", "log_every", "checkpoint_every",
                "checkpoint_schedule", "checkpoints_per_decade", "keep_optimizer_state", "verify",
                "nonfinite", "nonfinite_limit"}


def _trained_on(cfg: TrainConfig) -> list[str]:
    """The datasets whose rows the stages train on (they determine the weights), sorted."""
    return sorted({n for st in cfg.stages for n in st.datasets})


def _with_defaults(tree: Any, cls: type) -> Any:
    """A stored config tree of dataclass ``cls`` in the current spelling (each class's ``upgrade_raw``,
    config.py's hook: a folder written before a key moved is the same run; no warning, the user did not
    write that file) with every field it lacks at its current default, nested configs and lists of them
    included: a field added after the run was written, at its default, is the behaviour the run had (a
    field without a default is left missing, so it differs)."""
    if not isinstance(tree, dict):
        return tree
    upgrade = getattr(cls, "upgrade_raw", None)
    out = upgrade(tree, "")[0] if upgrade is not None else dict(tree)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        inner = C.dataclass_of(hints[f.name])
        item = typing.get_args(hints[f.name])[0] if typing.get_origin(hints[f.name]) is list else None
        if f.name not in out:
            if f.default is not dataclasses.MISSING:
                out[f.name] = C.to_dict(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = C.to_dict(f.default_factory())
        elif inner is not None:
            out[f.name] = _with_defaults(out[f.name], inner)
        elif item is not None and dataclasses.is_dataclass(item) and isinstance(out[f.name], list):
            out[f.name] = [_with_defaults(x, item) for x in out[f.name]]
    return out


def run_config_tree(cfg: TrainConfig, datasets: Mapping[str, str | Path], tokenizer_dir: str | Path | None,
                    given: Mapping[str, str] | None = None, callbacks: Mapping[str, dict] | None = None) -> dict:
    """What a run directory's ``config.yaml`` records: the config, dataset paths, and the content
    hashes of the datasets the stages train on. ``given``: data that is no dataset folder (a plan's own,
    see trainer.py), name -> the fingerprint its plan computed; recorded as a dataset of that name.
    ``callbacks``: the registered callbacks the run trains with, name -> config as the YAML gives it (an
    experiment arm's ``callbacks``, which say where a compartments arm starts: ``init_from``); None, for a
    caller that does not describe its callbacks, records none."""
    given = dict(given or {})
    tree = {"train": C.to_dict(cfg),
            "datasets": {**{k: str(v) for k, v in datasets.items()}, **{k: "(given by the plan)" for k in given}},
            "data_sha256": {**{k: content_sha256(datasets[k], cfg.verify) for k in _trained_on(cfg)
                               if k in datasets and k not in given}, **given},
            "tokenizer": str(tokenizer_dir) if tokenizer_dir else None}
    starts = start_sha256(cfg)
    if starts:  # only runs that start from weights: the config.yaml of every other run is as before
        tree["start_sha256"] = starts
    if callbacks is not None:
        tree["callbacks"] = {name: C.to_dict(params or {}) for name, params in callbacks.items()}
    return tree


def start_sha256(cfg: TrainConfig) -> dict[str, str | None]:
    """``where -> sha256`` of the weights each ``init_from`` folder holds (init_from.weights_sha256); None for a
    folder that is gone (a finished run keeps its record; a resume that needs it stops at its check)."""
    from .init_from import weights_sha256

    out: dict[str, str | None] = {}
    for where, init in [("init_from", cfg.init_from)] + [(f"stages[{i}].init_from", s.init_from)
                                                         for i, s in enumerate(cfg.stages)]:
        if init is not None and init.path is not None:
            folder = Path(init.path)
            files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
            out[where] = weights_sha256(folder, files) if files else None
    return out


def _callback_tree(specs: Any) -> Any:
    """Callback specs (name -> params) with every config at its defaults filled in, so a recorded spec and
    today's compare as the configs they build; one that no longer builds is compared as written."""
    from .callbacks.registry import CALLBACKS

    if not isinstance(specs, dict):
        return specs
    out = {}
    for name, params in specs.items():
        try:
            out[name] = C.to_dict(CALLBACKS.build_config(name, params or {}))
        except (ConfigError, TypeError):
            out[name] = params
    return out


def check_run_dir(cfg: TrainConfig, out_dir: str | Path, datasets: Mapping[str, str | Path],
                  tokenizer_dir: str | Path | None = None, given: Mapping[str, str] | None = None,
                  callbacks: Mapping[str, dict] | None = None) -> None:
    """Raise ConfigError if ``out_dir`` holds a run (finished or not) made with another config or data.

    Fields that do not change the trained weights (``_RESUME_FREE``) may differ, and
    datasets the stages do not train on may be added, removed or rebuilt (an
    experiment gains an arm with new data without invalidating the others). The
    trained-on datasets' bytes are compared by ``content_sha256``; runs written
    before that fingerprint existed are checked on config and dataset names only. ``given``: as for
    :func:`run_config_tree` (the fingerprints of a plan's own data, compared like a dataset's).
    ``callbacks`` (name -> params) are compared with those the run recorded, configs at their defaults: a
    changed, added or removed callback changes the run as a TrainConfig field does (runs recorded before
    callbacks were, and a caller giving None, are not compared on them).
    """
    path = run_config_path(out_dir)
    if not path.is_file():
        return
    cfg = resolve_reserved_ids(cfg, datasets)
    try:  # the run's own record: damaged, it names itself (file:line), not a key of the config being run
        old = C.load_yaml(path)
        if not isinstance(old.get("train") or {}, dict):
            raise ConfigError(f"{path}: train", "is not a mapping of TrainConfig fields")
    except ConfigError as e:
        raise DataError(f"{e}; it records the run in {out_dir}, which cannot be compared with the config without "
                        "it: restore it, or delete that run folder to train it again") from None
    now = run_config_tree(cfg, datasets, tokenizer_dir, given)
    old_train = _with_defaults(old.get("train") or {}, TrainConfig)
    a = {k: v for k, v in old_train.items() if k not in _RESUME_FREE}
    b = {k: v for k, v in now["train"].items() if k not in _RESUME_FREE}
    d = _diff(a, b, "train")
    if not d and callbacks is not None and "callbacks" in old:
        d = _diff(_callback_tree(old["callbacks"]), _callback_tree(C.to_dict(dict(callbacks))), "callbacks")
    missing = [k for k in _trained_on(cfg) if k not in (old.get("datasets") or {})]
    if not d and missing:
        d = f"datasets.{missing[0]} (the run has no dataset of that name)"
    if not d:
        was = old.get("start_sha256") or {}
        changed = sorted(k for k, v in (now.get("start_sha256") or {}).items() if v is not None and was.get(k) != v)
        if changed:
            d = (f"train.{changed[0]}.path (the weights in that folder changed since this run started from "
                 "them)")
    if not d and "data_sha256" in old:
        changed = sorted(k for k, v in now["data_sha256"].items() if old["data_sha256"].get(k) != v)
        if changed:
            d = (f"datasets.{changed[0]} (its bytes changed since this run trained on it: "
                 "the dataset was rebuilt from a different spec)")
    if d:
        field = d.split(" ")[0]
        raise ConfigError(field, f"differs from the run already in {out_dir} {d[len(field) + 1:]}; "
                          "use a new output folder (or delete that run) to start over")
