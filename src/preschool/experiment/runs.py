"""The runs an experiment trains, worked out once: one frozen :class:`RunRecord` per rung x arm x seed.

A record holds what every step needs of one run: its rung, arm and seed, its run folder, the resolved
:class:`~preschool.train.configs.TrainConfig` (the one merge of an experiment: shared ``model``/``train``,
the arm's overlays, the rung's, the defaults the data implies) and the datasets it reads (the one
resolution of an arm's names to folders), the evaluators run on its checkpoints and the callbacks it
trains with. The runner, the evaluation step, the data step, the report (``cfg.run_records()``),
``plan`` and ``launch`` read records; nothing outside this module merges a TrainConfig or resolves an
arm's datasets (``tests/experiment/test_runs.py`` walks the package for such calls).

``cfg`` below is an :class:`~preschool.experiment.schema.ExperimentConfig` (named, not imported: the
schema's validation builds records, so the schema imports this module)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .. import layout
from ..config import overlay, validate
from ..data.builders.derived import dataset_parts
from ..errors import ConfigError
from ..evals.runner import EvalSpec
from ..train.configs import TrainConfig
from .ladder import rung_model, rung_stages


@dataclass(frozen=True)
class RunRecord:
    """One rung x arm x seed of an experiment, resolved (the module docstring says what reads it)."""

    rung: str | None  # None: the experiment has no ladder (or the record is of the YAML's budgets)
    arm: str
    arm_index: int  # the arm's position in `arms` (what an error names: arms[i])
    seed: int
    run_dir: Path
    train: TrainConfig  # resolved: model, stages (the rung's budgets), seed, every train setting
    datasets: Mapping[str, Path]  # what the trainer gets: name -> dataset folder
    stage_datasets: tuple[str, ...]  # the datasets of `data` its stages train on (aliases resolved), in order
    evals: tuple[EvalSpec, ...]
    callbacks: Mapping[str, dict[str, Any]]  # name -> config, as the arm gives them

    @property
    def where(self) -> str:
        """The arm's YAML path (``arms[i]``)."""
        return f"arms[{self.arm_index}]"


def resolve_runs(cfg) -> tuple[RunRecord, ...]:
    """Every run the config trains, in order: each rung's arm x seed grid of a ladder (ladder order, then
    arms, then seeds), else the one grid (a rung's view: that rung's)."""
    return tuple(rec for view in cfg.rung_views() for rec in grid_records(view))


def grid_records(cfg) -> tuple[RunRecord, ...]:
    """The records of the config's own arm x seed grid, at its rung (``cfg.rung``; arms, then seeds)."""
    return tuple(run_record(cfg, arm, seed) for arm in cfg.arms for seed in cfg.seeds)


def run_record(cfg, arm, seed: int, path: str = "") -> RunRecord:
    """The record of ``arm`` (one of ``cfg.arms``) x ``seed`` at the config's rung; an error in its
    resolved config is a ConfigError named where the YAML sets the value (``path``: the arm's, default
    ``arms[i]``), and at a rung names the rung."""
    i = cfg.arms.index(arm)
    return RunRecord(
        rung=cfg.rung, arm=arm.name, arm_index=i, seed=seed,
        run_dir=layout.run_dir(cfg.out_dir, arm.name, seed, cfg.rung),
        train=_merge_train_config(cfg, arm, seed, path or f"arms[{i}]"),
        datasets=MappingProxyType(_resolve_datasets(cfg.data, layout.data_dir(cfg.out_dir), arm)),
        stage_datasets=tuple(stage_datasets(arm)), evals=tuple(cfg.evals),
        callbacks=MappingProxyType(dict(arm.callbacks)))


def arm_dirs(cfg) -> list[tuple[Any, int, Path]]:
    """``(arm, seed, run folder)`` of one config's grid: the experiment's, or one rung's (``cfg.rung``)."""
    return layout.arm_runs(cfg.out_dir, cfg.arms, cfg.seeds, cfg.rung)


def all_runs(cfg) -> list[tuple[Any, Any, int, Path]]:
    """``(view, arm, seed, run folder)`` of every run the config trains: each rung's grid of a ladder
    (``view``: that rung's config), else the one grid (the order of :func:`resolve_runs`)."""
    return [(view, arm, seed, d) for view in cfg.rung_views() for arm, seed, d in arm_dirs(view)]


# ----------------------------------------------------------------------------- an arm's datasets


def stage_names(arm) -> list[str]:
    """The names the arm's stages train on (a dataset or an alias), in order, once each."""
    return list(dict.fromkeys(n for st in arm.stages for n in st.datasets))


def stage_datasets(arm) -> list[str]:
    """The datasets of ``data`` the arm's stages train on (aliases resolved), in order."""
    return list(dict.fromkeys(arm.datasets.get(n, n) for n in stage_names(arm)))


def arm_parts(data: Mapping[str, Any], arm) -> list[str]:
    """The parts (per-compartment val sets, say) of the derived datasets of ``data`` the arm trains on."""
    return [p for t in stage_datasets(arm) if t in data for p in dataset_parts(data, t)]


def _resolve_datasets(data: Mapping[str, Any], data_dir: Path, arm) -> dict[str, Path]:
    """What the trainer gets for this arm: name -> dataset folder (``data``: the experiment's datasets,
    prepared under ``data_dir``).

    Every base dataset (so every arm's model covers the same vocabulary), the derived
    datasets its stages train on, its aliases (``datasets:``) and the parts of its derived
    stage datasets (``<dataset>/<part>``, scored as ``val/<part>``). Another arm's derived
    datasets stay out: a c=8 presentation does not widen a c=1 arm's vocabulary.
    """
    out = {n: data_dir / n for n, d in data.items() if d.source_dataset is None}
    for t in stage_datasets(arm):
        if t in data:
            out.setdefault(t, data_dir / t)
    out.update({alias: data_dir / target for alias, target in arm.datasets.items()})
    for t in stage_datasets(arm):
        for part in dataset_parts(data, t) if t in data else []:
            if part in out and out[part] != data_dir / t / part:
                raise ConfigError(f"arms[{arm.name}]", f"part {part!r} of dataset {t!r} clashes with another "
                                  "dataset or part of the same name")
            out[part] = data_dir / t / part
    return out


# ----------------------------------------------------------------------------- the TrainConfig merge


def _merge_train_config(cfg, arm, seed: int, path: str) -> TrainConfig:
    """The resolved TrainConfig of one arm and seed: the arm's stages and the seed, the shared
    ``model`` overlaid by the arm's, then the shared ``train`` settings overlaid by the arm's (the one
    merge of an experiment; :func:`preschool.config.overlay`), then the defaults the data implies:
    ``reserved_ids: auto`` when a dataset renders on reserved ids (the trainer reads the range from
    the prepared shards) and, for derived datasets with parts, the parts as ``val``. At a ladder rung
    (``rung`` set) the rung's model and ``train:`` overlay come last and the stages carry the rung's
    budgets (:func:`~preschool.experiment.ladder.rung_stages`); an error names the rung.
    """
    if cfg.rung is not None:  # name the rung in any error of its resolved config
        k = cfg.ladder.index(cfg.rung)
        try:
            return _merged_train_config(cfg, arm, seed, path)
        except ConfigError as e:
            raise ConfigError(e.field, f"at rung {cfg.rung!r} (ladder.rungs[{k}]): {e.message}") from None
    return _merged_train_config(cfg, arm, seed, path)


def _merged_train_config(cfg, arm, seed: int, path: str) -> TrainConfig:
    model = rung_model(cfg, arm)
    rung_train = cfg.ladder.rung(cfg.rung).train if cfg.rung is not None else {}
    tcfg = overlay(TrainConfig(model=model, stages=rung_stages(cfg, arm), seed=seed), cfg.train, arm.train,
                   rung_train)
    if tcfg.val is None and arm_parts(cfg.data, arm):
        # a derived dataset with parts has no val/ of its own: the arm scores its parts (and the
        # other stage datasets that have a val split, as the trainer's default would)
        val: list[str] = []
        for n in stage_names(arm):
            t = arm.datasets.get(n, n)
            spec = cfg.data.get(t)
            parts = dataset_parts(cfg.data, t) if spec is not None else []
            val += parts or ([n] if spec is not None and (spec.source_dataset or spec.has_val) else [])
        tcfg = overlay(tcfg, {"val": val})
    if tcfg.reserved_ids is None and cfg.renders_reserved():
        tcfg = overlay(tcfg, {"reserved_ids": "auto"})
    # each overlay was checked field by field on load; what is left are checks across fields
    # (a model override the preset cannot take, 'mean' embeddings without reserved_ids): name the
    # YAML key that set the value, the arm's own or the shared one
    try:
        validate(model)
    except ConfigError as e:
        raise ConfigError(cfg.written_at(arm, path, f"model.{e.field}"), e.message) from None
    try:
        validate(tcfg)
    except ConfigError as e:
        raise ConfigError(cfg.written_at(arm, path, e.field), e.message) from None
    return tcfg
