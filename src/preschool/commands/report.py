"""``preschool report``: rebuild an experiment's report from what is on disk."""

from __future__ import annotations

HELP = "write report.md, results.json and plots for an experiment (from its results on disk)"
ORDER = 70  # its place in `preschool --help`
DESCRIPTION = """\
Rebuild the report of an experiment from its run folders: final-checkpoint
tables (mean ± SD over seeds), the difference from the baseline arm with its
seed-level verdict (a Student-t interval over the seed pairs; "not testable
at this scale" near chance; equivalence against report.equivalence) and the
verify-ppt one-SD rule beside it, and plots of every metric against PT
tokens. Safe to run while arms are still training.

With --from-results, re-render a study from its results.json alone (no run
folders, no training): the stored curves of every run are read with today's
report rules (verdicts, token-efficiency crossing rule, ladder statistics) and
report.md, results.json and plots are written again beside it (or under --out),
keeping the stored config and code version as the provenance; sections that read
run files (the compartments sections) re-render from what results.json keeps of
them (sections.<name>.inputs). What results.json does not hold is refused in one
line: the retired compartments runner's files, a section from before its inputs
were kept (or one that only reads run files), a ladder written before it stored
each rung's numbers, a baseline@<step> efficiency target.

example:
  preschool report examples/quickstart.yaml
  preschool report examples/compartments_slowdown.yaml   # its slowdown, plateau, similarity sections too
  preschool report --from-results docs/results/ppt_retrieval/results.json
  make rerender                                          # every committed study under docs/results/
"""


def add_arguments(p) -> None:
    p.add_argument("config", nargs="?", help="experiment YAML that produced the runs (not with --from-results)")
    p.add_argument("--out", help="experiment folder (default: the config's `out`, else runs/<name>); with "
                                 "--from-results, the folder to write the re-rendered report into (default: the "
                                 "folder that file is in)")
    p.add_argument("--from-results", metavar="RESULTS_JSON",
                   help="re-render report.md, results.json and plots from this results.json alone, without the "
                        "run folders (default: off, the report reads the runs of CONFIG)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value (repeatable), e.g. --set report.baseline=pt_only")


def run(args) -> int:
    from ..analysis.report import write_report
    from ..errors import ConfigError, DataError
    from ..layout import ARMS
    from ..experiment import load_experiment

    if args.from_results:
        if args.config or args.overrides:
            raise ConfigError("--from-results", "re-renders from the stored config alone: give no CONFIG or --set")
        from ..rerender import rerender

        print(rerender(args.from_results, args.out))
        return 0
    if not args.config:
        raise ConfigError("config", "give the experiment YAML (or --from-results RESULTS_JSON)")

    overrides = list(args.overrides) + ([f"out={args.out}"] if args.out else [])
    exp = load_experiment(args.config, overrides)
    view = exp.report_view().cfg
    if not (view.runs_root / ARMS).is_dir():  # a report of nothing would call every run "unfinished"
        raise DataError(f"{view.runs_root}: holds no runs of experiment {view.name!r} (no {ARMS}/ folder); the "
                        "report reads the runs `preschool run` wrote there: check --out (or the config's `out`)")
    print(write_report(exp))  # a ladder: its largest rung's tables and the ladder section
    return 0
