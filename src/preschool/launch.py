"""Slurm job graphs for an experiment (``preschool launch``): the scripts, what is current, the submission.

The jobs run the runner's commands (:mod:`preschool.experiment`: ``preschool
prepare``, ``preschool run --arm A --seed S``, ``preschool run --only eval
--only report``); this module only writes and submits them.

An experiment on a cluster is three kinds of job:

1. **prepare** (one node, no GPU needed): ``preschool prepare EXP.yaml`` builds the
   tokenizer and every dataset once, holding the output folder's lock
   (:mod:`preschool.lock`): a second prepare of the same config waits, then
   finds the data up to date; one of another config into the same folder stops
   with an error naming the first.
2. **one job per arm x seed**, each ``afterok`` on prepare (and, for an arm
   whose callback starts from another arm's run, e.g. ``compartment_model:
   {init_from: c1}``, on that arm's job of the same seed): ``srun`` starts one
   ``torchrun`` per node; torchrun's c10d rendezvous on the first node of the
   allocation (port ``--port``) forms the process group, ``--rdzv-id`` is the
   Slurm job id. Each job writes only its own run folder
   (``<out>/arms/<arm>/seed<k>``), so arms can run concurrently; a preempted
   job resubmitted with the same script resumes from its last checkpoint.
3. **eval + report**, ``afterany`` on every arm job: evaluates whatever
   checkpoints exist and writes the report from whatever finished (unfinished
   arms are marked as such in the report).

``preschool launch EXP.yaml --slurm`` writes these scripts under
``<out>/slurm/`` (each checked with ``bash -n``) and submits, with ``sbatch
--parsable``, the jobs whose outputs are not already complete and current
(:func:`current_jobs`), chaining the job ids into ``--dependency``; a launch
stops at the first sbatch that fails or prints no job id, cancelling what it
had submitted. ``--dry-run`` writes the scripts and prints the same decision
and the sbatch commands without submitting. Hardware per job comes from
:class:`SlurmOptions` (``--gpus-per-node 0``: CPU jobs); every job sets
``--cpus-per-task``, and each rank runs ``CPUs / ranks per node`` torch threads
(:func:`preschool.experiment.rank_threads`).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import ConfigError, DataError, PreschoolError
# the runner (experiment.py) loads the experiment and says whether its data is prepared; this module only
# writes and submits the jobs that run its commands
from .experiment import ExperimentFile, require_prepared, load_experiment_file


# ----------------------------------------------------------------------------- Slurm scripts

CPUS_PER_PROCESS = 4  # default CPUs a job asks per training process (data loading + the main thread)
# what `sbatch --parsable` prints: "jobid" or "jobid;cluster"
_JOB_ID = re.compile(r"(\d+)(;[\w.-]+)?")


@dataclass
class SlurmOptions:
    """What the generated jobs ask Slurm for, and how they start Python.

    ``gpus_per_node`` 0 makes every job a CPU job (no ``--gpus-per-node`` line);
    ``procs_per_node`` is the number of torchrun processes per node (default: one
    per GPU, one on CPU); ``cpus_per_task`` is the CPUs of each node's task, which
    runs torchrun and its processes (default :data:`CPUS_PER_PROCESS` per
    process). The prepare and the eval + report jobs run on one node and ask
    ``report_gpus`` GPUs (default none: data building and the evaluators, which
    the runner runs on CPU, need none).
    """

    nodes: int = 1
    gpus_per_node: int = 8
    partition: str | None = None
    time: str | None = None  # HH:MM:SS (or D-HH:MM:SS) per arm job
    account: str | None = None
    port: int = 29500  # c10d rendezvous port on the first node
    cpus_per_task: int | None = None
    setup: list[str] = field(default_factory=list)  # shell lines run first (module load, source venv...)
    sbatch: list[str] = field(default_factory=list)  # extra "#SBATCH" options, e.g. "--qos=high"
    procs_per_node: int | None = None
    mem: str | None = None  # per node, Slurm's --mem syntax (e.g. 64G)
    qos: str | None = None
    constraint: str | None = None
    report_gpus: int = 0
    report_time: str | None = None  # the prepare and report jobs' limit (default: time)

    @property
    def procs(self) -> int:
        """torchrun processes per node."""
        return self.procs_per_node or (self.gpus_per_node if self.gpus_per_node > 0 else 1)

    def cpus(self, processes: int) -> int:
        """CPUs per task for a job running ``processes`` training processes per node."""
        return self.cpus_per_task or CPUS_PER_PROCESS * processes

    def validate(self) -> None:
        for flag, value, low in (("--nodes", self.nodes, 1), ("--gpus-per-node", self.gpus_per_node, 0),
                                 ("--procs-per-node", self.procs_per_node, 1),
                                 ("--cpus-per-task", self.cpus_per_task, 1), ("--report-gpus", self.report_gpus, 0)):
            if value is not None and value < low:
                raise ConfigError(flag, f"must be >= {low}, got {value}")
        if self.gpus_per_node and self.procs_per_node and self.procs_per_node != self.gpus_per_node:
            raise ConfigError("--procs-per-node", f"with GPUs it is one process per GPU ({self.gpus_per_node}); "
                              f"got {self.procs_per_node}")
        for flag, t in (("--time", self.time), ("--report-time", self.report_time)):
            if t is not None and not re.fullmatch(r"(\d+-)?\d{1,2}:\d{2}:\d{2}", t):
                raise ConfigError(flag, f"expected HH:MM:SS or D-HH:MM:SS, got {t!r}")
        if self.mem is not None and not re.fullmatch(r"\d+[KMGT]?", self.mem):
            raise ConfigError("--mem", f"expected a size like 64G or 500M, got {self.mem!r}")
        if not 1 <= self.port <= 65535:
            raise ConfigError("--port", f"must be a TCP port, got {self.port}")


@dataclass
class Job:
    """One sbatch script and the jobs it waits for."""

    name: str  # also the script's file stem
    role: str  # prepare | arm | report
    script: str
    after_ok: list[str] = field(default_factory=list)
    after_any: list[str] = field(default_factory=list)
    run: tuple | None = None  # an arm job's (rung or None, arm, seed)


def _q(x: object) -> str:
    return shlex.quote(str(x))


def _header(exp: ExperimentFile, name: str, opt: SlurmOptions, nodes: int, gpus: int, cpus: int, logs: Path,
            time: str | None) -> list[str]:
    lines = ["#!/bin/bash", f"#SBATCH --job-name={exp.cfg.name}-{name}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --cpus-per-task={cpus}",
             f"#SBATCH --output={logs}/%x-%j.out", f"#SBATCH --chdir={Path.cwd()}"]
    if gpus:  # a CPU job asks no GPU: a CPU partition refuses any gres request
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    for flag, value in (("mem", opt.mem), ("partition", opt.partition), ("account", opt.account),
                        ("qos", opt.qos), ("constraint", opt.constraint), ("time", time)):
        if value is not None:
            lines.append(f"#SBATCH --{flag}={value}")
    lines += [f"#SBATCH {x}" for x in opt.sbatch]
    lines += ["set -euo pipefail", "export TOKENIZERS_PARALLELISM=false",
              # the Python that ran `preschool launch` (a shared filesystem is assumed), unless setup changes it
              f"export PATH={_q(Path(sys.executable).parent)}:$PATH", *opt.setup]
    return lines


# srun passes the job's CPUs to its task explicitly: Slurm 22.05-23.02's srun does not inherit
# --cpus-per-task from sbatch, and under task/affinity the task would be bound to one CPU
_SRUN = 'srun --ntasks-per-node=1 --cpus-per-task="$SLURM_CPUS_PER_TASK"'


def _cli(exp: ExperimentFile, *args: str) -> str:
    sets = " ".join(f"--set {_q(o)}" for o in exp.overrides)
    return " ".join(["python -m preschool.cli", args[0], _q(exp.path.resolve()), *args[1:]]) + (f" {sets}" if sets else "")


def report_stamp(exp: ExperimentFile) -> Path:
    """The file the report job writes once its eval + report succeeded: the config key it reported."""
    return exp.out_dir / "slurm" / "report.done"


def slurm_jobs(exp: ExperimentFile, opt: SlurmOptions) -> list[Job]:
    """The job graph: prepare -> one job per arm x seed (a ladder: per rung x arm x seed, ``--rung``) ->
    eval + report (scripts as text)."""
    from .lock import config_key

    opt.validate()
    logs = (exp.out_dir / "slurm" / "logs").resolve()
    side_time = opt.report_time or opt.time
    prep = Job("prepare", "prepare", "\n".join(
        _header(exp, "prepare", opt, 1, 0, opt.cpus(1), logs, side_time)
        + ["# builds the tokenizer and every dataset once (output lock: a prepare of the same config waits)",
           f"{_SRUN} --ntasks=1 " + _cli(exp, "prepare", "--no-progress"), ""]))
    jobs = [prep]
    arm_jobs: dict[tuple, str] = {}
    # a ladder: one job per rung x arm x seed, named <rung>-<arm>-seed<k>, each with --rung
    for rung, seed, arm in [(r, s, a) for r in exp.rungs for s in exp.seeds for a in exp.arms]:
        named = rung is not None and exp.cfg.rung is None  # a view of one rung (--set rung=R) already says it
        prefix, rung_arg = (f"{rung}-", f" --rung {_q(rung)}") if named else ("", "")
        name = f"{prefix}{arm}-seed{seed}"
        torchrun = (f"torchrun --nnodes \"$SLURM_NNODES\" --nproc-per-node {opt.procs} "
                    f"--rdzv-backend c10d --rdzv-endpoint \"$head:{opt.port}\" --rdzv-id \"$SLURM_JOB_ID\" "
                    "-m preschool.cli run " + _q(exp.path.resolve()) + f" --arm {_q(arm)} --seed {seed}{rung_arg} "
                    "--no-progress" + "".join(f" --set {_q(o)}" for o in exp.overrides))
        script = _header(exp, name, opt, opt.nodes, opt.gpus_per_node, opt.cpus(opt.procs), logs, opt.time) + [
            "# one torchrun per node; c10d rendezvous on the allocation's first node",
            "head=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)",
            f"{_SRUN} --ntasks=\"$SLURM_NNODES\" {torchrun}", ""]
        after = ["prepare"]
        if arm in exp.depends:
            after.append(f"{prefix}{exp.depends[arm]}-seed{seed}")
        jobs.append(Job(name, "arm", "\n".join(script), after_ok=after, run=(rung, arm, seed)))
        arm_jobs[(rung, arm, seed)] = name
    report_cmd = _cli(exp, "run", "--only", "eval", "--only", "report", "--no-progress")
    stamp = report_stamp(exp).resolve()
    jobs.append(Job("report", "report", "\n".join(
        _header(exp, "report", opt, 1, opt.report_gpus, opt.cpus(1), logs, side_time)
        + ["# evaluates the checkpoints that exist and reports whatever finished",
           f"{_SRUN} --ntasks=1 {report_cmd}",
           "# reached only when the report succeeded (set -e): a later launch skips a current report",
           f"printf '%s\\n' {config_key(exp.cfg)} > {_q(stamp)}.tmp && mv {_q(stamp)}.tmp {_q(stamp)}", ""]),
        after_any=list(arm_jobs.values())))
    return jobs


def write_scripts(exp: ExperimentFile, jobs: list[Job]) -> dict[str, Path]:
    """Write every job's script to ``<out>/slurm/<name>.sbatch``; returns name -> path.

    Each script is checked with ``bash -n`` first: one that does not parse (an
    unbalanced quote in a ``--setup`` line) raises :class:`ConfigError` and no
    script is written.
    """
    from .io import write_text

    folder = exp.out_dir / "slurm"
    for j in jobs:
        res = subprocess.run(["bash", "-n"], input=j.script, capture_output=True, text=True)
        if res.returncode != 0:
            why = res.stderr.strip().replace("bash: ", "")
            raise ConfigError("--setup", f"the {j.name} job script does not parse (bash -n: {why}); "
                              "check the --setup lines' quoting")
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    paths = {}
    for j in jobs:
        paths[j.name] = folder / f"{j.name}.sbatch"
        write_text(paths[j.name], j.script)
    return paths


def current_jobs(exp: ExperimentFile, jobs: list[Job]) -> dict[str, str]:
    """The jobs whose outputs are complete and current, name -> why; a later launch submits only the rest.

    prepare: every dataset is prepared with its current spec. An arm x seed: the
    data is current, the run folder has ``DONE`` and its ``config.yaml`` matches
    the config (``check_run_dir``, the check the trainer makes; a run made with
    another config raises :class:`ConfigError` here, before anything is
    submitted). report: no prepare or arm job runs and the last report job wrote
    the current config's key (``<out>/slurm/report.done``) after every run finished.
    """
    from . import layout
    from .lock import config_key
    from .train.run_dir import check_run_dir

    done: dict[str, str] = {}
    try:
        require_prepared(exp)
    except DataError:
        return done  # the data is (re)built, so every arm trains on what prepare makes
    done["prepare"] = "data prepared with the current spec"
    data_dir = layout.data_dir(exp.out_dir)
    finished = []
    for j in jobs:
        if j.role != "arm":
            continue
        rung, arm_name, seed = j.run
        i = exp.arms.index(arm_name)
        arm = exp.cfg.arms[i]
        view = exp.cfg if rung is None else exp.cfg.at_rung(rung)
        run = layout.run_dir(exp.out_dir, arm_name, int(seed), rung)
        # verify "size": compare the manifests' recorded checksums, not rehash every shard on the login node
        tcfg = replace(view.train_config(arm, int(seed), f"arms[{i}]"), verify="size")
        try:
            check_run_dir(tcfg, run, exp.cfg.arm_datasets(arm), layout.tokenizer_dir(data_dir))
        except ConfigError as e:
            raise ConfigError(f"arms[{i}].{e.field}", f"arm {arm_name} seed {seed}: {e.message}") from None
        if layout.is_done(run):
            done[j.name] = f"finished with this config ({run / layout.DONE})"
            finished.append(run / layout.DONE)
    if all(j.name in done for j in jobs if j.role != "report"):
        stamp = report_stamp(exp)
        if (stamp.is_file() and stamp.read_text().strip() == config_key(exp.cfg)
                and all(stamp.stat().st_mtime >= f.stat().st_mtime for f in finished)):
            done["report"] = f"reported this config after every run finished ({stamp})"
    return done


def pending(jobs: list[Job], done: dict[str, str]) -> list[Job]:
    """The jobs still to run, their dependencies on skipped (finished) jobs dropped."""
    out = []
    for j in jobs:
        if j.name not in done:
            out.append(replace(j, after_ok=[n for n in j.after_ok if n not in done],
                               after_any=[n for n in j.after_any if n not in done]))
    return out


def sbatch_command(job: Job, path: Path, ids: dict[str, str]) -> list[str]:
    """``sbatch --parsable [--dependency=...] script`` with the dependencies' job ids filled in."""
    deps = []
    if job.after_ok:
        deps.append("afterok:" + ":".join(ids[n] for n in job.after_ok))
    if job.after_any:
        deps.append("afterany:" + ":".join(ids[n] for n in job.after_any))
    return ["sbatch", "--parsable"] + ([f"--dependency={','.join(deps)}"] if deps else []) + [str(path)]


def parse_job_id(stdout: str) -> str | None:
    """The job id ``sbatch --parsable`` printed (last line ``jobid`` or ``jobid;cluster``), None otherwise."""
    lines = stdout.strip().splitlines()
    m = _JOB_ID.fullmatch(lines[-1].strip()) if lines else None
    return m.group(1) if m else None


def _cancel(ids: dict[str, str]) -> str:
    """Cancel the jobs submitted so far; says what was done (or the scancel line to run by hand)."""
    if not ids:
        return "nothing was submitted"
    line = "scancel " + " ".join(ids.values())
    named = ", ".join(f"{n} ({i})" for n, i in ids.items())
    if shutil.which("scancel") is None:
        return f"submitted before the failure: {named}; scancel is not on PATH, cancel them with: {line}"
    res = subprocess.run(line.split(), capture_output=True, text=True)
    if res.returncode != 0:
        return (f"submitted before the failure: {named}; `{line}` failed ({res.stderr.strip()}), "
                f"cancel them by hand")
    return f"cancelled the jobs already submitted: {named} ({line})"


def submit(jobs: list[Job], paths: dict[str, Path], dry_run: bool = False) -> dict[str, str]:
    """Submit in dependency order; returns name -> Slurm job id (``$<name>`` placeholders when dry).

    A job sbatch refuses, or whose output is no job id, stops the launch: the
    jobs already submitted are cancelled (``scancel``; the line is printed when
    that is not possible) and :class:`PreschoolError` names them.
    """
    ids: dict[str, str] = {}
    if jobs and not dry_run and shutil.which("sbatch") is None:
        raise ConfigError("--slurm", "sbatch not found on PATH (run on a Slurm login node, or use --dry-run)")
    for j in jobs:
        cmd = sbatch_command(j, paths[j.name], ids)
        if dry_run:
            ids[j.name] = f"${{{j.name.replace('-', '_').upper()}_ID}}"
            print(" ".join(_q(c) if not c.startswith("--dependency") else c for c in cmd))
            continue
        res = subprocess.run(cmd, capture_output=True, text=True)
        job_id = parse_job_id(res.stdout) if res.returncode == 0 else None
        if job_id is None:
            said = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()
            why = (f"exit {res.returncode}" if res.returncode else "printed no job id") + f": {' | '.join(said)}"
            raise PreschoolError(f"sbatch failed for {paths[j.name]} ({why}); {_cancel(ids)}")
        ids[j.name] = job_id
        print(f"[preschool] submitted {j.name}: job {job_id}")
    return ids


def launch(exp: ExperimentFile, opt: SlurmOptions, dry_run: bool = False) -> dict[str, str]:
    """Write the scripts, skip the jobs whose outputs are current, submit the rest; name -> job id.

    A dry run prints the same decision and the sbatch commands, submitting nothing.
    """
    jobs = slurm_jobs(exp, opt)
    paths = write_scripts(exp, jobs)
    done = current_jobs(exp, jobs)
    todo = pending(jobs, done)
    hw = (f"{opt.nodes} node(s) x {opt.gpus_per_node} GPU(s)" if opt.gpus_per_node
          else f"{opt.nodes} node(s) x {opt.procs} CPU process(es)")
    print(f"[preschool] {len(jobs)} job scripts in {exp.out_dir / 'slurm'}: prepare, "
          f"{len(jobs) - 2} arm x seed job(s) on {hw}, report")
    for name, why in done.items():
        print(f"[preschool] skip {name}: {why}")
    if not todo:
        print("[preschool] nothing to run: every job's outputs are complete and current")
        return {}
    print(f"[preschool] {'would run' if dry_run else 'to run'}: {', '.join(j.name for j in todo)}")
    if dry_run:
        for j in todo:
            print(f"\n# ---- {paths[j.name]}\n{j.script}")
    return submit(todo, paths, dry_run=dry_run)


# ----------------------------------------------------------------------------- CLI

HELP = "write (and submit) Slurm jobs for an experiment: prepare -> one job per arm x seed -> report"
DESCRIPTION = """\
Run an experiment on a Slurm cluster: writes <out>/slurm/*.sbatch (a prepare
job, one multi-node torchrun job per arm x seed that waits for it, and an
eval+report job that waits for all arms and reports whatever finished), then
submits those whose outputs are not already complete and current (a second
launch of a finished experiment submits nothing). With --dry-run nothing is
submitted: the scripts are written and the sbatch commands printed.
--gpus-per-node 0 makes CPU jobs. See docs/scale.md.

example:
  preschool launch examples/paper/verify_ppt_1b.yaml --slurm --nodes 2 --gpus-per-node 8 \\
      --cpus-per-task 64 --partition gpu --time 48:00:00 --account myproj
  preschool launch examples/quickstart.yaml --slurm --gpus-per-node 0 --cpus-per-task 8 \\
      --partition cpu --mem 16G --dry-run
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
                   help=f"CPUs per node for each job's task (default {CPUS_PER_PROCESS} per training process); "
                        "torch's threads per rank = these CPUs / processes per node")
    p.add_argument("--mem", help="memory per node, e.g. 64G (default: the partition's)")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--account", help="Slurm account")
    p.add_argument("--qos", help="Slurm quality of service")
    p.add_argument("--constraint", help="Slurm node features, e.g. a100")
    p.add_argument("--time", help="time limit of each arm job, HH:MM:SS or D-HH:MM:SS")
    p.add_argument("--report-time", help="time limit of the prepare and report jobs (default: --time)")
    p.add_argument("--report-gpus", type=int, default=0,
                   help="GPUs of the eval + report job (default 0: the evaluators run on CPU; for a partition "
                        "that insists on a GPU)")
    p.add_argument("--port", type=int, default=29500, help="rendezvous port on each job's first node")
    p.add_argument("--setup", action="append", default=[], metavar="SHELL",
                   help="shell line run at the top of every job, e.g. 'module load cuda' (repeatable)")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="extra #SBATCH option for every job, e.g. --sbatch=--exclusive (repeatable)")
    p.add_argument("--dry-run", action="store_true",
                   help="write the scripts and print what would be submitted; submit nothing")


def options(args) -> SlurmOptions:
    """The SlurmOptions of parsed ``launch`` arguments."""
    return SlurmOptions(nodes=args.nodes, gpus_per_node=args.gpus_per_node, partition=args.partition,
                        time=args.time, account=args.account, port=args.port, cpus_per_task=args.cpus_per_task,
                        setup=list(args.setup), sbatch=list(args.sbatch), procs_per_node=args.procs_per_node,
                        mem=args.mem, qos=args.qos, constraint=args.constraint, report_gpus=args.report_gpus,
                        report_time=args.report_time)


def run(args) -> int:
    if not args.slurm:
        raise ConfigError("--slurm", "say which scheduler: only --slurm is supported (see docs/scale.md for "
                          "multi-node torchrun without a scheduler)")
    opt = options(args)
    opt.validate()
    launch(load_experiment_file(args.config, args.overrides), opt, dry_run=args.dry_run)
    return 0
