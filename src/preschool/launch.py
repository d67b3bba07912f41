"""Cluster runs: one arm x seed per job (``preschool run --arm``) and Slurm job graphs (``preschool launch``).

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
``<out>/slurm/`` and submits them with ``sbatch --parsable``, chaining the job
ids into ``--dependency``; ``--dry-run`` writes and prints them without
submitting.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import ConfigError, DataError, PreschoolError


# ----------------------------------------------------------------------------- the experiment


@dataclass
class Experiment:
    """An experiment YAML, loaded, with what the launcher needs from it."""

    path: Path
    overrides: list[str]
    cfg: object
    arms: list[str]
    seeds: list[int]
    depends: dict[str, str] = field(default_factory=dict)  # arm -> arm whose final checkpoint it starts from

    @property
    def out_dir(self) -> Path:
        return self.cfg.out_dir


def load(path: str | Path, overrides: list[str] = ()) -> Experiment:
    """Load an experiment YAML (``preschool run``; compartments experiments and audits included)."""
    from .experiment import load_experiment

    path = Path(path)
    cfg = load_experiment(path, list(overrides))
    return Experiment(path, list(overrides), cfg, [a.name for a in cfg.arms], list(cfg.seeds),
                      cfg.arm_dependencies())


def prepare(exp: Experiment, progress: bool = True, command: str | None = None) -> dict:
    """Build the experiment's data once, holding the output lock; returns the data manifest.

    ``command`` is what a second process is told is running (default: the
    ``preschool prepare`` line of ``exp``). A second prepare of the same config
    waits and reuses the data; one of another config into the same ``out``
    raises :class:`DataError` (see :mod:`preschool.lock`).
    """
    from .experiment import prepare as prepare_run
    from .lock import command_line, config_key, output_lock

    command = command or command_line("prepare", str(exp.path), exp.overrides, None)
    with output_lock(exp.out_dir, command, key=config_key(exp.cfg)):
        return prepare_run(exp.cfg, progress)


def _not_prepared(exp: Experiment, why: str) -> DataError:
    cmd = " ".join(["preschool", "prepare", shlex.quote(str(exp.path)),
                    *[f"--set {shlex.quote(o)}" for o in exp.overrides]])
    return DataError(f"{why}; prepare the data first: {cmd}")


def _check_prepared_run(exp: Experiment) -> dict:
    """The data manifest, if every dataset of the config is prepared with its current spec."""
    from . import layout
    from .io import read_json

    data = layout.data_dir(exp.out_dir)
    manifest_path = data / "manifest.json"
    if not manifest_path.is_file():
        raise _not_prepared(exp, f"no prepared data in {data}")
    manifest = read_json(manifest_path)
    for name, spec in exp.cfg.data.items():
        entry = manifest["datasets"].get(name)
        if entry is None or entry.get("spec") != spec.record() or manifest.get("seq_len") != exp.cfg.seq_len:
            raise _not_prepared(exp, f"dataset {name!r} in {data} is missing or was prepared from another spec")
        if not (data / name / "dataset.json").is_file():
            raise _not_prepared(exp, f"dataset {name!r} has no {data / name / 'dataset.json'}")
    return manifest


def run_arm(exp: Experiment, arm: str, seed: int | None = None, progress: bool = True) -> Path:
    """Train one arm x seed of a prepared experiment (``preschool run EXP --arm A [--seed S]``).

    Refuses (``DataError`` naming the prepare command) when the data is not
    prepared, instead of preparing it from every rank of a multi-node job.
    Under ``torchrun`` every rank calls this; the trainer forms the process group.
    """
    from . import layout

    if arm not in exp.arms:
        raise ConfigError("--arm", f"no arm named {arm!r}; the experiment has {exp.arms}")
    seed = exp.seeds[0] if seed is None else int(seed)
    if seed not in exp.seeds:
        raise ConfigError("--seed", f"seed {seed} is not in the experiment's seeds {exp.seeds}")
    from .experiment import train_arms

    _check_prepared_run(exp)
    one = replace(exp.cfg, arms=[a for a in exp.cfg.arms if a.name == arm], seeds=[seed])
    train_arms(one, progress)  # the trainer forms the process group under torchrun
    return layout.run_dir(exp.out_dir, arm, seed)


# ----------------------------------------------------------------------------- Slurm scripts


@dataclass
class SlurmOptions:
    """What every generated job asks Slurm for, and how it starts Python."""

    nodes: int = 1
    gpus_per_node: int = 8
    partition: str | None = None
    time: str | None = None  # HH:MM:SS (or D-HH:MM:SS) per arm job
    account: str | None = None
    port: int = 29500  # c10d rendezvous port on the first node
    cpus_per_task: int | None = None
    setup: list[str] = field(default_factory=list)  # shell lines run first (module load, source venv...)
    sbatch: list[str] = field(default_factory=list)  # extra "#SBATCH" options, e.g. "--qos=high"

    def validate(self) -> None:
        if self.nodes < 1:
            raise ConfigError("--nodes", f"must be >= 1, got {self.nodes}")
        if self.gpus_per_node < 1:
            raise ConfigError("--gpus-per-node", f"must be >= 1, got {self.gpus_per_node}")
        if self.time is not None:
            import re

            if not re.fullmatch(r"(\d+-)?\d{1,2}:\d{2}:\d{2}", self.time):
                raise ConfigError("--time", f"expected HH:MM:SS or D-HH:MM:SS, got {self.time!r}")
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


def _q(x: object) -> str:
    return shlex.quote(str(x))


def _header(exp: Experiment, name: str, opt: SlurmOptions, nodes: int, gpus: int, logs: Path,
            time: str | None) -> list[str]:
    lines = ["#!/bin/bash", f"#SBATCH --job-name={exp.cfg.name}-{name}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --output={logs}/%x-%j.out",
             f"#SBATCH --chdir={Path.cwd()}"]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    for flag, value in (("partition", opt.partition), ("account", opt.account), ("time", time),
                        ("cpus-per-task", opt.cpus_per_task)):
        if value is not None:
            lines.append(f"#SBATCH --{flag}={value}")
    lines += [f"#SBATCH {x}" for x in opt.sbatch]
    lines += ["set -euo pipefail", "export TOKENIZERS_PARALLELISM=false",
              # the Python that ran `preschool launch` (a shared filesystem is assumed), unless setup changes it
              f"export PATH={_q(Path(sys.executable).parent)}:$PATH", *opt.setup]
    return lines


def _cli(exp: Experiment, *args: str) -> str:
    sets = " ".join(f"--set {_q(o)}" for o in exp.overrides)
    return " ".join(["python -m preschool.cli", args[0], _q(exp.path.resolve()), *args[1:]]) + (f" {sets}" if sets else "")


def slurm_jobs(exp: Experiment, opt: SlurmOptions) -> list[Job]:
    """The job graph: prepare -> one job per arm x seed -> eval + report (scripts as text)."""
    opt.validate()
    logs = (exp.out_dir / "slurm" / "logs").resolve()
    prep = Job("prepare", "prepare", "\n".join(
        _header(exp, "prepare", opt, 1, 0, logs, opt.time)
        + ["# builds the tokenizer and every dataset once (output lock: a prepare of the same config waits)",
           "srun --ntasks=1 " + _cli(exp, "prepare", "--no-progress"), ""]))
    jobs = [prep]
    arm_jobs: dict[tuple[str, int], str] = {}
    for seed in exp.seeds:
        for arm in exp.arms:
            name = f"{arm}-seed{seed}"
            torchrun = (f"torchrun --nnodes \"$SLURM_NNODES\" --nproc-per-node {opt.gpus_per_node} "
                        f"--rdzv-backend c10d --rdzv-endpoint \"$head:{opt.port}\" --rdzv-id \"$SLURM_JOB_ID\" "
                        "-m preschool.cli run " + _q(exp.path.resolve()) + f" --arm {_q(arm)} --seed {seed} --no-progress"
                        + "".join(f" --set {_q(o)}" for o in exp.overrides))
            script = _header(exp, name, opt, opt.nodes, opt.gpus_per_node, logs, opt.time) + [
                "# one torchrun per node; c10d rendezvous on the allocation's first node",
                "head=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)",
                f"srun --ntasks=\"$SLURM_NNODES\" --ntasks-per-node=1 {torchrun}", ""]
            after = ["prepare"]
            if arm in exp.depends:
                after.append(f"{exp.depends[arm]}-seed{seed}")
            jobs.append(Job(name, "arm", "\n".join(script), after_ok=after))
            arm_jobs[(arm, seed)] = name
    report_cmd = _cli(exp, "run", "--only", "eval", "--only", "report", "--no-progress")
    jobs.append(Job("report", "report", "\n".join(
        _header(exp, "report", opt, 1, 1, logs, opt.time)
        + ["# evaluates the checkpoints that exist and reports whatever finished",
           f"srun --ntasks=1 {report_cmd}", ""]), after_any=list(arm_jobs.values())))
    return jobs


def write_scripts(exp: Experiment, jobs: list[Job]) -> dict[str, Path]:
    """Write every job's script to ``<out>/slurm/<name>.sbatch``; returns name -> path."""
    from .io import write_text

    folder = exp.out_dir / "slurm"
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    paths = {}
    for j in jobs:
        paths[j.name] = folder / f"{j.name}.sbatch"
        write_text(paths[j.name], j.script)
    return paths


def sbatch_command(job: Job, path: Path, ids: dict[str, str]) -> list[str]:
    """``sbatch --parsable [--dependency=...] script`` with the dependencies' job ids filled in."""
    deps = []
    if job.after_ok:
        deps.append("afterok:" + ":".join(ids[n] for n in job.after_ok))
    if job.after_any:
        deps.append("afterany:" + ":".join(ids[n] for n in job.after_any))
    return ["sbatch", "--parsable"] + ([f"--dependency={','.join(deps)}"] if deps else []) + [str(path)]


def submit(jobs: list[Job], paths: dict[str, Path], dry_run: bool = False) -> dict[str, str]:
    """Submit in dependency order; returns name -> Slurm job id (``$<name>`` placeholders when dry)."""
    ids: dict[str, str] = {}
    if not dry_run and shutil.which("sbatch") is None:
        raise ConfigError("--slurm", "sbatch not found on PATH (run on a Slurm login node, or use --dry-run)")
    for j in jobs:
        cmd = sbatch_command(j, paths[j.name], ids)
        if dry_run:
            ids[j.name] = f"${{{j.name.replace('-', '_').upper()}_ID}}"
            print(" ".join(_q(c) if not c.startswith("--dependency") else c for c in cmd))
            continue
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise PreschoolError(f"sbatch failed for {paths[j.name]} (exit {res.returncode}): "
                                 f"{res.stderr.strip() or res.stdout.strip()}; jobs submitted so far: {ids}")
        # --parsable prints "jobid" or "jobid;cluster"
        ids[j.name] = res.stdout.strip().splitlines()[-1].split(";")[0]
        print(f"[preschool] submitted {j.name}: job {ids[j.name]}")
    return ids


# ----------------------------------------------------------------------------- CLI

HELP = "write (and submit) Slurm jobs for an experiment: prepare -> one job per arm x seed -> report"
DESCRIPTION = """\
Run an experiment on a Slurm cluster: writes <out>/slurm/*.sbatch (a prepare
job, one multi-node torchrun job per arm x seed that waits for it, and an
eval+report job that waits for all arms and reports whatever finished), then
submits them with sbatch. With --dry-run nothing is submitted: the scripts are
written and the sbatch commands printed. See docs/scale.md.

example:
  preschool launch examples/paper/verify_ppt_1b.yaml --slurm --nodes 2 --gpus-per-node 8 \\
      --partition gpu --time 48:00:00 --account myproj
  preschool launch examples/quickstart.yaml --slurm --gpus-per-node 1 --dry-run
"""


def add_arguments(p) -> None:
    p.add_argument("config", help="experiment YAML (see examples/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value in every job (repeatable)")
    p.add_argument("--slurm", action="store_true", help="target Slurm (the only scheduler supported)")
    p.add_argument("--nodes", type=int, default=1, help="nodes per arm job (default 1)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs (= torchrun processes) per node (default 8)")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--time", help="time limit of each job, HH:MM:SS or D-HH:MM:SS")
    p.add_argument("--account", help="Slurm account")
    p.add_argument("--port", type=int, default=29500, help="rendezvous port on each job's first node")
    p.add_argument("--cpus-per-task", type=int, help="CPUs per node task (data loading, prepare)")
    p.add_argument("--setup", action="append", default=[], metavar="SHELL",
                   help="shell line run at the top of every job, e.g. 'module load cuda' (repeatable)")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="extra #SBATCH option for every job, e.g. --sbatch=--qos=high (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="write the scripts and print sbatch commands; submit nothing")


def run(args) -> int:
    if not args.slurm:
        raise ConfigError("--slurm", "say which scheduler: only --slurm is supported (see docs/scale.md for "
                          "multi-node torchrun without a scheduler)")
    exp = load(args.config, args.overrides)
    opt = SlurmOptions(args.nodes, args.gpus_per_node, args.partition, args.time, args.account, args.port,
                       args.cpus_per_task, list(args.setup), list(args.sbatch))
    jobs = slurm_jobs(exp, opt)
    paths = write_scripts(exp, jobs)
    print(f"[preschool] {len(jobs)} job scripts in {exp.out_dir / 'slurm'}: prepare, "
          f"{len(jobs) - 2} arm x seed job(s) on {opt.nodes} node(s) x {opt.gpus_per_node} GPU(s), report")
    if args.dry_run:
        for j in jobs:
            print(f"\n# ---- {paths[j.name]}\n{j.script}")
    submit(jobs, paths, dry_run=args.dry_run)
    return 0
