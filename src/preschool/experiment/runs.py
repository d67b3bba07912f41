"""The runs an experiment trains, worked out once: one deeply frozen :class:`RunRecord` per rung x arm x seed.

A record holds what every step needs of one run: its rung, arm and seed, its run folder, the resolved
:class:`~preschool.train.configs.TrainConfig` (the one merge of an experiment: shared ``model``/``train``,
the arm's overlays, the rung's, the defaults the data implies) and the datasets it reads (the one
resolution of an arm's names to folders), the evaluators run on its checkpoints and the callbacks it
trains with. :func:`build_runs` builds every record of a config, each once (:func:`_build_record`), and
checks what only a resolved run can tell (a stage reading no dataset, a ``val`` name with nothing to
score, ``reserved_ids: auto`` with nothing to read it from); :class:`~preschool.experiment.resolved.Experiment`
holds them beside the config, and the runner, the evaluation and data steps, the report, ``plan`` and
``launch`` read them there. Nothing outside this module merges a TrainConfig or resolves an arm's datasets
(``tests/experiment/test_runs.py`` walks the package for such calls).

A record is frozen all the way down (:func:`preschool.frozen.freeze`): assigning to any of its fields, a
field of its TrainConfig, a stage, or changing one of its lists or mappings raises, so no step can change
what the next one reads, and no record shares a value with the config it came from. A record is named by
its :attr:`RunRecord.key` (rung, arm, seed), which is what another record will name when it starts from
this one's weights (a parent run, issue #47).

``cfg`` below is an :class:`~preschool.experiment.schema.ExperimentConfig` (named, not imported: the schema
module stays below this one and knows nothing of records)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from .. import layout
from ..config import check, overlay, validate
from ..data.builders.derived import dataset_parts
from ..errors import ConfigError
from ..evals.runner import EvalSpec
from ..frozen import freeze
from ..train.configs import TrainConfig
from .branches import Branch, branch_points, plan_branches
from .ladder import rung_model, rung_stages
from .starts import resolve_starts, start_step, starts_of


class RunKey(NamedTuple):
    """What names one run of an experiment: its rung (None without a ladder), arm and seed."""

    rung: str | None
    arm: str
    seed: int


@dataclass(frozen=True)
class RunRecord:
    """One rung x arm x seed of an experiment, resolved and frozen (the module docstring says what reads it)."""

    rung: str | None  # None: the experiment has no ladder
    arm: str
    arm_index: int  # the arm's position in `arms` (what an error names: arms[i])
    seed: int
    run_dir: Path
    train: TrainConfig  # resolved: model, stages (the rung's budgets), seed, every train setting
    datasets: Mapping[str, Path]  # what the trainer gets: name -> dataset folder
    stage_datasets: tuple[str, ...]  # the datasets of `data` its stages train on (aliases resolved), in order
    evals: tuple[EvalSpec, ...]
    callbacks: Mapping[str, Mapping[str, Any]]  # name -> config, as the arm gives them
    # the runs whose weights this one starts from (an init_from arm, a callback's arms_needed): trained first
    parents: tuple[RunKey, ...] = ()
    # the shared prefix it does not train again: its parent, stages, branch step, tokens (experiment/branches.py)
    branch: Branch | None = None
    # steps whose checkpoints keep their training state: other runs branch or continue from them there
    keep_state_at: tuple[int, ...] = ()

    @property
    def key(self) -> RunKey:
        return RunKey(self.rung, self.arm, self.seed)

    @property
    def depends_on(self) -> tuple[RunKey, ...]:
        """Every run that must train (up to where this one starts) before this one: its parents and the run
        its shared prefix comes from."""
        return self.parents + ((self.branch.parent,) if self.branch is not None else ())

    @property
    def where(self) -> str:
        """The arm's YAML path (``arms[i]``)."""
        return f"arms[{self.arm_index}]"


def build_runs(cfg) -> tuple[RunRecord, ...]:
    """Every run of the experiment, in order: each rung of a ladder (ladder order; whichever rung ``cfg`` is
    a view of), then arms, then seeds; without a ladder the one arm x seed grid. Each record is built once
    and checked; an error is a ConfigError named where the YAML sets the value (at a rung, naming it)."""
    rungs = [r.name for r in cfg.ladder.rungs] if cfg.ladder is not None else [None]
    records = [_build_record(cfg, i, seed, rung) for rung in rungs for i in range(len(cfg.arms)) for seed in cfg.seeds]
    return tuple(freeze(r) for r in _link_runs(cfg, records))


def _link_runs(cfg, records: list[RunRecord]) -> list[RunRecord]:
    """What records say about each other: the runs each starts from (``init_from: {arm: ...}``, resolved to
    their checkpoints, experiment/starts.py; a callback's ``arms_needed``), the shared prefix each branches
    from (experiment/branches.py) and the steps each must keep the training state of for the others."""
    def written_at(rec: RunRecord, field: str) -> str:
        return cfg.written_at(cfg.arms[rec.arm_index], rec.where, field)

    deps = cfg.arm_dependencies()  # a callback's arms_needed: the compartments c = 1 -> c start
    records = [replace(r, parents=(RunKey(r.rung, deps[r.arm], r.seed),)) if r.arm in deps else r for r in records]
    records = resolve_starts(records, cfg.seq_len, written_at)

    def has_val(rec: RunRecord, name: str) -> bool:  # the trainer's default val: stage datasets with a val/ split
        spec = cfg.data.get(cfg.arms[rec.arm_index].datasets.get(name, name))
        return spec is not None and bool(spec.source_dataset or spec.has_val)

    branches = plan_branches(records, cfg.seq_len, has_val)
    keep: dict[RunKey, set[int]] = {k: set(v) for k, v in branch_points(branches).items()}
    by_key = {r.key: r for r in records}
    for rec in records:  # optimizer: keep reads the source checkpoint's AdamW state
        for _, init in starts_of(rec.train):
            if init.arm is not None and init.optimizer == "keep":
                step = start_step(init, by_key[RunKey(rec.rung, init.arm, rec.seed)].train, cfg.seq_len, "")
                if step is not None:
                    keep.setdefault(RunKey(rec.rung, init.arm, rec.seed), set()).add(step)
    return [replace(r, branch=branches.get(r.key), keep_state_at=tuple(sorted(keep.get(r.key, ())))) for r in records]


def _build_record(cfg, i: int, seed: int, rung: str | None) -> RunRecord:
    """The record of ``cfg.arms[i]`` x ``seed`` at ``rung``, checked (:func:`_check_record`)."""
    arm = cfg.arms[i]
    rec = RunRecord(
        rung=rung, arm=arm.name, arm_index=i, seed=seed,
        run_dir=layout.run_dir(cfg.out_dir, arm.name, seed, rung),
        train=freeze(_merge_train_config(cfg, arm, seed, rung, f"arms[{i}]")),
        datasets=freeze(_resolve_datasets(cfg.data, layout.data_dir(cfg.out_dir), arm)),
        stage_datasets=tuple(stage_datasets(arm)), evals=freeze(tuple(cfg.evals)),
        callbacks=freeze(dict(arm.callbacks)))
    _check_record(cfg, arm, rec)
    return rec


def _check_record(cfg, arm, rec: RunRecord) -> None:
    """What only the resolved run tells: every stage reads a dataset of ``data`` or an alias, ``reserved_ids:
    auto`` has a dataset on reserved ids to read the range from, and each ``val`` name has a val/ split."""
    i, tcfg = rec.arm_index, rec.train
    readable = set(cfg.data) | set(arm.datasets)
    for j, st in enumerate(tcfg.stages):
        for s in st.datasets:
            check(s in readable, f"arms[{i}].stages[{j}].data", f"no dataset named {s!r}; have {sorted(readable)}")
    # the trainer resolves 'auto' from the prepared shards; with no dataset to read it from, say so now
    check(tcfg.reserved_ids != "auto" or cfg.renders_reserved(), cfg.written_at(arm, rec.where, "reserved_ids"),
          f"'auto', but no dataset of `data` renders symbols on reserved ids ({', '.join(sorted(cfg.data))}); "
          "give [lo, hi) or a dataset with render: reserved")
    known = set(rec.datasets)  # base datasets, aliases, derived stage datasets, parts
    where = cfg.written_at(arm, rec.where, "val")
    for v in tcfg.val or []:  # no val list: every stage dataset with a val/ split is scored
        check(v in known, where, f"no dataset or part named {v!r}; have {sorted(known)}")
        empty = _without_val(cfg.data, arm.datasets.get(v, v))
        check(empty is None, where, f"{v!r} will have no val/ split to score: data.{empty}.val_tokens is 0; "
              f"set data.{empty}.val_tokens > 0 or leave {v!r} out of val")


def _without_val(data: Mapping[str, Any], name: str) -> str | None:
    """The dataset with ``val_tokens: 0`` that leaves dataset ``name`` without a val/ split (itself, or the
    base dataset a derived one is built from), else None (parts and names outside ``data``)."""
    seen: set[str] = set()
    while name in data and name not in seen:
        seen.add(name)
        d = data[name]
        if d.source_dataset is None:
            return None if d.has_val else name
        name = d.source_dataset
    return None


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


def _merge_train_config(cfg, arm, seed: int, rung: str | None, path: str) -> TrainConfig:
    """The resolved TrainConfig of one arm and seed: the arm's stages and the seed, the shared
    ``model`` overlaid by the arm's, then the shared ``train`` settings overlaid by the arm's (the one
    merge of an experiment; :func:`preschool.config.overlay`), then the defaults the data implies:
    ``reserved_ids: auto`` when a dataset renders on reserved ids (the trainer reads the range from
    the prepared shards) and, for derived datasets with parts, the parts as ``val``. At a ladder rung
    (``rung`` set) the rung's model and ``train:`` overlay come last and the stages carry the rung's
    budgets (:func:`~preschool.experiment.ladder.rung_stages`); an error names the rung.
    """
    if rung is not None:  # name the rung in any error of its resolved config
        k = cfg.ladder.index(rung)
        try:
            return _merged_train_config(cfg, arm, seed, rung, path)
        except ConfigError as e:
            raise ConfigError(e.field, f"at rung {rung!r} (ladder.rungs[{k}]): {e.message}") from None
    return _merged_train_config(cfg, arm, seed, rung, path)


def _merged_train_config(cfg, arm, seed: int, rung: str | None, path: str) -> TrainConfig:
    model = rung_model(cfg, arm, rung)
    rung_train = cfg.ladder.rung(rung).train if rung is not None else {}
    tcfg = overlay(TrainConfig(model=model, stages=rung_stages(cfg, arm, rung), seed=seed), cfg.train, arm.train,
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
