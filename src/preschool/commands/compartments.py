"""``preschool compartments EXPERIMENT.yaml``: an alias of ``preschool run`` kept for old command lines.

Compartmentalization experiments and dataset audits are ordinary experiments
since issue 13 (derived datasets ``compartmented``/``shifted``, arm callbacks
``compartment_model``/``infonce``, report sections; docs/compartments.md), so
this runs the one runner; ``--report-only`` is ``--only report``. A YAML in
the retired schema stops with a message saying how to migrate it.
"""

from __future__ import annotations

from .run import add_arguments as run_arguments, run as run_experiment

HELP = "alias of `preschool run` for compartmentalization experiments and dataset audits"
ORDER = 80  # its place in `preschool --help`
DESCRIPTION = __doc__


def add_arguments(p) -> None:
    run_arguments(p)
    p.add_argument("--report-only", action="store_true", help="= --only report: analyse what exists")


def run(args) -> int:
    if args.report_only:
        args.only = ["report"]
    return run_experiment(args)
