"""Slurm job graphs for an experiment (``preschool launch``): the scripts, what is current, the submission.

The jobs run the runner's commands (:mod:`preschool.experiment`: ``preschool
prepare``, ``preschool run --arm A --seed S``, ``preschool run --only eval
--only report``); this module only writes, checks and submits them.

An experiment on a cluster is three kinds of job:

1. **prepare** (one node, no GPU needed): ``preschool prepare EXP.yaml`` builds the
   tokenizer and every dataset once, holding the output folder's lock
   (:mod:`preschool.lock`): a second prepare of the same config waits, then
   finds the data up to date; one of another config into the same folder stops
   with an error naming the first.
2. **one job per arm x seed**, each ``afterok`` on prepare (and, for an arm
   whose callback starts from another arm's run, e.g. ``compartment_model:
   {init_from: c1}``, on that arm's job of the same seed): ``srun`` starts one
   ``torchrun`` per node. A one-node job runs ``torchrun --standalone`` (its
   rendezvous on a free local port); a multi-node one meets on the allocation's
   first node at port ``--port + job id mod 1000`` (:data:`PORT_SPAN`), so jobs
   sharing a node never join each other's rendezvous. Each job writes only its
   own run folder (``<out>/arms/<arm>/seed<k>``, locked by ``run --arm``), so
   arms run concurrently; a preempted job resubmitted with the same script
   resumes from its last checkpoint.
3. **eval + report**, ``afterany`` on every arm job: evaluates whatever
   checkpoints exist and writes the report from whatever finished (unfinished
   arms are marked as such in the report).

``preschool launch EXP.yaml --slurm`` builds these scripts (each checked with
``bash -n``), checks the request against the partition's nodes
(:func:`check_partition`: CPUs, memory, GPUs, node count, time limit, from
``sinfo``), then puts every job in one state of the relaunch state machine
(:mod:`preschool.slurm_state`): done (:func:`current_jobs`), queued with the
current script, queued with a stale one, never-runnable, failed or absent, read
from the run folders, ``squeue`` (each job carries ``--comment=preschool:<out
folder tag>:<job>:<script hash>``) and ``<out>/slurm/jobs.json``. Only then are
the scripts written under ``<out>/slurm/``; the launch prints every job's state
and what it does, cancels the queued jobs it replaces (stale, never-runnable, and
the pending jobs that wait on a job submitted again) and submits with ``sbatch
--parsable`` the jobs not done and not kept, chaining the job ids, a kept job's
included, into ``--dependency``. A launch stops at the first sbatch that fails
or prints no job id, cancelling what it had submitted and any job of that
script ``squeue`` shows queued. ``--dry-run`` prints the same decision and a
submission script runnable as it is (also written to ``<out>/slurm/submit.sh``).
``--status`` shows each job's state (done, queued or running with Slurm's
reason, ended without finishing with its log's tail), from ``jobs.json`` and the
run folders alone when the controller cannot be reached. Hardware per job comes
from :class:`SlurmOptions` (``--gpus-per-node 0``: CPU jobs); every job sets
``--cpus-per-task``, and each rank runs ``CPUs / ranks per node`` torch threads
(:func:`preschool.device.rank_threads`).
"""

from __future__ import annotations

import glob
import hashlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import layout
from .errors import ConfigError, DataError, PreschoolError
# the runner (experiment/) loads the experiment and says whether its data is prepared; this module only
# writes and submits the jobs that run its commands
from .experiment import ExperimentFile, require_prepared, load_experiment_file, resolve_runs
# the relaunch state machine (what each job is now: done, queued, stale, never-runnable, failed, absent)
from .slurm_state import (ABSENT, DONE, FAILED, NEVER, STALE, Job, Queued, Recorded, SlurmUnreachable, Step, plan,
                          read_queue, read_record, script_hash, with_digest, write_record)


# ----------------------------------------------------------------------------- Slurm scripts

CPUS_PER_PROCESS = 4  # default CPUs a job asks per training process (data loading + the main thread)
# what `sbatch --parsable` prints: "jobid" or "jobid;cluster"
_JOB_ID = re.compile(r"(\d+)(;[\w.-]+)?")
#: a multi-node job's rendezvous port is ``--port + job id mod PORT_SPAN``: jobs whose first node is the
#: same meet on different ports (ids PORT_SPAN apart could coincide; one-node jobs use --standalone)
PORT_SPAN = 1000


@dataclass
class SlurmOptions:
    """What the generated jobs ask Slurm for, and how they start Python.

    ``gpus_per_node`` 0 makes every job a CPU job (no ``--gpus-per-node`` line);
    ``procs_per_node`` is the number of torchrun processes per node (default: one
    per GPU, one on CPU); ``cpus_per_task`` is the CPUs of each node's task, which
    runs torchrun and its processes (default :data:`CPUS_PER_PROCESS` per
    process). The prepare and the eval + report jobs run on one node with the
    whole ``cpus_per_task`` (default :data:`CPUS_PER_PROCESS`); prepare asks no
    GPU, the eval + report job ``report_gpus`` (default None: one when the arm
    jobs have GPUs, since the evaluators run on the training device when that is
    CUDA, ``evals.runner.eval_device``; none for CPU jobs).
    """

    nodes: int = 1
    gpus_per_node: int = 8
    partition: str | None = None
    time: str | None = None  # HH:MM:SS (or D-HH:MM:SS) per arm job
    account: str | None = None
    port: int = 29500  # multi-node jobs: base of the c10d rendezvous port (+ job id mod PORT_SPAN)
    cpus_per_task: int | None = None
    setup: list[str] = field(default_factory=list)  # shell lines run first (module load, source venv...)
    sbatch: list[str] = field(default_factory=list)  # extra "#SBATCH" options, e.g. "--qos=high"
    procs_per_node: int | None = None
    mem: str | None = None  # per node, Slurm's --mem syntax (e.g. 64G)
    qos: str | None = None
    constraint: str | None = None
    report_gpus: int | None = None
    report_time: str | None = None  # the prepare and report jobs' limit (default: time)

    @property
    def procs(self) -> int:
        """torchrun processes per node."""
        return self.procs_per_node or (self.gpus_per_node if self.gpus_per_node > 0 else 1)

    @property
    def eval_gpus(self) -> int:
        """GPUs of the eval + report job: ``report_gpus``, else one when training has GPUs."""
        if self.report_gpus is not None:
            return self.report_gpus
        return 1 if self.gpus_per_node > 0 else 0

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
        if not 1 <= self.port <= 65535 - PORT_SPAN + 1:
            raise ConfigError("--port", f"must be a TCP port of 1..{65535 - PORT_SPAN + 1} (each job adds its "
                              f"id mod {PORT_SPAN}), got {self.port}")


def _q(x: object) -> str:
    return shlex.quote(str(x))


def out_tag(exp: ExperimentFile) -> str:
    """12 hex digits naming the experiment's output folder (its resolved path) in every job's comment:
    two experiments of one name in two folders never see each other's jobs as their own."""
    return hashlib.sha256(str(exp.out_dir.resolve()).encode("utf-8")).hexdigest()[:12]


def job_comment(exp: ExperimentFile, name: str) -> str:
    """``preschool:<out tag>:<job>``: the ``--comment`` of job ``name`` (its script's hash is appended,
    :func:`preschool.slurm_state.with_digest`), which :func:`preschool.slurm_state.read_queue` reads back."""
    return f"preschool:{out_tag(exp)}:{name}"


def slurm_job_name(exp: ExperimentFile, name: str) -> str:
    """The Slurm job name (``--job-name``; also the log's stem, ``%x-%j.out``)."""
    return f"{exp.cfg.name}-{name}"


def _header(exp: ExperimentFile, name: str, opt: SlurmOptions, nodes: int, gpus: int, cpus: int, logs: Path,
            time: str | None) -> list[str]:
    lines = ["#!/bin/bash", f"#SBATCH --job-name={slurm_job_name(exp, name)}",
             f"#SBATCH --comment={job_comment(exp, name)}", f"#SBATCH --nodes={nodes}",
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


def _logs_dir(exp: ExperimentFile) -> Path:
    return layout.slurm_dir(exp.out_dir) / "logs"


def report_stamp(exp: ExperimentFile) -> Path:
    """The file the report job writes once its eval + report succeeded: the config key it reported."""
    return layout.slurm_dir(exp.out_dir) / "report.done"


def slurm_jobs(exp: ExperimentFile, opt: SlurmOptions) -> list[Job]:
    """The job graph: prepare -> one job per arm x seed (a ladder: per rung x arm x seed, ``--rung``) ->
    eval + report (scripts as text)."""
    from .lock import config_key

    opt.validate()
    logs = _logs_dir(exp).resolve()
    side_time = opt.report_time or opt.time
    prep = Job("prepare", "prepare", "\n".join(
        _header(exp, "prepare", opt, 1, 0, opt.cpus(1), logs, side_time)
        + ["# builds the tokenizer and every dataset once (output lock: a prepare of the same config waits)",
           f"{_SRUN} --ntasks=1 " + _cli(exp, "prepare", "--no-progress"), ""]), comment=job_comment(exp, "prepare"))
    jobs = [prep]
    arm_jobs: dict[tuple, str] = {}
    # a ladder: one job per rung x arm x seed, named <rung>-<arm>-seed<k>, each with --rung
    for rung, seed, arm in [(r, s, a) for r in exp.rungs for s in exp.seeds for a in exp.arms]:
        named = rung is not None and exp.cfg.rung is None  # a view of one rung (--set rung=R) already says it
        prefix, rung_arg = (f"{rung}-", f" --rung {_q(rung)}") if named else ("", "")
        name = f"{prefix}{arm}-seed{seed}"
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
        torchrun = (f"torchrun {rdzv} --nproc-per-node {opt.procs} "
                    "-m preschool.cli run " + _q(exp.path.resolve()) + f" --arm {_q(arm)} --seed {seed}{rung_arg} "
                    "--no-progress" + "".join(f" --set {_q(o)}" for o in exp.overrides))
        script = _header(exp, name, opt, opt.nodes, opt.gpus_per_node, opt.cpus(opt.procs), logs, opt.time) + [
            *where, f"{_SRUN} --ntasks=\"$SLURM_NNODES\" {torchrun}", ""]
        after = ["prepare"]
        if arm in exp.depends:
            after.append(f"{prefix}{exp.depends[arm]}-seed{seed}")
        jobs.append(Job(name, "arm", "\n".join(script), after_ok=after, run=(rung, arm, seed),
                        comment=job_comment(exp, name)))
        arm_jobs[(rung, arm, seed)] = name
    report_cmd = _cli(exp, "run", "--only", "eval", "--only", "report", "--no-progress")
    stamp = report_stamp(exp).resolve()
    jobs.append(Job("report", "report", "\n".join(
        _header(exp, "report", opt, 1, opt.eval_gpus, opt.cpus(1), logs, side_time)
        + ["# evaluates the checkpoints that exist and reports whatever finished",
           f"{_SRUN} --ntasks=1 {report_cmd}",
           "# reached only when the report succeeded (set -e): a later launch skips a current report",
           f"printf '%s\\n' {config_key(exp.cfg)} > {_q(stamp)}.tmp && mv {_q(stamp)}.tmp {_q(stamp)}", ""]),
        after_any=list(arm_jobs.values()), comment=job_comment(exp, "report")))
    return [with_digest(j) for j in jobs]  # each comment ends with its script's hash: a relaunch tells stale jobs


def check_scripts(jobs: list[Job]) -> None:
    """Check every job's script with ``bash -n``: one that does not parse (an unbalanced quote in a
    ``--setup`` line) raises :class:`ConfigError`."""
    for j in jobs:
        res = subprocess.run(["bash", "-n"], input=j.script, capture_output=True, text=True)
        if res.returncode != 0:
            why = res.stderr.strip().replace("bash: ", "")
            raise ConfigError("--setup", f"the {j.name} job script does not parse (bash -n: {why}); "
                              "check the --setup lines' quoting")


def script_paths(exp: ExperimentFile, jobs: list[Job]) -> dict[str, Path]:
    """name -> ``<out>/slurm/<name>.sbatch``, where :func:`write_scripts` writes each job's script."""
    return {j.name: layout.slurm_dir(exp.out_dir) / f"{j.name}.sbatch" for j in jobs}


def write_scripts(exp: ExperimentFile, jobs: list[Job], checked: bool = False) -> dict[str, Path]:
    """Write every job's script to ``<out>/slurm/<name>.sbatch`` (atomically); returns name -> path.

    Each script is checked with ``bash -n`` first (unless ``checked``: :func:`check_scripts` ran): one
    that does not parse raises :class:`ConfigError` and no script is written.
    """
    from .io import write_text

    if not checked:
        check_scripts(jobs)
    _logs_dir(exp).mkdir(parents=True, exist_ok=True)
    paths = script_paths(exp, jobs)
    for j in jobs:
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
    from .lock import config_key
    from .train.run_dir import check_run_dir

    done: dict[str, str] = {}
    try:
        require_prepared(exp)
    except DataError:
        return done  # the data is (re)built, so every arm trains on what prepare makes
    done["prepare"] = "data prepared with the current spec"
    data_dir = layout.data_dir(exp.out_dir)
    records = {(r.rung, r.arm, r.seed): r for r in resolve_runs(exp.cfg)}
    finished = []
    for j in jobs:
        if j.role != "arm":
            continue
        rung, arm_name, seed = j.run
        rec = records[(rung, arm_name, int(seed))]
        run = rec.run_dir
        # verify "size": compare the manifests' recorded checksums, not rehash every shard on the login node
        tcfg = replace(rec.train, verify="size")
        try:
            check_run_dir(tcfg, run, dict(rec.datasets), layout.tokenizer_dir(data_dir))
        except ConfigError as e:
            raise ConfigError(f"{rec.where}.{e.field}", f"arm {arm_name} seed {seed}: {e.message}") from None
        if layout.is_done(run):
            done[j.name] = f"finished with this config ({run / layout.DONE})"
            finished.append(run / layout.DONE)
    if all(j.name in done for j in jobs if j.role != "report"):
        stamp = report_stamp(exp)
        if (stamp.is_file() and stamp.read_text().strip() == config_key(exp.cfg)
                and all(stamp.stat().st_mtime >= f.stat().st_mtime for f in finished)):
            done["report"] = f"reported this config after every run finished ({stamp})"
    return done


# ----------------------------------------------------------------------------- what Slurm already has

def _training(exp: ExperimentFile, jobs: list[Job]) -> set[str]:
    """The arm jobs whose run folder has a ``config.yaml``: :func:`current_jobs` checked that it is the
    current training config (it refuses any other), so such a job trains what the current script would."""
    return {j.name for j in jobs if j.role == "arm"
            and layout.run_config_path(layout.run_dir(exp.out_dir, j.run[1], int(j.run[2]), j.run[0])).is_file()}


def _queue(exp: ExperimentFile) -> dict[str, list[Queued]] | None:
    """The experiment's jobs Slurm holds (:func:`preschool.slurm_state.read_queue` by this folder's comment
    prefix), name -> copies; None without squeue; :class:`SlurmUnreachable` when squeue fails."""
    return read_queue(job_comment(exp, ""))


def _seconds(t: str) -> int | None:
    """Seconds of a Slurm time (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``); None for unlimited."""
    if t.lower() in ("infinite", "unlimited", "n/a", ""):
        return None
    days, _, rest = t.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    if days:
        h, m, sec = (parts + [0, 0])[:3]
    else:
        h, m, sec = {1: [0, parts[0], 0], 2: [0, *parts], 3: parts}[len(parts)]
    return ((int(days or 0) * 24 + h) * 60 + m) * 60 + sec


def _megabytes(mem: str) -> int:
    """Megabytes of a ``--mem`` value (Slurm's unit is M when none is given)."""
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}
    return int(int(mem.rstrip("KMGT")) * scale.get(mem[-1], 1))


def _gpus(gres: str) -> int:
    """GPUs a node's gres string offers (``gpu:4``, ``gpu:a100:4(S:0-1)``, ``(null)``)."""
    return sum(int(n) for n in re.findall(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres))


def check_partition(opt: SlurmOptions) -> str:
    """Refuse, before anything is submitted, a request no node of the partition can meet.

    Reads ``sinfo`` (per node: CPUs, memory, GPUs; the partition's time limit) for ``--partition``, or
    the default partition. The arm jobs need ``--nodes`` nodes each with ``cpus(procs)`` CPUs and
    ``--gpus-per-node`` GPUs, the prepare and report jobs one node with ``cpus(1)`` CPUs (the whole
    ``--cpus-per-task``, else :data:`CPUS_PER_PROCESS`), the report job ``--report-gpus`` GPUs (prepare
    asks none); every job ``--mem``, each its time limit. A request over the largest node (or
    more nodes than the partition has, or a time over its limit) would stay pending forever
    (``PartitionConfig``): :class:`ConfigError` names the flag. Returns what was checked (or why not).
    """
    if shutil.which("sinfo") is None:
        return "partition limits not checked (sinfo is not on PATH)"
    cmd = ["sinfo", "--noheader", "--Node", "--format=%N|%P|%c|%m|%G|%l"]
    res = subprocess.run(cmd + ([f"--partition={opt.partition}"] if opt.partition else []),
                         capture_output=True, text=True)
    if res.returncode != 0:
        said = " | ".join((res.stderr.strip() or "no output").splitlines())
        return f"partition limits not checked (sinfo failed: {said})"
    nodes: dict[str, tuple[int, int, int]] = {}
    limit, name = None, opt.partition
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 6:
            continue
        host, part, cpus, mem, gres, tl = parts
        if opt.partition is None and not part.endswith("*"):
            continue  # only the default partition (sinfo marks it with *) takes a job that names none
        name = part.rstrip("*")
        try:
            nodes[host] = (int(cpus.rstrip("+")), int(mem.rstrip("+")), _gpus(gres))
            limit = _seconds(tl)
        except ValueError:
            continue
    if not nodes:
        if opt.partition is not None:
            raise ConfigError("--partition", f"sinfo lists no node in partition {opt.partition!r}")
        return "partition limits not checked (sinfo shows no default partition)"
    where = f"partition {name}"
    most = {k: max(n[i] for n in nodes.values()) for i, k in enumerate(("cpus", "mem", "gpus"))}
    side_time = opt.report_time or opt.time
    # (who, CPUs, GPU flag, GPUs, time): prepare asks no GPU, only the report job asks --report-gpus
    asks = (("the arm jobs ask", opt.cpus(opt.procs), "--gpus-per-node", opt.gpus_per_node, opt.time),
            ("the prepare and report jobs ask", opt.cpus(1), "--report-gpus", 0, side_time),
            ("the report job asks", opt.cpus(1), "--report-gpus", opt.eval_gpus, side_time))
    if opt.nodes > len(nodes):
        raise ConfigError("--nodes", f"the arm jobs ask {opt.nodes} nodes, but {where} has {len(nodes)} (sinfo)")
    for who, cpus, gflag, gpus, t in asks:
        cflag = "--cpus-per-task"
        if cpus > most["cpus"]:
            raise ConfigError(cflag, f"{who} {cpus} CPUs on a node, but the largest node of {where} has "
                              f"{most['cpus']} (sinfo); they would stay pending forever: ask at most {most['cpus']}")
        if gpus > most["gpus"]:
            raise ConfigError(gflag, f"{who} {gpus} GPUs on a node, but the nodes of {where} have at most "
                              f"{most['gpus']} (sinfo gres)")
        if t is not None and limit is not None and _seconds(t) > limit:
            flag = "--time" if t == opt.time else "--report-time"
            raise ConfigError(flag, f"{who} {t}, over the time limit of {where} ({limit // 3600}:"
                              f"{limit % 3600 // 60:02d}:{limit % 60:02d}, sinfo)")
    if opt.mem is not None and _megabytes(opt.mem) > most["mem"]:
        raise ConfigError("--mem", f"every job asks {opt.mem} per node, but the largest node of {where} has "
                          f"{most['mem']}M (sinfo)")
    return (f"{where}: {len(nodes)} node(s), up to {most['cpus']} CPUs, {most['mem']}M, {most['gpus']} GPU(s) "
            "per node: the request fits")


# ----------------------------------------------------------------------------- submission

def to_submit(jobs: list[Job], steps: list[Step]) -> list[Job]:
    """The jobs the plan submits, in the graph's order: dependencies on finished jobs dropped, and each
    starting after the dying copies of itself the plan names (``after_ended``)."""
    by = {st.name: st for st in steps}
    return [replace(j, after_ok=[n for n in j.after_ok if by[n].state != DONE],
                    after_any=[n for n in j.after_any if by[n].state != DONE], after_ended=by[j.name].after_ended)
            for j in jobs if by[j.name].submit]


def sbatch_command(job: Job, path: Path, ids: dict[str, str]) -> list[str]:
    """``sbatch --parsable [--dependency=...] script`` with the dependencies' job ids filled in (and the
    ids of the dying copies of the job it starts after)."""
    deps = []
    if job.after_ok:
        deps.append("afterok:" + ":".join(ids[n] for n in job.after_ok))
    if job.after_any or job.after_ended:
        deps.append("afterany:" + ":".join([ids[n] for n in job.after_any] + job.after_ended))
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


def _stray(exp: ExperimentFile, job: Job, ids: dict[str, str]) -> tuple[str | None, str]:
    """After an sbatch that printed no job id: the id of the job it may have queued anyway (squeue by
    the job's comment), and what the user is told when squeue cannot say."""
    hint = (f"sbatch may still have queued it: look for job name {slurm_job_name(exp, job.name)} with "
            f"comment {job.comment} (squeue --me --name={slurm_job_name(exp, job.name)} --format=%i,%k) "
            "and scancel it")
    try:
        queue = _queue(exp)
    except PreschoolError:
        return None, hint
    if queue is None:
        return None, hint
    new = [q.job_id for q in queue.get(job.name, []) if q.digest == job.digest and q.job_id not in ids.values()
           and q.job_id not in job.after_ended and q.state == "PENDING"]
    if new:
        return new[0], ""
    return None, f"squeue shows no job of {job.name}, so it was not queued"


def submit(jobs: list[Job], paths: dict[str, Path], dry_run: bool = False, exp: ExperimentFile | None = None,
           kept: dict[str, str] | None = None) -> dict[str, str]:
    """Submit in dependency order; returns name -> Slurm job id of the jobs submitted.

    ``kept``: name -> id of the jobs Slurm already holds and keeps, whose ids fill the dependencies
    of later jobs. A job sbatch refuses, or whose output is no job id, stops the launch: the jobs
    already submitted are cancelled (``scancel``; the line is printed when that is not possible), and
    so is a job of the failed script that ``squeue`` shows queued (``exp`` given: found by its
    comment; otherwise the message names the job to look for); :class:`PreschoolError` names them
    all. A dry run prints a submission script runnable as it is (:func:`submit_script`) and submits
    nothing.
    """
    ids: dict[str, str] = dict(kept or {})
    if dry_run:
        print(submit_script(jobs, paths, ids))
        return {}
    if jobs and shutil.which("sbatch") is None:
        raise ConfigError("--slurm", _NO_SBATCH)
    new: dict[str, str] = {}
    for j in jobs:
        cmd = sbatch_command(j, paths[j.name], ids)
        res = subprocess.run(cmd, capture_output=True, text=True)
        job_id = parse_job_id(res.stdout) if res.returncode == 0 else None
        if job_id is None:
            said = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()
            why = (f"exit {res.returncode}" if res.returncode else "printed no job id") + f": {' | '.join(said)}"
            stray, note = _stray(exp, j, ids) if exp is not None and j.comment else (None, "")
            if stray is not None:
                new[f"{j.name}, queued although sbatch printed no id"] = stray
            raise PreschoolError(f"sbatch failed for {paths[j.name]} ({why}); {_cancel(new)}"
                                 + (f"; {note}" if note else ""))
        ids[j.name] = new[j.name] = job_id
        print(f"[preschool] submitted {j.name}: job {job_id}")
    return new


def _id_var(name: str, taken: set[str]) -> str:
    """A shell variable for job ``name``'s id (``a-seed0`` -> ``A_SEED0_ID``), unique among ``taken``."""
    base = re.sub(r"\W", "_", name).upper()
    var, k = f"{base}_ID", 2
    while var in taken:
        var, k = f"{base}_{k}_ID", k + 1
    taken.add(var)
    return var


def submit_script(jobs: list[Job], paths: dict[str, Path], ids: dict[str, str], cancel: list[str] = ()) -> str:
    """A bash script that cancels ``cancel`` (the queued jobs the launch replaces), then submits ``jobs``
    in order, each sbatch's printed id filling the later jobs' ``--dependency`` (``ids``: the jobs kept
    in the queue, by their real ids). Runnable as it is."""
    lines = ["#!/bin/bash", "# submits the jobs in order: each sbatch prints its job id, which the jobs",
             "# after it wait for (--dependency); it stops at the first sbatch that fails",
             "set -euo pipefail"]
    if cancel:
        lines.append(f"scancel {' '.join(cancel)}  # the queued jobs it replaces (stale, never-runnable, dependents)")
    refs = dict(ids)
    taken: set[str] = set()
    for j in jobs:
        cmd = " ".join(c if c.startswith("--dependency") else _q(c) for c in sbatch_command(j, paths[j.name], refs))
        var = _id_var(j.name, taken)
        lines += [f"{var}=$({cmd} | cut -d ';' -f 1)",
                  f": \"${{{var}:?sbatch printed no job id for {j.name}}}\"",
                  f"echo \"submitted {j.name}: job ${var}\""]
        refs[j.name] = f"${{{var}}}"
    return "\n".join(lines) + "\n"


def _jobs_record(exp: ExperimentFile) -> Path:
    return layout.slurm_dir(exp.out_dir) / "jobs.json"


_NO_SBATCH = "sbatch not found on PATH (run on a Slurm login node, or use --dry-run)"


def _cancel_replaced(steps: list[Step]) -> None:
    """Cancel the queued jobs the plan replaces, before anything is submitted (one ``scancel``); a
    failure raises :class:`PreschoolError` and nothing is submitted."""
    ids = [i for st in steps for i in st.cancel]
    if not ids:
        return
    line = "scancel " + " ".join(ids)
    if shutil.which("scancel") is None:
        raise PreschoolError(f"jobs {', '.join(ids)} must be cancelled before their replacements are submitted, "
                             f"but scancel is not on PATH; nothing was submitted (run `{line}` and launch again)")
    res = subprocess.run(line.split(), capture_output=True, text=True)
    if res.returncode != 0:
        said = " | ".join((res.stderr.strip() or res.stdout.strip() or "no output").splitlines())
        raise PreschoolError(f"`{line}` failed (exit {res.returncode}: {said}); nothing was submitted")
    print(f"[preschool] cancelled {', '.join(f'{st.name} ({i})' for st in steps for i in st.cancel)} ({line})")


def launch(exp: ExperimentFile, opt: SlurmOptions, dry_run: bool = False) -> dict[str, str]:
    """Check the scripts and the partition, put every job in its state (:func:`preschool.slurm_state.plan`),
    write the scripts, cancel the queued jobs it replaces and submit the rest; name -> job id of what
    was submitted.

    Nothing is written before the decision is made: a launch refused (no sbatch, a bad request, squeue
    failing) leaves the scripts of the last launch as they were. A dry run prints the same decision and
    a submission script (also written to ``<out>/slurm/submit.sh``), cancelling and submitting nothing.
    """
    from .io import write_text

    jobs = slurm_jobs(exp, opt)
    check_scripts(jobs)
    checked = check_partition(opt)
    done = current_jobs(exp, jobs)
    try:
        queue = _queue(exp)
    except SlurmUnreachable as e:
        if not dry_run:
            raise PreschoolError(f"{e}; without it the jobs of {exp.out_dir} that are already queued cannot be "
                                 "told apart, so nothing was submitted") from None
        queue, unchecked = None, str(e)  # a dry run away from the cluster still shows the rest
    else:
        unchecked = "squeue is not on PATH"
    steps = plan(jobs, done, queue, read_record(_jobs_record(exp)), _training(exp, jobs))
    todo = to_submit(jobs, steps)
    if todo and not dry_run and shutil.which("sbatch") is None:
        raise ConfigError("--slurm", _NO_SBATCH)  # before any script is written
    paths = write_scripts(exp, jobs, checked=True)
    hw = (f"{opt.nodes} node(s) x {opt.gpus_per_node} GPU(s)" if opt.gpus_per_node
          else f"{opt.nodes} node(s) x {opt.procs} CPU process(es)")
    print(f"[preschool] {len(jobs)} job scripts in {layout.slurm_dir(exp.out_dir)}: prepare, "
          f"{len(jobs) - 2} arm x seed job(s) on {hw}, report")
    print(f"[preschool] {checked}")
    if queue is None:
        print(f"[preschool] queued jobs not checked ({unchecked})")
    for st in steps:  # every job, in the graph's order: its state and what this launch does with it
        print(f"[preschool] {st.action} {st.name} [{st.state}]: {st.says}")
    if not todo:
        kept_stale = any(st.state == STALE for st in steps)
        print("[preschool] nothing to run: every job's outputs are complete and current"
              + ((", or it is queued or running" + ("" if kept_stale else " with the current script")) if queue
                 else ""))
        return {}
    kept = {st.name: st.job_id for st in steps if st.state != DONE and not st.submit}
    cancel = [i for st in steps for i in st.cancel]
    print(f"[preschool] {'would run' if dry_run else 'to run'}: {', '.join(j.name for j in todo)}"
          + (f" ({'would cancel' if dry_run else 'cancelling'} job(s) {', '.join(cancel)} first)" if cancel else ""))
    if dry_run:
        for j in todo:
            print(f"\n# ---- {paths[j.name]}\n{j.script}")
        script = layout.slurm_dir(exp.out_dir) / "submit.sh"
        write_text(script, submit_script(todo, paths, kept, cancel))
        print(f"\n# ---- the submission, runnable as it is (bash {script}): the job ids are filled in as "
              "each sbatch prints its own")
        print(submit_script(todo, paths, kept, cancel))
        return {}
    _cancel_replaced(steps)
    digests = {j.name: j.digest for j in todo}
    try:
        ids = submit(todo, paths, exp=exp, kept=kept)
    except PreschoolError as e:
        if cancel:  # the jobs cancelled are gone: say so, a relaunch submits them (failed or absent)
            raise PreschoolError(f"{e}; the jobs cancelled before it ({', '.join(cancel)}) are submitted by the "
                                 "next launch") from None
        raise
    write_record(_jobs_record(exp), {n: Recorded(i, digests[n]) for n, i in ids.items()})
    return ids


# ----------------------------------------------------------------------------- progress

def _log_tail(exp: ExperimentFile, name: str, job_id: str | None, lines: int = 10) -> tuple[Path, str] | None:
    """The last ``lines`` lines of job ``name``'s log (of job ``job_id``, else its newest), or None."""
    logs = _logs_dir(exp)
    stem = slurm_job_name(exp, name)
    cands = [logs / f"{stem}-{job_id}.out"] if job_id else []
    cands = [p for p in cands if p.is_file()] or sorted(logs.glob(f"{glob.escape(stem)}-*.out"),
                                                       key=lambda p: p.stat().st_mtime)
    if not cands:
        return None
    text = cands[-1].read_text(encoding="utf-8", errors="replace").rstrip("\n").splitlines()
    return cands[-1], "\n".join(text[-lines:])


def _ended_state(job_id: str) -> str | None:
    """How a job Slurm no longer queues ended (``sacct``, else ``scontrol`` while it still knows the job)."""
    for cmd, pat in ((["sacct", "--noheader", "--allocations", "--parsable2", "--format=State", "-j", job_id],
                      r"^(\S+)"), (["scontrol", "show", "job", "-o", job_id], r"JobState=(\S+)")):
        if shutil.which(cmd[0]) is None:
            continue
        res = subprocess.run(cmd, capture_output=True, text=True)
        m = re.search(pat, res.stdout.strip()) if res.returncode == 0 else None
        if m:
            return m.group(1)
    return None


def status(exp: ExperimentFile, opt: SlurmOptions | None = None) -> list[str]:
    """One line per job of the graph (``preschool launch --status``), in the relaunch's states: done;
    in Slurm with its state and reason (and, when it runs another script or can never start, that a
    launch replaces it); ended without finishing (the state Slurm recorded, and its log's last lines);
    or never submitted. When the controller cannot be reached the states come from ``jobs.json`` and
    the run folders alone, and the first line says so. Returns the lines (printed by the CLI)."""
    jobs = slurm_jobs(exp, opt or SlurmOptions())
    for j, path in zip(jobs, script_paths(exp, jobs).values()):
        if path.is_file():  # the script the last launch wrote (with its options) is the current one
            j.digest = script_hash(path.read_text(encoding="utf-8"))
    done = current_jobs(exp, jobs)
    out = []
    try:
        queue = _queue(exp)
    except SlurmUnreachable as e:
        queue = None
        out.append(f"(the Slurm controller cannot be reached: {e}; what follows is from {_jobs_record(exp)} and "
                   "the run folders: a job not done may still be queued or running)")
    else:
        if queue is None:
            out.append("(squeue is not on PATH: queued and running jobs are not shown)")
    unknown = queue is None
    digests = {j.name: j.digest for j in jobs}
    record = read_record(_jobs_record(exp))
    for st in plan(jobs, done, queue, record, _training(exp, jobs)):
        q = st.queued
        if st.state == DONE:
            out.append(f"{st.name}: done ({st.says})")
        elif q is not None and st.state != FAILED:
            line = f"{st.name}: {q.state} as job {q.job_id} (reason {q.reason})"
            if st.state == STALE and st.submit:
                line += "; it runs another script than the current one: `preschool launch` again replaces it"
            elif st.state == STALE:
                line += ("; it runs another script than the current one, but trains the current config: a launch "
                         "keeps it (scancel it and launch again to apply the new script)")
            elif st.state == NEVER:
                line += "; it can never start (a job it waits for failed): `preschool launch` again resubmits it"
            out.append(line)
        elif st.state == ABSENT:
            out.append(f"{st.name}: not submitted")
        elif unknown:
            rec = record[st.name]
            same = ("the current script" if rec.digest == digests[st.name] else "another script" if rec.digest
                    else "a script of unknown hash")
            out.append(f"{st.name}: job {rec.job_id} was submitted ({same}); its state is unknown")
        else:
            how = q.state if q is not None else _ended_state(st.job_id)
            out.append(f"{st.name}: job {st.job_id} ended without finishing ({how or 'no longer known to Slurm'}); "
                       "`preschool launch` again resubmits it (an arm resumes from its last checkpoint)")
            tail = _log_tail(exp, st.name, st.job_id)
            if tail is not None:
                out.append(f"  last lines of {tail[0]}:")
                out += [f"    {x}" for x in tail[1].splitlines()]
    return out


# ----------------------------------------------------------------------------- CLI

HELP = "write (and submit) Slurm jobs for an experiment: prepare -> one job per arm x seed -> report"
DESCRIPTION = """\
Run an experiment on a Slurm cluster: writes <out>/slurm/*.sbatch (a prepare
job, one multi-node torchrun job per arm x seed that waits for it, and an
eval+report job that waits for all arms and reports whatever finished), then
checks the request against the partition (sinfo: CPUs, memory, GPUs, nodes,
time limit) and puts each job in one state: done, queued with the current
script, queued with a stale one (the config or a flag changed), never-runnable
(it waits on a job that failed), failed, or absent (squeue, by the comment
each job carries, and <out>/slurm/jobs.json). It prints every job's state and
what it does: done and queued jobs are kept, stale and never-runnable ones are
cancelled and submitted again with the pending jobs that wait on them, failed
and absent ones are submitted (a failed arm resumes from its last checkpoint).
A second launch of a finished experiment submits nothing. With --dry-run
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
        for line in status(load_experiment_file(args.config, args.overrides)):
            print(line)
        return 0
    if not args.slurm:
        raise ConfigError("--slurm", "say which scheduler: only --slurm is supported (see docs/scale.md for "
                          "multi-node torchrun without a scheduler)")
    opt = options(args)
    opt.validate()
    launch(load_experiment_file(args.config, args.overrides), opt, dry_run=args.dry_run)
    return 0
