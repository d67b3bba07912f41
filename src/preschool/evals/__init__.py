"""Evaluators: one per file, registered in ``EVALUATORS`` (contract in ``base.py``).

Importing this package registers every evaluator module, so
``EVALUATORS.build("minimal_pairs", {...})`` works after ``import preschool.evals``.
Modules import torch lazily, so this stays cheap for ``preschool --help``.
Run many checkpoints with :func:`preschool.evals.runner.evaluate_run`.
"""

from __future__ import annotations

import importlib

from .base import EVALUATORS, EvalResult, Evaluator

# Evaluator modules (one file each, one registry line per evaluator). A module that fails to
# import raises, so a broken evaluator is never silently missing.
EVALUATOR_MODULES = ("minimal_pairs", "heldout", "verbatim", "qa_f1", "depo", "lm_eval")

for _name in EVALUATOR_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

__all__ = ["EVALUATORS", "EvalResult", "Evaluator", "EVALUATOR_MODULES"]
