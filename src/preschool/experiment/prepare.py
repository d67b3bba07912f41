"""The data step of an experiment: check what prepared data a config would replace, build the tokenizer,
shard sets and minimal pairs under ``<out>/data`` (``preschool prepare``, and the first step of ``preschool
run``), and tell a cluster job whether its data is prepared."""

from __future__ import annotations

import shlex
from pathlib import Path

from .. import layout
from ..config import from_dict
from ..corpora import CorpusConfig
from ..corpora.storybook import check_pairs_fit, write_minimal_pairs
from ..data.prepare import check_data, prepare_data
from ..errors import DataError
from ..io import read_json
from ..lock import command_line, experiment_lock
from .resolved import Experiment


def _corpora(corpora: dict[str, dict]) -> dict:
    """The experiment's ``corpora:``, typed."""
    return {n: from_dict(CorpusConfig, c, f"corpora.{n}") for n, c in corpora.items()}


def check_stale_data(exp: Experiment, rebuild: bool = False) -> list:
    """What :func:`build_data` would replace, checked before anything is written: a dataset prepared from
    another spec is a DataError naming it and the field (``data.check_data``), unless ``rebuild``; and with
    ``rebuild``, an arm x seed run folder that trained on one of them is a DataError naming the run (its
    data would be gone: it could neither resume nor be reused; every run of the experiment, each rung's of
    a ladder: the data is shared). Returns the datasets to rebuild."""
    cfg = exp.cfg
    stale = check_data(layout.data_dir(cfg.out_dir), cfg.tokenizer, _corpora(cfg.corpora), cfg.data, cfg.seq_len,
                       cfg.seed, rebuild)
    replaced = {s.path.resolve(): s for s in stale}
    for rec in exp.records if replaced else []:
        if not layout.run_config_path(rec.run_dir).is_file():
            continue
        for name in rec.stage_datasets:
            path = Path(rec.datasets.get(name, layout.data_dir(cfg.out_dir) / name)).resolve()
            hit = next((st for p, st in replaced.items() if path == p or path.is_relative_to(p)), None)
            if hit is not None:
                raise DataError(f"{rec.run_dir}: arm {rec.arm} seed {rec.seed} was trained on dataset {hit.dataset!r}, "
                                f"which --rebuild would replace ({hit.field}: {hit.detail}); nothing was changed: move "
                                "that run folder away (or give another --out) first")
    return stale


def build_data(exp: Experiment, progress: bool = True, rebuild: bool = False) -> dict:
    """Step 2: tokenizer, shard sets and minimal pairs under ``<out>/data``; data prepared from another spec
    is refused before anything is written, or with ``rebuild`` replaced (:func:`check_stale_data`)."""
    cfg = exp.cfg
    out = layout.data_dir(cfg.out_dir)
    check_stale_data(exp, rebuild)
    if cfg.minimal_pairs.per_paradigm > 0 and not layout.is_done(out / "minimal_pairs"):  # before any data is built
        check_pairs_fit(out, cfg.minimal_pairs.per_paradigm, "minimal_pairs.per_paradigm")
    manifest = prepare_data(out, cfg.tokenizer, _corpora(cfg.corpora), cfg.data, cfg.seq_len, cfg.seed, cfg.workers,
                            progress, rebuild=rebuild)
    if cfg.minimal_pairs.per_paradigm > 0:
        mp = out / "minimal_pairs"
        if not layout.is_done(mp):
            write_minimal_pairs(mp, seed=cfg.minimal_pairs.seed, n_per_paradigm=cfg.minimal_pairs.per_paradigm,
                                field="minimal_pairs.per_paradigm")
            layout.done_path(mp).write_text("ok\n")
    return manifest


def prepare_experiment(exp: Experiment, progress: bool = True, command: str | None = None,
                       rebuild: bool = False) -> dict:
    """Build the experiment's data once, holding the output lock; returns the data manifest.

    ``command`` is what a second process is told is running (default: the
    ``preschool prepare`` line of ``exp``). A second prepare of the same config
    waits and reuses the data; one of another config into the same ``out``
    raises :class:`DataError` (see :mod:`preschool.lock`). Data prepared from
    another spec is refused, or with ``rebuild`` replaced (:func:`check_stale_data`).
    """
    with experiment_lock(exp.cfg, command or command_line("prepare", str(exp.path), list(exp.overrides), None)):
        return build_data(exp, progress, rebuild)


def _not_prepared(exp: Experiment, why: str):
    cmd = " ".join(["preschool", "prepare", shlex.quote(str(exp.path)),
                    *[f"--set {shlex.quote(o)}" for o in exp.overrides]])
    return DataError(f"{why}; prepare the data first: {cmd}")


def require_prepared(exp: Experiment) -> dict:
    """The data manifest, if every dataset of the config is prepared with its current spec; else a
    DataError naming the dataset and the ``preschool prepare`` line to run."""
    data = layout.data_dir(exp.out_dir)
    manifest_path = layout.data_manifest_path(exp.out_dir)
    if not manifest_path.is_file():
        raise _not_prepared(exp, f"no prepared data in {data}")
    manifest = read_json(manifest_path)
    for name, spec in exp.cfg.data.items():
        entry = manifest["datasets"].get(name)
        if entry is None or entry.get("spec") != spec.record() or manifest.get("seq_len") != exp.cfg.seq_len:
            raise _not_prepared(exp, f"dataset {name!r} in {data} is missing or was prepared from another spec")
        if not layout.dataset_record_path(data / name).is_file():
            raise _not_prepared(exp, f"dataset {name!r} has no {layout.dataset_record_path(data / name)}")
    return manifest
