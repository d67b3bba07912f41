"""The runner: train every run of an experiment, evaluate its checkpoints and write the report
(``preschool run``), or train one arm x seed in a cluster job (``preschool run --arm``)."""

from __future__ import annotations

from pathlib import Path

from .. import layout
from ..config import to_dict
from ..errors import ConfigError
from .prepare import build_data, check_stale_data, require_prepared
from .runs import all_runs
from .schema import PLUGINS_USED, ArmSpec, ExperimentConfig, ExperimentFile


def check_arm_run(cfg: ExperimentConfig, arm: ArmSpec, seed: int, run_dir: Path) -> tuple:
    """``(TrainConfig, datasets)`` of one arm x seed, once the run already in ``run_dir`` (if any) was trained
    with this config on these bytes (``check_run_dir``); else ConfigError named where the YAML sets the
    value (train.lr, arms[i].stages[j]...; a dataset by arm)."""
    from ..train.trainer import check_run_dir

    i = cfg.arms.index(arm)
    datasets = cfg.arm_datasets(arm)
    tcfg = cfg.train_config(arm, seed, f"arms[{i}]")
    try:
        check_run_dir(tcfg, run_dir, datasets, layout.tokenizer_dir(layout.data_dir(cfg.out_dir)))
    except ConfigError as e:
        where = (cfg.written_at(arm, f"arms[{i}]", e.field[len("train."):]) if e.field.startswith("train.")
                 else f"arms[{i}].{e.field}")
        at = f" at rung {cfg.rung}" if cfg.rung is not None else ""
        raise ConfigError(where, f"arm {arm.name} seed {seed}{at}: {e.message}") from None
    return tcfg, datasets

def run_lock(run_dir: Path, command: str):
    """The lock one arm x seed's trainer holds on its run folder (``<run>/.preschool.lock``, no key): a
    second trainer of the same run folder, a relaunched job or a ``preschool run`` beside a cluster job,
    stops with one line naming the holder instead of training it twice. Rank 0 takes it (every rank
    of a torchrun job trains the same folder); a holder on another node is stale once Slurm no longer
    runs its job."""
    import contextlib
    import os

    from ..data.distributed import slurm_job_alive
    from ..lock import output_lock

    if os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    return output_lock(run_dir, command,
                       holder_alive=lambda holder: slurm_job_alive(holder["slurm_job"]) if holder.get("slurm_job") else None)


def train_arms(cfg: ExperimentConfig, progress: bool = True, only: tuple[str, int] | None = None,
               command: str = "preschool run") -> None:
    """Step 3: train every arm x seed (every rung's, of a ladder) of the prepared data (resuming; finished
    runs are skipped, so a rung added to a ladder trains only its own runs); ``only``: that (arm, seed).
    Each run trains under its :func:`run_lock` (``command``: what a second trainer of the folder is told
    is running)."""
    from ..train.callbacks.registry import CallbackContext, build_callbacks
    from ..train.trainer import train

    data_dir = layout.data_dir(cfg.out_dir)
    for view, arm, seed, run_dir in all_runs(cfg):
        if only is not None and (arm.name, seed) != only:
            continue
        i = view.arms.index(arm)
        tcfg, datasets = check_arm_run(view, arm, seed, run_dir)
        tcfg.progress = tcfg.progress and progress
        at = f" rung {view.rung}" if view.rung is not None else ""
        if layout.is_done(run_dir):
            print(f"[preschool]{at} arm {arm.name} seed {seed}: done, skipping")
            continue
        ctx = CallbackContext(arm.name, seed, datasets, [n for st in tcfg.stages for n in st.datasets], data_dir,
                              lambda other, s=seed, r=view.rung: layout.run_dir(cfg.out_dir, other, s, r))
        callbacks = build_callbacks(arm.callbacks, ctx, f"arms[{i}].callbacks")
        with run_lock(run_dir, command):
            if layout.is_done(run_dir):  # finished by another trainer since the check above
                continue
            print(f"[preschool]{at} arm {arm.name} seed {seed}: training -> {run_dir}")
            train(tcfg, run_dir, datasets, layout.tokenizer_dir(data_dir), callbacks)


def evaluate_arms(cfg: ExperimentConfig) -> None:
    """Step 4: every configured evaluator on every (every-th) checkpoint, cached."""
    from transformers.utils import logging as hf_logging

    from ..evals.runner import evaluate_specs

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per checkpoint is noise
    for view, arm, seed, run_dir in all_runs(cfg):
        # a cluster report runs after every arm job, finished or not: evaluate what exists
        if not evaluate_specs(run_dir, cfg.evals, layout.data_dir(cfg.out_dir)):
            at = f" rung {view.rung}" if view.rung is not None else ""
            print(f"[preschool]{at} arm {arm.name} seed {seed}: no checkpoints yet, not evaluated")


def run_experiment(cfg: ExperimentConfig, progress: bool = True, stages: tuple[str, ...] = ("train", "eval", "report"),
                   rebuild: bool = False) -> Path:
    """Prepare the data (always: every step needs it), then the named ``stages`` in order.

    Nothing is written (``experiment.yaml`` included) until the data prepared from another spec is
    refused, or with ``rebuild`` cleared of trained runs (:func:`check_stale_data`), and every arm x seed
    folder that already holds a run on data kept as it is still matches the config (``check_arm_run``).
    """
    from dataclasses import replace

    from ..io import write_text
    import yaml

    check_stale_data(cfg, rebuild)
    if "train" in stages:
        for view, arm, seed, run_dir in all_runs(cfg):
            # a run whose data is not all prepared yet is checked once it is (train_arms)
            if all(layout.dataset_record_path(p).is_file() for n, p in cfg.arm_datasets(arm).items()
                   if n in cfg.stage_datasets(arm)):
                check_arm_run(view, arm, seed, run_dir)
    from ..plugins import loaded

    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    whole = replace(cfg, rung=None)  # the experiment, whichever of its rungs this command trains
    write_text(layout.experiment_config_path(cfg.out_dir),
               yaml.safe_dump({**to_dict(whole), PLUGINS_USED: loaded()}, sort_keys=False))
    build_data(cfg, progress, rebuild)
    if "train" in stages:
        train_arms(cfg, progress)
    if "eval" in stages and cfg.evals:
        print("[preschool] evaluating checkpoints")
        evaluate_arms(cfg)
    if "report" in stages:
        from ..analysis.report import write_report

        path = write_report(cfg.report_view())  # a ladder: the largest rung's tables + the ladder section
        print(f"[preschool] report: {path}")
        return path
    return cfg.out_dir


def run_arm(exp: ExperimentFile, arm: str, seed: int | None = None, progress: bool = True) -> Path:
    """Train one arm x seed of a prepared experiment (``preschool run EXP --arm A [--seed S]``); of a
    ladder, at the rung the config is a view of (``--rung R``; required).

    Refuses (``DataError`` naming the prepare command) when the data is not
    prepared, instead of preparing it from every rank of a multi-node job. Rank 0
    holds the run folder's lock (:func:`run_lock`): a second ``run --arm`` of the
    same arm x seed (a job submitted twice) stops naming the first.
    Under ``torchrun`` every rank calls this; the trainer forms the process group.
    """
    from ..device import rank_threads
    from ..lock import command_line

    if arm not in exp.arms:
        raise ConfigError("--arm", f"no arm named {arm!r}; the experiment has {exp.arms}")
    if exp.cfg.ladder is not None and exp.cfg.rung is None:
        raise ConfigError("--rung", f"the experiment is a ladder: name the rung to train arm {arm} at "
                          f"(one of {[r.name for r in exp.cfg.ladder.rungs]})")
    seed = exp.seeds[0] if seed is None else int(seed)
    if seed not in exp.seeds:
        raise ConfigError("--seed", f"seed {seed} is not in the experiment's seeds {exp.seeds}")
    require_prepared(exp)
    rank_threads()
    command = command_line("run", str(exp.path), exp.overrides, None) + f" --arm {arm} --seed {seed}"
    train_arms(exp.cfg, progress, only=(arm, seed), command=command)  # the trainer forms the process group
    return layout.run_dir(exp.out_dir, arm, seed, exp.cfg.rung)
