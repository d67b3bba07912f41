"""``preschool prepare``: build an experiment's tokenizer and shard sets without training.

The data package builds datasets and knows nothing of experiments; this command loads one (as ``run``
does) and builds its data."""

from __future__ import annotations

from ..device import allocated_cpus

HELP = "build the tokenizer and token shards of an experiment YAML (no training)"
ORDER = 10  # its place in `preschool --help`
DESCRIPTION = """\
Build the data of an experiment: train (or load) the tokenizer, then write
train/val shard sets for every dataset under <out>/data. Datasets already
built with the same spec are skipped; each is written atomically. A dataset
built from another spec (a changed data.<name> field, seq_len, seed, corpus)
stops prepare before anything is written, naming the dataset and the field;
--rebuild replaces it, unless an arm of the experiment already trained on it
(move that run folder away first). The output
folder is locked while prepare runs (<out>/.preschool.lock, shared with
`preschool run`): a second prepare or run of the same config waits for it and
then reuses what it built; one of another config stops with a message naming
this process (pid, host, start time, command).
Derived datasets (kind: compartmented, shifted...) are built after the datasets they read.
Worker processes build a run YAML's datasets in work units: the bytes are the
same for any --workers, and an interrupted prepare resumes from its finished units.

--executor local|slurm|ray builds the same work units as datatrove tasks
(pip install 'preschool[datatrove]'): local processes, a Slurm job array, or a
Ray cluster; the shards are byte-identical to the default engine's. The output
folder must be on a filesystem every task sees. See docs/corpora.md.

example:
  preschool prepare examples/quickstart.yaml
  preschool prepare examples/quickstart.yaml --set data.pt.tokens=5000000
  preschool prepare examples/quickstart.yaml --workers 8
  preschool prepare examples/quickstart.yaml --executor local --tasks 8
  preschool prepare exp.yaml --executor slurm --tasks 256 --partition cpu --time 4:00:00 \
      --venv /shared/venv/bin/activate
  preschool prepare exp.yaml --executor ray --tasks 64 --ray-address auto
"""


def add_arguments(p) -> None:
    p.add_argument("config", help="experiment YAML (see examples/)")
    p.add_argument("--out", help="output folder (default: the config's `out`, else runs/<name>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value (repeatable)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes (default: the CPUs this process may use, e.g. a Slurm job's "
                        "--cpus-per-task, not the node's core count; the output does not depend on it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--rebuild", action="store_true",
                   help="replace datasets prepared from another spec (refused when a trained arm used one)")
    d = p.add_argument_group("distributed prepare on datatrove (--executor local|slurm|ray)")
    d.add_argument("--executor", choices=["engine", "local", "slurm", "ray"], default="engine",
                   help="who builds the work units: our engine (default) or a datatrove executor")
    d.add_argument("--tasks", type=int, default=None, metavar="N",
                   help="datatrove tasks (default: --workers / the CPU count for local; needed for slurm and ray)")
    d.add_argument("--task-workers", type=int, default=-1, metavar="N",
                   help="datatrove tasks run at once (-1: all; Slurm: the array's %%N limit; default -1)")
    d.add_argument("--partition", help="Slurm partition")
    d.add_argument("--time", help="Slurm time limit per task, e.g. 4:00:00")
    d.add_argument("--cpus-per-task", type=int, default=1, help="Slurm/Ray CPUs per task (default 1)")
    d.add_argument("--mem-per-cpu-gb", type=float, default=2, help="Slurm/Ray memory per CPU in GB (default 2)")
    d.add_argument("--qos", help="Slurm QOS")
    d.add_argument("--job-name", default="preschool-prepare", help="Slurm job name (default preschool-prepare)")
    d.add_argument("--venv", help="Slurm: activate script sourced by each task (e.g. /shared/venv/bin/activate)")
    d.add_argument("--env-command", help="Slurm: shell command that sets up each task's environment")
    d.add_argument("--sbatch-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra #SBATCH option (repeatable), e.g. --sbatch-arg account=myproj")
    d.add_argument("--no-wait", action="store_true",
                   help="Slurm: submit and exit; rerun the same command after the job has finished")
    d.add_argument("--ray-address", help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)")


def executor_options(args):
    """The CLI's ``--executor`` options as a datatrove distributor (None for our own engine)."""
    from ..data.distributed import DatatroveDistributor, ExecutorOptions
    from ..errors import ConfigError

    if args.executor == "engine":
        return None
    if args.tasks is None and args.executor != "local":
        raise ConfigError("--tasks", f"give the number of datatrove tasks for --executor {args.executor}")
    sbatch = {}
    for item in args.sbatch_arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--sbatch-arg", f"expected KEY=VALUE, got {item!r}")
        sbatch[key.lstrip("-")] = value
    return DatatroveDistributor(ExecutorOptions(
        kind=args.executor, tasks=args.tasks or args.workers or allocated_cpus()[0], workers=args.task_workers,
        partition=args.partition, time=args.time, cpus_per_task=args.cpus_per_task,
        mem_per_cpu_gb=args.mem_per_cpu_gb, qos=args.qos, job_name=args.job_name, venv_path=args.venv,
        env_command=args.env_command, sbatch_args=sbatch, wait=not args.no_wait, ray_address=args.ray_address))


def run(args) -> int:
    from ..data.distributed import Submitted
    from ..data.engine import distributed
    from ..experiment import load_experiment, prepare_experiment
    from ..lock import command_line

    dist = executor_options(args)
    overrides = list(args.overrides) + ([f"out={args.out}"] if args.out else [])
    # the CPUs this process was given (a prepare job's --cpus-per-task), not the node's: 4 CPUs of a 128-core
    # node forking 128 workers slows the node's other jobs and this one
    overrides.append(f"workers={args.workers or allocated_cpus()[0]}")
    exp = load_experiment(args.config, overrides)
    try:
        with distributed(dist):
            # prepare_experiment holds the output lock (<out>/.preschool.lock) while it works
            manifest = prepare_experiment(exp, progress=not args.no_progress,
                               command=command_line("prepare", args.config, args.overrides, args.out),
                               rebuild=args.rebuild)
    except Submitted as e:
        print(f"[preschool] {e}")
        return 0
    cfg = exp.cfg
    for name, d in manifest["datasets"].items():
        splits = ", ".join(f"{s}: {m['n_rows']} rows x {m['row_len']}" for s, m in d["splits"].items())
        print(f"{name}: {splits}")
    print(f"tokenizer: vocab {manifest['tokenizer']['vocab_size']}, sha256 {manifest['tokenizer']['sha256'][:12]}")
    print(f"data: {cfg.out_dir / 'data'}")
    for r in (dist.runs if dist is not None else []):
        print(f"datatrove {r['executor']}: {r['units'] or 'all'} units over {r['tasks']} tasks in {r['seconds']} s")
    return 0
