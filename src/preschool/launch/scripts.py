"""The text of each job's sbatch script, the names Slurm knows it by, and where the scripts are written.

Every script starts with the same header (:func:`header`: the ``#SBATCH`` lines of the job's
hardware, its ``--comment``, by which a relaunch finds it in ``squeue``, the environment preschool
reads (:func:`job_environment`) and the ``--setup`` lines), then runs one runner command under
``srun``: ``preschool prepare`` (:func:`prepare_script`), one arm x seed's ``torchrun ... preschool run
--arm A --seed S`` (:func:`arm_script`) or ``preschool run --only eval --only report``
(:func:`report_script`), each with the experiment's ``--set`` overrides (``overrides``: the launcher
also renders each script without them, for the job's identity). A script that stops before its
command's own output (a failing ``--setup`` line) says where in its log. Which jobs there are and what
each waits for is :mod:`preschool.launch.jobs`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from .. import layout
from ..errors import ConfigError
from ..experiment import Experiment
from ..slurm_state import Job
from .options import PORT_SPAN, SlurmOptions


def shell_word(x: object) -> str:
    """``x`` quoted for bash."""
    return shlex.quote(str(x))


# ----------------------------------------------------------------------------- names Slurm knows

def out_tag(exp: Experiment) -> str:
    """12 hex digits naming the experiment's output folder (its resolved path) in every job's comment:
    two experiments of one name in two folders never see each other's jobs as their own."""
    return hashlib.sha256(str(exp.out_dir.resolve()).encode("utf-8")).hexdigest()[:12]


def job_comment(exp: Experiment, name: str) -> str:
    """``preschool:<out tag>:<job>``: the ``--comment`` of job ``name`` (its script's hash is appended,
    :func:`preschool.slurm_state.with_digest`), which :func:`preschool.slurm_state.read_queue` reads back."""
    return f"preschool:{out_tag(exp)}:{name}"


def slurm_job_name(exp: Experiment, name: str) -> str:
    """The Slurm job name (``--job-name``; also the log's stem, ``%x-%j.out``)."""
    return f"{exp.cfg.name}-{name}"


# ----------------------------------------------------------------------------- where they live

def logs_dir(exp: Experiment) -> Path:
    """``<out>/slurm/logs``: every job's log (``<job name>-<job id>.out``)."""
    return layout.slurm_dir(exp.out_dir) / "logs"


def report_stamp(exp: Experiment) -> Path:
    """The file the report job writes once its eval + report succeeded: the config key it reported."""
    return layout.slurm_dir(exp.out_dir) / "report.done"


def script_paths(exp: Experiment, jobs: list[Job]) -> dict[str, Path]:
    """name -> ``<out>/slurm/<name>.sbatch``, where :func:`write_scripts` writes each job's script."""
    return {j.name: layout.slurm_dir(exp.out_dir) / f"{j.name}.sbatch" for j in jobs}


# ----------------------------------------------------------------------------- the text

def job_environment() -> dict[str, str]:
    """The variables of this environment that decide what a job's ``preschool`` runs: every ``PRESCHOOL_*``
    (``PRESCHOOL_PLUGINS``: plug-ins that may override a preset or a generator) and ``PYTHONPATH``. The job
    scripts export them, so they are part of a job's identity: a relaunch without a plug-in replaces the
    queued jobs that would still load it."""
    return {k: os.environ[k] for k in sorted(os.environ) if k.startswith("PRESCHOOL_") or k == "PYTHONPATH"}


def _step(what: str) -> str:
    """The script line that names what it does next (the exit trap says it if the script stops there)."""
    return f"step={shell_word(what)}"


# a job that stops before its command prints anything (a failing --setup line, under set -e) would leave an
# empty log: the exit trap says where it stopped
_EXIT_TRAP = ("trap 'rc=$?; [ \"$rc\" -eq 0 ] || echo \"[preschool] the job script stopped with exit $rc in $step\" >&2'"
              " EXIT")


def header(exp: Experiment, name: str, opt: SlurmOptions, nodes: int, gpus: int, cpus: int,
           time: str | None) -> list[str]:
    """The lines every job script starts with: ``#SBATCH`` options, strict bash with its exit trap, the Python on
    PATH, :func:`job_environment`, the setup lines."""
    lines = ["#!/bin/bash", f"#SBATCH --job-name={slurm_job_name(exp, name)}",
             f"#SBATCH --comment={job_comment(exp, name)}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --cpus-per-task={cpus}",
             f"#SBATCH --output={logs_dir(exp).resolve()}/%x-%j.out", f"#SBATCH --chdir={opt.chdir or Path.cwd()}"]
    if gpus:  # a CPU job asks no GPU: a CPU partition refuses any gres request
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    for flag, value in (("mem", opt.mem), ("partition", opt.partition), ("account", opt.account),
                        ("qos", opt.qos), ("constraint", opt.constraint), ("time", time)):
        if value is not None:
            lines.append(f"#SBATCH --{flag}={value}")
    lines += [f"#SBATCH {x}" for x in opt.sbatch]
    lines += ["set -euo pipefail", _step("its first lines"), _EXIT_TRAP, "export TOKENIZERS_PARALLELISM=false",
              # the Python that ran `preschool launch` (a shared filesystem is assumed), unless setup changes it
              f"export PATH={shell_word(opt.python_dir or Path(sys.executable).parent)}:$PATH",
              *(f"export {k}={shell_word(v)}" for k, v in job_environment().items())]
    if opt.setup:
        lines += [_step("its --setup lines"), *opt.setup]
    return lines


# srun passes the job's CPUs to its task explicitly: Slurm 22.05-23.02's srun does not inherit
# --cpus-per-task from sbatch, and under task/affinity the task would be bound to one CPU
SRUN = 'srun --ntasks-per-node=1 --cpus-per-task="$SLURM_CPUS_PER_TASK"'


def _sets(overrides: Sequence[str]) -> str:
    """``--set`` overrides as arguments (each job runs the config the launch read)."""
    return "".join(f" --set {shell_word(o)}" for o in overrides)


def _cli(exp: Experiment, overrides: Sequence[str], *args: str) -> str:
    """``python -m preschool.cli CMD EXP.yaml ARGS... --set ...``."""
    return (" ".join(["python -m preschool.cli", args[0], shell_word(exp.path.resolve()), *args[1:]])
            + _sets(overrides))


def prepare_script(exp: Experiment, opt: SlurmOptions, overrides: Sequence[str]) -> str:
    """The prepare job: ``preschool prepare`` on one node, no GPU, the whole ``--cpus-per-task``."""
    return "\n".join(header(exp, "prepare", opt, 1, 0, opt.cpus(1), opt.side_time) + [
        "# builds the tokenizer and every dataset once (output lock: a prepare of the same config waits)",
        _step("preschool prepare"), f"{SRUN} --ntasks=1 " + _cli(exp, overrides, "prepare", "--no-progress"), ""])


def arm_script(exp: Experiment, opt: SlurmOptions, name: str, arm: str, seed: int, rung: str | None,
               overrides: Sequence[str]) -> str:
    """Job ``name``: one run (``arm`` x ``seed``, with ``--rung`` when ``rung`` is given), one torchrun per node."""
    if opt.nodes == 1:
        # torchrun's own rendezvous on a free local port: jobs sharing the node never meet
        rdzv, where = "--standalone --nnodes 1", ["# one torchrun on the one node; its rendezvous is local"]
    else:
        rdzv = ('--nnodes "$SLURM_NNODES" --rdzv-backend c10d --rdzv-endpoint "$head:$port" '
                '--rdzv-id "$SLURM_JOB_ID"')
        where = ["# one torchrun per node; c10d rendezvous on the allocation's first node, at a port of",
                 "# this job's own, so another job whose first node is the same does not join it",
                 "head=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)",
                 f"port=$(( {opt.port} + SLURM_JOB_ID % {PORT_SPAN} ))"]
    rung_arg = f" --rung {shell_word(rung)}" if rung is not None else ""
    torchrun = (f"torchrun {rdzv} --nproc-per-node {opt.procs} "
                "-m preschool.cli run " + shell_word(exp.path.resolve())
                + f" --arm {shell_word(arm)} --seed {seed}{rung_arg} --no-progress" + _sets(overrides))
    return "\n".join(header(exp, name, opt, opt.nodes, opt.gpus_per_node, opt.cpus(opt.procs), opt.time)
                     + [*where, _step("preschool run"), f"{SRUN} --ntasks=\"$SLURM_NNODES\" {torchrun}", ""])


def report_script(exp: Experiment, opt: SlurmOptions, overrides: Sequence[str]) -> str:
    """The eval + report job, which stamps :func:`report_stamp` with the config key once it succeeded."""
    from ..lock import config_key

    stamp = shell_word(report_stamp(exp).resolve())
    report_cmd = _cli(exp, overrides, "run", "--only", "eval", "--only", "report", "--no-progress")
    return "\n".join(header(exp, "report", opt, 1, opt.eval_gpus, opt.cpus(1), opt.side_time) + [
        "# evaluates the checkpoints that exist and reports whatever finished",
        _step("preschool run --only eval --only report"), f"{SRUN} --ntasks=1 {report_cmd}",
        "# reached only when the report succeeded (set -e): a later launch skips a current report",
        f"printf '%s\\n' {config_key(exp.cfg)} > {stamp}.tmp && mv {stamp}.tmp {stamp}", ""])


# ----------------------------------------------------------------------------- checked, then written

def check_scripts(jobs: list[Job]) -> None:
    """Check every job's script with ``bash -n``: one that does not parse (an unbalanced quote in a
    ``--setup`` line) raises :class:`ConfigError`."""
    for j in jobs:
        res = subprocess.run(["bash", "-n"], input=j.script, capture_output=True, text=True)
        if res.returncode != 0:
            why = res.stderr.strip().replace("bash: ", "")
            raise ConfigError("--setup", f"the {j.name} job script does not parse (bash -n: {why}); "
                              "check the --setup lines' quoting")


def write_scripts(exp: Experiment, jobs: list[Job], checked: bool = False) -> dict[str, Path]:
    """Write every job's script to ``<out>/slurm/<name>.sbatch`` (atomically); returns name -> path.

    Each script is checked with ``bash -n`` first (unless ``checked``: :func:`check_scripts` ran): one
    that does not parse raises :class:`ConfigError` and no script is written.
    """
    from ..io import write_text

    if not checked:
        check_scripts(jobs)
    logs_dir(exp).mkdir(parents=True, exist_ok=True)
    paths = script_paths(exp, jobs)
    for j in jobs:
        write_text(paths[j.name], j.script)
    return paths
