"""Experiments: one YAML names the data, the model and the arms; one command runs it all.

``preschool run EXPERIMENT.yaml`` does, in order, skipping whatever is
already done (so an interrupted run resumes and ends with the same numbers):

1. validate the whole config (unknown keys, unknown presets/generators/
   evaluators, bad budgets, missing files) before any work;
2. ``prepare``: tokenizer + shard sets for every named dataset (data/prepare.py),
   plus the storybook minimal pairs when asked for;
   derived datasets (``kind:``, e.g. ``compartmented``; data/builders/derived.py) are built
   from the datasets they read;
3. train every arm x seed with the staged trainer (train/trainer.py), which
   resumes from its last checkpoint, with the callbacks the arm names
   (``callbacks: {name: config}``, train/callbacks/registry.py);
4. evaluate every checkpoint of every arm with the configured evaluators
   (results cached per checkpoint and evaluator version);
5. write ``report.md``, ``results.json`` and plots (analysis/report.py), with the
   analysis sections ``report.sections`` names (analysis/sections.py).

Ladders: ``ladder:`` runs the same arms at several *rungs* (model sizes); each rung sets the model
and scales every stage's token budget by the ladder's rule (:class:`LadderSpec`). Each rung x arm x
seed is an ordinary run in ``<out>/rungs/<rung>/arms/<arm>/seed<k>``; the data is shared. A config
with ``rung: <name>`` (``--rung``) is the view of one rung (:meth:`Experiment.at_rung`), which is
what every step below trains, evaluates and reports; docs/ladder.md.

Seeds: ``seed`` is the data seed, ``seeds`` the training seeds of the arm x seed
grid; what each changes is documented once, in ``preschool/seeds.py``.

Parts from outside the package (your own generators, evaluators, sections...)
come from ``plugins: [my_lab.tasks, ./my_tasks.py, ./my_tasks/]`` (relative paths: the
working folder's, as every path; ``preschool.plugins``), imported before the rest is read.

Layout under ``out``::

    experiment.yaml                 the resolved config (+ plugins_used: each plug-in's version, sha256)
    data/                           tokenizer + shard sets + manifest.json
    arms/<arm>/seed<k>/             one trainer run folder (docs/interfaces.md)
    rungs/<rung>/arms/<arm>/seed<k>/  the same, per rung of a ladder
    report.md, results.json, plots/

The package, by role: ``schema.py`` (the config dataclasses, validation, reading a YAML),
``ladder.py`` (each rung's model and budgets), ``runs.py`` (the runs worked out once: one deeply frozen
record per rung x arm x seed), ``resolved.py`` (:class:`Experiment`, the validated config and its records,
which :func:`load_experiment` returns and every step below, the report, ``plan`` and ``launch`` take),
``prepare.py`` (the data step), ``runner.py`` (training, evaluation, the report; one arm x seed in a
cluster job). The names below are re-exported here, where users and the commands import them.
"""

from __future__ import annotations

from .schema import (PLUGINS_USED, TRAIN_OVERLAY, ArmSpec, DownstreamGroups, EfficiencySpec, EvalSpec,
                     ExperimentConfig, LadderSpec, LanguageRule, MinimalPairsSpec, ReportSpec, RungSpec,
                     SyntheticRule)
from .schema import _OLD_COMPARTMENTS_KEYS  # noqa: F401  (the retired schema's keys, which a re-render refuses)
from .runs import RunKey, RunRecord
from .starts import training_order
from .resolved import Experiment, load_experiment
from .prepare import build_data, check_stale_data, prepare_experiment, require_prepared
from .runner import check_run, evaluate_arms, run_arm, run_experiment, run_lock, train_arms
from ..device import allocated_cpus, rank_threads

__all__ = ["PLUGINS_USED", "TRAIN_OVERLAY", "ArmSpec", "DownstreamGroups", "EfficiencySpec", "EvalSpec",
           "ExperimentConfig", "LadderSpec", "LanguageRule", "MinimalPairsSpec", "ReportSpec", "RungSpec",
           "SyntheticRule", "RunKey", "RunRecord", "Experiment", "load_experiment", "build_data",
           "check_stale_data", "prepare_experiment", "require_prepared", "check_run", "evaluate_arms", "run_arm",
           "run_experiment", "run_lock", "train_arms", "training_order", "allocated_cpus", "rank_threads"]
