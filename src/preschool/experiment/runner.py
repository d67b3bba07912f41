"""The runner: train every run of an experiment, evaluate its checkpoints and write the report
(``preschool run``), or train one arm x seed in a cluster job (``preschool run --arm``). Every step takes the
:class:`~preschool.experiment.resolved.Experiment` and reads its run records."""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path

import yaml

from .. import layout
from ..analysis.report import write_report
from ..config import to_dict
from ..device import rank_threads
from ..errors import ConfigError
from ..evals.runner import check_eval_params, evaluate_specs
from ..io import write_text
from ..lock import command_line, output_lock
from ..plugins import loaded
from ..slurm_state import slurm_job_alive
from ..train.callbacks.registry import CallbackContext, build_callbacks
from ..train.run_dir import check_run_dir
from .prepare import build_data, check_stale_data, require_prepared
from .resolved import Experiment
from .runs import RunRecord
from .starts import trainable_config, training_order
from .schema import PLUGINS_USED


def check_run(exp: Experiment, rec: RunRecord, verify: str | None = None) -> None:
    """Refuse (ConfigError named where the YAML sets the value: train.lr, arms[i].stages[j]...; a dataset
    or a callback by arm) a run already in ``rec.run_dir`` that was trained with another config, other
    callbacks (``arms[i].callbacks``: where a compartments arm starts among them) or on other bytes
    (``check_run_dir``); ``rec``: one of ``exp``'s records. ``verify``: how the data's bytes are compared
    when not as the run's own ``verify`` says (``launch``: "size", the manifests' recorded checksums, not every
    shard rehashed on a login node)."""
    cfg = exp.cfg
    tcfg = started_config(exp, rec, must=layout.run_config_path(rec.run_dir).is_file())
    tcfg = tcfg if verify is None else replace(tcfg, verify=verify)
    try:
        check_run_dir(tcfg, rec.run_dir, dict(rec.datasets), layout.tokenizer_dir(layout.data_dir(cfg.out_dir)),
                      callbacks=dict(rec.callbacks))
    except ConfigError as e:
        arm = cfg.arms[rec.arm_index]
        where = (cfg.written_at(arm, rec.where, e.field[len("train."):]) if e.field.startswith("train.")
                 else f"{rec.where}.{e.field}")
        at = f" at rung {rec.rung}" if rec.rung is not None else ""
        raise ConfigError(where, f"arm {rec.arm} seed {rec.seed}{at}: {e.message}") from None


def started_config(exp: Experiment, rec: RunRecord, must: bool = True):
    """The record's TrainConfig with its ``init_from: {arm, pt_tokens}`` starts resolved from the parent's
    checkpoints (experiment/starts.py; ``must``: DataError when the parent has not reached it)."""
    return trainable_config(rec, {r.key: r for r in exp.records}, must)


def branch_off(exp: Experiment, rec: RunRecord) -> None:
    """Give a run whose leading stages another run trained (``rec.branch``) that run's history up to the
    branch point (train/branch.py), unless its folder holds a run already. A parent that has not reached the
    branch point with its training state kept there (trained before, or elsewhere) is said, and the run
    trains from its start: the same result, without the saving."""
    from ..train.branch import fork_run

    b = rec.branch
    parent = exp.record(b.parent)
    src = layout.checkpoint_dir(parent.run_dir, b.step)
    if layout.run_config_path(rec.run_dir).is_file() or (rec.run_dir / "branch.json").is_file():
        return
    if not (src / layout.CKPT_STATE).is_file():
        print(f"[preschool]{_at(rec)} arm {rec.arm} seed {rec.seed}: arm {parent.arm} has no checkpoint with its "
              f"training state at step {b.step}, where this run's first {b.stages} stage(s) end: training them again")
        return
    fork_run(parent.run_dir, rec.run_dir, b.step)
    print(f"[preschool]{_at(rec)} arm {rec.arm} seed {rec.seed}: its first {b.stages} stage(s) ({b.tokens:,} tokens) "
          f"are arm {parent.arm}'s; continuing from its step {b.step}")


def _at(rec: RunRecord) -> str:
    return f" rung {rec.rung}" if rec.rung is not None else ""


def run_lock(run_dir: Path, command: str):
    """The lock one arm x seed's trainer holds on its run folder (``<run>/.preschool.lock``, no key): a
    second trainer of the same run folder, a relaunched job or a ``preschool run`` beside a cluster job,
    stops with one line naming the holder instead of training it twice. Rank 0 takes it (every rank
    of a torchrun job trains the same folder); a holder on another node is stale once Slurm no longer
    runs its job."""
    if os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    return output_lock(run_dir, command, holder_alive=_holder_job_alive)


def _holder_job_alive(holder: dict) -> bool | None:
    """Whether the Slurm job a lock record names is still queued or running; None when it names none."""
    return slurm_job_alive(holder["slurm_job"]) if holder.get("slurm_job") else None


def train_arms(exp: Experiment, progress: bool = True, only: tuple[str, int] | None = None,
               command: str = "preschool run", share_prefixes: bool = True) -> None:
    """Step 3: train every run of ``exp`` (:attr:`~Experiment.runs`: every arm x seed, every rung's of a
    ladder, or those of the rung it is a view of) on the prepared data (resuming; finished runs are skipped,
    so a rung added to a ladder trains only its own runs); ``only``: that (arm, seed). Runs train after the
    runs they start from (``RunRecord.depends_on``); a run whose leading stages an earlier run trained continues
    from that run's checkpoint (:func:`branch_off`; not with ``share_prefixes=False``, which trains every run
    from its own start: the same results). Each run trains under its :func:`run_lock` (``command``: what a
    second trainer of the folder is told is running). Every run that will train is checked to fit the memory
    there is before the first trains (:func:`check_fits`)."""
    from ..train.trainer import train  # torch: loaded when a run trains

    data_dir = layout.data_dir(exp.out_dir)
    todo = [rec for rec in training_order(exp.runs) if only is None or (rec.arm, rec.seed) == only]
    for rec in todo:
        check_fits(rec, data_dir)
    for rec in todo:
        check_run(exp, rec)
        tcfg = replace(started_config(exp, rec), progress=rec.train.progress and progress)
        if layout.is_done(rec.run_dir):
            print(f"[preschool]{_at(rec)} arm {rec.arm} seed {rec.seed}: done, skipping")
            continue
        ctx = CallbackContext(rec.arm, rec.seed, dict(rec.datasets), [n for st in tcfg.stages for n in st.datasets],
                              data_dir, lambda other, s=rec.seed, r=rec.rung: exp.record((r, other, s)).run_dir)
        callbacks = build_callbacks(dict(rec.callbacks), ctx, f"{rec.where}.callbacks")
        with run_lock(rec.run_dir, command):
            if layout.is_done(rec.run_dir):  # finished by another trainer since the check above
                continue
            if rec.branch is not None and share_prefixes:
                branch_off(exp, rec)
            print(f"[preschool]{_at(rec)} arm {rec.arm} seed {rec.seed}: training -> {rec.run_dir}")
            train(tcfg, rec.run_dir, dict(rec.datasets), layout.tokenizer_dir(data_dir), callbacks,
                  dict(rec.callbacks), keep_state_at=rec.keep_state_at)


def check_fits(rec: RunRecord, data_dir: Path) -> None:
    """ConfigError naming the run (rung, arm, seed) when it is not finished and its model, or a micro-batch's
    activations, cannot fit the memory of this process's device (``train.trainer.check_run_fits``): a
    ladder's largest rung is refused before its smaller rungs spend hours training."""
    from ..train.trainer import check_run_fits

    if layout.is_done(rec.run_dir):
        return
    try:
        check_run_fits(rec.train, dict(rec.datasets), layout.tokenizer_dir(data_dir))
    except ConfigError as e:
        raise ConfigError(e.field if e.field == "model" else f"train.{e.field}",
                          f"{_at(rec).strip() + ' ' if rec.rung is not None else ''}arm {rec.arm} seed {rec.seed}: "
                          f"{e.message}") from None


def evaluate_arms(exp: Experiment) -> None:
    """Step 4: each run's evaluators (of :attr:`~Experiment.runs`) on every (every-th) checkpoint, cached."""
    from transformers.utils import logging as hf_logging  # heavy: loaded when checkpoints are evaluated

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per checkpoint is noise
    for rec in exp.runs:
        # a cluster report runs after every arm job, finished or not: evaluate what exists; evaluators default
        # to the arm's training device when that is CUDA (evals.runner.eval_device)
        if not evaluate_specs(rec.run_dir, list(rec.evals), layout.data_dir(exp.out_dir), rec.train.device):
            print(f"[preschool]{_at(rec)} arm {rec.arm} seed {rec.seed}: no checkpoints yet, not evaluated")


def run_experiment(exp: Experiment, progress: bool = True, stages: tuple[str, ...] = ("train", "eval", "report"),
                   rebuild: bool = False, share_prefixes: bool = True) -> Path:
    """Prepare the data (always: every step needs it), then the named ``stages`` in order
    (``share_prefixes``: see :func:`train_arms`).

    Nothing is written (``experiment.yaml`` included) until the data prepared from another spec is
    refused, or with ``rebuild`` cleared of trained runs (:func:`check_stale_data`), and every arm x seed
    folder that already holds a run on data kept as it is still matches the config (:func:`check_run`).
    Every step reads the records ``exp`` resolved when it was loaded.
    """
    cfg = exp.cfg
    check_stale_data(exp, rebuild)
    if "train" in stages:
        for rec in exp.runs:
            # a run whose data is not all prepared yet is checked once it is (train_arms)
            if all(layout.dataset_record_path(rec.datasets[n]).is_file() for n in rec.stage_datasets
                   if n in rec.datasets):
                check_run(exp, rec)

    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    whole = replace(cfg, rung=None)  # the experiment, whichever of its rungs this command trains
    write_text(layout.experiment_config_path(cfg.out_dir),
               yaml.safe_dump({**to_dict(whole), PLUGINS_USED: loaded()}, sort_keys=False))
    build_data(exp, progress, rebuild)
    if "eval" in stages:  # what an evaluator refuses, before the training it would wait for
        check_eval_params(cfg.evals, layout.data_dir(cfg.out_dir))
    if "train" in stages:
        train_arms(exp, progress, share_prefixes=share_prefixes)
    if "eval" in stages and cfg.evals:
        print("[preschool] evaluating checkpoints")
        evaluate_arms(exp)
    if "report" in stages:
        path = write_report(exp)  # a ladder: the largest rung's tables + the ladder section
        print(f"[preschool] report: {path}")
        return path
    return cfg.out_dir


def run_arm(exp: Experiment, arm: str, seed: int | None = None, progress: bool = True,
            share_prefixes: bool = True) -> Path:
    """Train one arm x seed of a prepared experiment (``preschool run EXP --arm A [--seed S]``); of a
    ladder, at the rung the config is a view of (``--rung R``; required).

    Refuses (``DataError`` naming the prepare command) when the data is not
    prepared, instead of preparing it from every rank of a multi-node job. Rank 0
    holds the run folder's lock (:func:`run_lock`): a second ``run --arm`` of the
    same arm x seed (a job submitted twice) stops naming the first.
    Under ``torchrun`` every rank calls this; the trainer forms the process group.
    ``share_prefixes=False``: a branch trains from its own start, without waiting for its parent.
    """
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
    command = command_line("run", str(exp.path), list(exp.overrides), None) + f" --arm {arm} --seed {seed}"
    train_arms(exp, progress, only=(arm, seed), command=command, share_prefixes=share_prefixes)  # the trainer forms the process group
    return exp.record((exp.cfg.rung, arm, seed)).run_dir
