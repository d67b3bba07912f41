"""``preschool launch``: its flags, and what it runs (a launch, or ``--status``)."""

from __future__ import annotations

from ..errors import ConfigError
from ..experiment import load_experiment
from ..launch.launcher import launch
from ..launch.options import CPUS_PER_PROCESS, PORT_SPAN, SlurmOptions
from ..launch.status import status

HELP = "write (and submit) Slurm jobs for an experiment: prepare -> one job per arm x seed -> report"
ORDER = 110  # its place in `preschool --help`
DESCRIPTION = """\
Run an experiment on a Slurm cluster: writes <out>/slurm/*.sbatch (a prepare
job, one multi-node torchrun job per arm x seed that waits for it, and an
eval+report job that waits for all arms and reports whatever finished), then
checks the request against the partition (sinfo: CPUs, memory, GPUs, nodes,
time limit) and puts each job in one state: done, queued with the current
script, queued with a stale one (what it reads of the config, a flag or the
environment changed: a train.lr change leaves prepare queued), never-runnable
(it waits on a job that failed), failed, absent, or removed (a job of this
folder whose arm, seed or rung was taken out of the config; squeue, by the
comment each job carries, and <out>/slurm/jobs.json). It prints every job's
state and what it does: done and queued jobs are kept, stale and never-runnable
ones are cancelled and submitted again with the pending jobs that wait on them,
failed and absent ones are submitted (a failed arm resumes from its last
checkpoint), removed ones are cancelled. Two launches of one folder at once
take turns. A second launch of a finished experiment submits nothing. With --dry-run
nothing is cancelled or submitted: the scripts are written and a submission
script runnable as it is printed (and written to <out>/slurm/submit.sh).
--status shows each job's state, Slurm's reason for a pending one and a failed
job's log tail (from jobs.json and the run folders when the controller cannot
be reached). --gpus-per-node 0 makes CPU jobs. See docs/scale.md.

example:
  preschool launch examples/paper/verify_ppt_1b.yaml --slurm --nodes 2 --gpus-per-node 8 \\
      --cpus-per-task 64 --partition gpu --time 48:00:00 --account myproj
  preschool launch examples/quickstart.yaml --slurm --gpus-per-node 0 --cpus-per-task 8 \\
      --partition cpu --mem 16G --dry-run
  preschool launch examples/quickstart.yaml --status
"""


def add_arguments(p) -> None:
    p.add_argument("config", help="experiment YAML (see examples/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value in every job (repeatable)")
    p.add_argument("--slurm", action="store_true", help="target Slurm (the only scheduler supported)")
    p.add_argument("--nodes", type=int, default=1, help="nodes per arm job (default 1)")
    p.add_argument("--gpus-per-node", type=int, default=8,
                   help="GPUs (= torchrun processes) per node (default 8); 0: CPU jobs")
    p.add_argument("--procs-per-node", type=int,
                   help="CPU jobs: torchrun processes per node (default 1; with GPUs one per GPU)")
    p.add_argument("--cpus-per-task", type=int,
                   help=f"CPUs per node for each job's task (default {CPUS_PER_PROCESS} per training process; "
                        f"the prepare and report jobs get all of them, default {CPUS_PER_PROCESS}); torch's threads "
                        "per rank = these CPUs / processes per node")
    p.add_argument("--mem", help="memory per node, e.g. 64G (default: the partition's)")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--account", help="Slurm account")
    p.add_argument("--qos", help="Slurm quality of service")
    p.add_argument("--constraint", help="Slurm node features, e.g. a100")
    p.add_argument("--time", help="time limit of each arm job, HH:MM:SS or D-HH:MM:SS")
    p.add_argument("--report-time", help="time limit of the prepare and report jobs (default: --time)")
    p.add_argument("--report-gpus", type=int, default=None,
                   help="GPUs of the eval + report job (default: 1 when the arm jobs have GPUs, since the "
                        "evaluators then run on CUDA; 0 with --gpus-per-node 0); the prepare job asks none")
    p.add_argument("--port", type=int, default=29500,
                   help="multi-node jobs: base rendezvous port on the job's first node, plus the job id mod "
                        f"{PORT_SPAN} (one-node jobs use torchrun --standalone; default 29500)")
    p.add_argument("--setup", action="append", default=[], metavar="SHELL",
                   help="shell line run at the top of every job, e.g. 'module load cuda' (repeatable)")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="extra #SBATCH option for every job, e.g. --sbatch=--exclusive (repeatable)")
    p.add_argument("--dry-run", action="store_true",
                   help="write the scripts and print what would be submitted, and a submission script runnable "
                        "as it is (<out>/slurm/submit.sh); submit nothing")
    p.add_argument("--status", action="store_true",
                   help="show each job's state instead of launching: done, queued or running (with Slurm's "
                        "reason; stale or never-runnable ones said so), or ended without finishing (with its log's "
                        "last lines); with the controller unreachable, what jobs.json and the run folders say")


def options(args) -> SlurmOptions:
    """The SlurmOptions of parsed ``launch`` arguments."""
    return SlurmOptions(nodes=args.nodes, gpus_per_node=args.gpus_per_node, partition=args.partition,
                        time=args.time, account=args.account, port=args.port, cpus_per_task=args.cpus_per_task,
                        setup=list(args.setup), sbatch=list(args.sbatch), procs_per_node=args.procs_per_node,
                        mem=args.mem, qos=args.qos, constraint=args.constraint, report_gpus=args.report_gpus,
                        report_time=args.report_time)


def run(args) -> int:
    if args.status:
        for line in status(load_experiment(args.config, args.overrides)):
            print(line)
        return 0
    if not args.slurm:
        raise ConfigError("--slurm", "say which scheduler: only --slurm is supported (see docs/scale.md for "
                          "multi-node torchrun without a scheduler)")
    opt = options(args)
    opt.validate()
    launch(load_experiment(args.config, args.overrides), opt, dry_run=args.dry_run)
    return 0
