"""The runs an experiment config trains: one per rung x arm x seed, each with its run folder."""

from __future__ import annotations

from pathlib import Path

from .. import layout
from .schema import ArmSpec, ExperimentConfig


def arm_dirs(cfg: ExperimentConfig) -> list[tuple[ArmSpec, int, Path]]:
    """``(arm, seed, run folder)`` of one config's grid: the experiment's, or one rung's (``cfg.rung``)."""
    return layout.arm_runs(cfg.out_dir, cfg.arms, cfg.seeds, cfg.rung)


def all_runs(cfg: ExperimentConfig) -> list[tuple[ExperimentConfig, ArmSpec, int, Path]]:
    """``(view, arm, seed, run folder)`` of every run the config trains: each rung's grid of a ladder
    (``view``: that rung's config, which resolves the run's TrainConfig), else the one grid."""
    return [(view, arm, seed, d) for view in cfg.rung_views() for arm, seed, d in arm_dirs(view)]
