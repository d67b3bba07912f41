"""``preschool run``: the whole experiment (prepare -> train arms -> evaluate -> report)."""

from __future__ import annotations

HELP = "run an experiment YAML end to end: data, every arm, evaluations, report"
ORDER = 0  # its place in `preschool --help`
DESCRIPTION = """\
Run an experiment end to end. Every step is resumable: rerunning the same
command skips prepared data, finished arms and cached evaluations, and
continues an interrupted arm from its last checkpoint with the same data
order, so the final numbers are the same as an uninterrupted run. The output folder is
locked while the run lasts (<out>/.preschool.lock): a second run or prepare of the
same config waits for it, then reuses what it built; one of another config stops
with a message naming this process; a lock left by a killed process on this host
is taken over with a warning.

Prepared data is reused only when it was built from the same spec. A dataset
prepared from another spec (a changed data.<name> field, seq_len, seed, corpus)
stops the run before anything is written, naming the dataset and the field;
--rebuild replaces it, unless an arm x seed already trained on it (that stops
the run too, before any data is rebuilt: move the run folder away first).

example:
  preschool run examples/quickstart.yaml
  preschool run examples/quickstart.yaml --set seeds=[0,1,2] --out runs/qs3
  preschool run examples/quickstart.yaml --only train --only report
  preschool run examples/quickstart.yaml --arm ppt_dyck --seed 0   # one arm x seed (after prepare)
  preschool run examples/ladder_dyck.yaml --rung r2                 # one rung of a ladder (docs/ladder.md)
  preschool run examples/ladder_dyck.yaml --rung r2 --arm ppt_dyck --seed 1
"""


def add_arguments(p) -> None:
    p.add_argument("config", help="experiment YAML (see examples/)")
    p.add_argument("--out", help="output folder (default: the config's `out`, else runs/<name>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.batch_size=32 (repeatable)")
    p.add_argument("--only", choices=["train", "eval", "report"], action="append",
                   help="run only these steps after preparing the data (repeatable); "
                        "`preschool prepare` builds the data alone")
    p.add_argument("--arm", help="train only this arm (data must be prepared: `preschool prepare` first); "
                   "for cluster jobs, also under torchrun (see `preschool launch`)")
    p.add_argument("--seed", type=int, help="with --arm: the training seed (default: the first of `seeds`)")
    p.add_argument("--rung", help="a ladder's rung: train (and report) only its runs; with --arm, required for a "
                   "ladder (same as --set rung=NAME)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--no-share-prefixes", dest="share_prefixes", action="store_false",
                   help="train every arm from its own start, also those whose leading stages another arm trains "
                        "(by default such an arm branches off that run: the same checkpoints, fewer tokens; "
                        "docs/training.md, 'Shared prefixes are trained once'); to measure what a tree saves")
    p.add_argument("--rebuild", action="store_true",
                   help="replace datasets prepared from another spec (refused when a trained arm used one)")


def run(args) -> int:
    if args.rung is not None:
        args.overrides = list(args.overrides) + [f"rung={args.rung}"]
    if args.arm is not None or args.seed is not None:
        from ..errors import ConfigError
        from ..experiment import load_experiment, run_arm

        if args.arm is None:
            raise ConfigError("--seed", "needs --arm (which arm to train)")
        if args.only:
            raise ConfigError("--only", "not with --arm: one arm x seed is trained, nothing else")
        if args.rebuild:
            raise ConfigError("--rebuild", "not with --arm: the data is prepared first (preschool prepare --rebuild)")
        exp = load_experiment(args.config, list(args.overrides) + ([f"out={args.out}"] if args.out else []))
        run_dir = run_arm(exp, args.arm, args.seed, progress=not args.no_progress, share_prefixes=args.share_prefixes)
        print(f"[preschool] arm {args.arm}: {run_dir}")
        return 0
    from ..device import rank_threads
    from ..experiment import load_experiment, run_experiment
    from ..lock import command_line, experiment_lock

    overrides = list(args.overrides)
    if args.out:
        overrides.append(f"out={args.out}")
    exp = load_experiment(args.config, overrides)
    steps = tuple(args.only) if args.only else ("train", "eval", "report")
    rank_threads()  # in a Slurm job (the report job): torch's threads from the allocation, not the node
    with experiment_lock(exp.cfg, command_line("run", args.config, args.overrides, args.out)):
        run_experiment(exp, progress=not args.no_progress, stages=steps, rebuild=args.rebuild,
                       share_prefixes=args.share_prefixes)
    return 0
