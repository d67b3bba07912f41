"""One resolved experiment, handed to every step: :class:`Experiment` holds the validated config and every
run it trains (:class:`~preschool.experiment.runs.RunRecord`), built once when it is loaded
(:func:`load_experiment`) and frozen all the way down.

The runner, the evaluation and data steps, the report, ``plan`` and ``launch`` each take the Experiment and
read its records; none of them builds a run again. A ladder's Experiment holds every rung's runs; the view
of one rung (``--rung``, :meth:`Experiment.at_rung`) holds the same records and names which of them its
command trains (:attr:`Experiment.runs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..frozen import freeze
from .runs import RunKey, RunRecord, build_runs
from .schema import ExperimentConfig, read_config


@dataclass(frozen=True)
class Experiment:
    """The validated config (frozen) and every run of it (``records``: each rung of a ladder, then arms, then
    seeds), plus the YAML and ``--set`` overrides it was loaded from (None / () for a config built in code),
    which name the command a second process is told about or the one to run first."""

    cfg: ExperimentConfig
    records: tuple[RunRecord, ...]
    path: Path | None = None
    overrides: list[str] = ()  # a frozen list (preschool.frozen)

    @classmethod
    def resolve(cls, cfg: ExperimentConfig, path: str | Path | None = None, overrides=()) -> "Experiment":
        """The Experiment of a validated config: its runs built, once each, and checked
        (:func:`~preschool.experiment.runs.build_runs`; a ConfigError names where the YAML sets the value)."""
        cfg = freeze(cfg)
        return cls(cfg, build_runs(cfg), None if path is None else Path(path), freeze(list(overrides)))

    # ----------------------------------------------------------------------------- the runs

    @property
    def runs(self) -> tuple[RunRecord, ...]:
        """The runs this experiment's commands train, evaluate and check: every record, or those of the rung
        the config is a view of."""
        return self.records if self.cfg.rung is None else self.runs_at(self.cfg.rung)

    def runs_at(self, rung: str | None) -> tuple[RunRecord, ...]:
        """The records of one rung (None: of an experiment without a ladder), arms then seeds."""
        return tuple(r for r in self.records if r.rung == rung)

    def record(self, key: RunKey | tuple) -> RunRecord:
        """The record named by ``key`` (rung, arm, seed)."""
        key = RunKey(*key)
        hit = next((r for r in self.records if r.key == key), None)
        if hit is None:
            raise KeyError(f"no run {key} in experiment {self.cfg.name!r}")
        return hit

    @property
    def rungs(self) -> list[str | None]:
        """The rungs whose runs this experiment's commands train: a ladder's (or the one ``--rung`` names),
        else ``[None]``."""
        if self.cfg.ladder is None:
            return [None]
        return [self.cfg.rung] if self.cfg.rung is not None else self.ladder_rungs

    @property
    def ladder_rungs(self) -> list[str]:
        """Every rung of the ladder, in order, whichever one the config is a view of; [] without a ladder."""
        return [r.name for r in self.cfg.ladder.rungs] if self.cfg.ladder is not None else []

    # ----------------------------------------------------------------------------- views

    def at_rung(self, rung: str) -> "Experiment":
        """The view of one rung of the ladder (``--rung``): the same records, the config's ``rung`` set."""
        return Experiment(freeze(self.cfg.at_rung(rung)), self.records, self.path, self.overrides)

    def report_view(self) -> "Experiment":
        """What the report's tables read: a ladder's largest (last) rung, unless the config is a view of one."""
        if self.cfg.ladder is None or self.cfg.rung is not None:
            return self
        return self.at_rung(self.ladder_rungs[-1])

    # ----------------------------------------------------------------------------- what the commands name

    @property
    def out_dir(self) -> Path:
        return self.cfg.out_dir

    @property
    def arms(self) -> list[str]:
        return [a.name for a in self.cfg.arms]

    @property
    def seeds(self) -> list[int]:
        return list(self.cfg.seeds)

    @property
    def depends(self) -> dict[str, str]:
        """arm -> the earlier arm whose run of the same seed it starts from (a callback's ``arms_needed``)."""
        return self.cfg.arm_dependencies()


def load_experiment(path: str | Path, overrides=()) -> Experiment:
    """The experiment YAML at ``path`` (plus ``key=value`` overrides): its config validated
    (:func:`~preschool.experiment.schema.read_config`, plug-ins imported first) and its runs resolved."""
    return Experiment.resolve(read_config(path, list(overrides)), path, overrides)
