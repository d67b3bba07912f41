"""``preschool report``: rebuild an experiment's report from what is on disk."""

from __future__ import annotations

HELP = "write report.md, results.json and plots for an experiment (from its results on disk)"
DESCRIPTION = """\
Rebuild the report of an experiment from its run folders: final-checkpoint
tables (mean ± SD over seeds), the per-checkpoint difference from the
baseline arm with the one-SD stable-gain rule, and plots of every metric
against PT tokens. Safe to run while arms are still training.

example:
  preschool report examples/quickstart.yaml
  preschool report examples/compartments_slowdown.yaml   # its slowdown, plateau, similarity sections too
"""


def add_arguments(p) -> None:
    p.add_argument("config", help="experiment YAML that produced the runs")
    p.add_argument("--out", help="experiment folder (default: the config's `out`, else runs/<name>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value (repeatable), e.g. --set report.baseline=pt_only")


def run(args) -> int:
    from .analysis.report import write_report
    from .experiment import load_experiment

    overrides = list(args.overrides) + ([f"out={args.out}"] if args.out else [])
    cfg = load_experiment(args.config, overrides)
    print(write_report(cfg.report_view()))  # a ladder: its largest rung's tables and the ladder section
    return 0
