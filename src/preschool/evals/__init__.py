"""Evaluators: one per file, registered in ``EVALUATORS`` (contract in ``base.py``).

``EVALUATORS`` finds an evaluator by name in the module of that name (and
imports every module of this package when it lists them), so a new evaluator
is one new file and ``EVALUATORS.build("minimal_pairs", {...})``
works after ``import preschool.evals``. Modules import torch lazily, so this
stays cheap. Run many checkpoints with :func:`preschool.evals.runner.evaluate_run`.
"""

from __future__ import annotations

from .base import EVALUATORS, EvalResult, Evaluator

__all__ = ["EVALUATORS", "EvalResult", "Evaluator"]
