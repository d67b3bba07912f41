"""Distributed prepare on datatrove: our work units as datatrove tasks (local processes, Slurm, Ray).

``preschool prepare EXP.yaml --executor local|slurm|ray --tasks N`` builds every
dataset's work units (``data/engine.py``) inside a datatrove pipeline whose one
step is :class:`UnitTasks`. Task ``r`` of ``N`` builds units ``k`` with
``k % N == r`` into the dataset's resumable work folder; the parent then runs the
engine's ordinary in-order pass, which finds those units finished, builds any
that are missing and links the shard files in unit order. The units are the same
units the local engine builds (a generator's unit is a range of item indices, a
corpus unit consecutive documents of the one reader, ``corpora.iter_documents``),
written by the same code, so the shards and manifests are byte-identical to
``--executor engine`` (the default) for any task count.

How many units to hand out: the parent builds unit 0 itself (the probe) and
extrapolates its rows to the budget with 5% slack (:func:`engine.units_for`); a
dataset without a token cap (an L2T build of a whole corpus) hands out every
unit until its source ends. Too few planned units cost time (the final pass
builds the rest in order), never bytes.

Where a source keeps stream positions (local files through ``auto``/``text``/``jsonl``/
``parquet``, the ``datatrove_*`` readers, a streamed ``hf`` corpus; generators trivially),
the parent reads on after the probe up to the last planned unit, writing where each unit
starts (``u<k>.start.json``, the engine's resume tokens), and each task opens the source at
its own units only (for files: at the unit's file, and inside it at the record's line, the
row group, or a text piece's line; a datatrove reader reads the unit's file from its start).
Any other text corpus (storybook, a non-streamed ``hf`` dataset) is read by every task from
its start up to its last unit (each task tokenizes only its own units);
reading is cheap next to tokenizing, but for a very large corpus on many tasks that read is
the cost to watch.

Plug-ins: the step carries the path and sha256 of every plug-in file, folder or module
this process imported (``plugins.for_workers``); a task imports them before it reads its
job (whose classes may be a plug-in's generator or source) and refuses one whose sha256
changed since (``plugins.use_recorded``), so user parts prepare at scale too.

datatrove is an optional extra (``pip install 'preschool[datatrove]'``); the
executors need a filesystem all tasks and the parent share (the output folder, and the
plug-in files at the same paths).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import plugins as _plugins
from ..errors import ConfigError, DataError, MissingDependency, PreschoolError
from ..io import read_json, write_json
from ..slurm_state import slurm_job_alive
from .engine import Distributor, UnitJob, build_unit, units_for, unit_path

EXECUTORS = ("engine", "local", "slurm", "ray")


class Submitted(PreschoolError):
    """A Slurm job was submitted and ``wait`` is off: rerun the same command once it has finished."""


def require_datatrove(purpose: str) -> None:
    """Raise :class:`MissingDependency` (naming ``purpose`` and how to install) unless datatrove imports."""
    try:
        import datatrove  # noqa: F401
    except ImportError:
        raise MissingDependency("datatrove", "datatrove", purpose) from None


@dataclass
class ExecutorOptions:
    """Where datatrove runs the units. ``tasks``: datatrove tasks (work spread ``k % tasks``)."""

    kind: str = "local"  # local | slurm | ray
    tasks: int = 1
    workers: int = -1  # tasks run at once (-1: all; Slurm: the array's %limit)
    # Slurm
    partition: str | None = None
    time: str | None = None  # Slurm time limit per task, e.g. "4:00:00"
    cpus_per_task: int = 1
    mem_per_cpu_gb: float = 2
    qos: str | None = None
    job_name: str = "preschool-prepare"
    venv_path: str | None = None  # activate script sourced in each task (default: none)
    env_command: str | None = None  # or any shell command that sets up the environment
    sbatch_args: dict[str, str] = field(default_factory=dict)
    wait: bool = True  # Slurm: wait for the array to finish (poll), else stop after submitting
    poll_s: float = 30.0
    # Ray
    ray_address: str | None = None  # ray.init(address=...); default: RAY_ADDRESS or a local Ray

    def validate(self) -> None:
        if self.kind not in EXECUTORS[1:]:
            raise ConfigError("--executor", f"must be one of {list(EXECUTORS)}, got {self.kind!r}")
        if self.tasks < 1:
            raise ConfigError("--tasks", f"must be >= 1, got {self.tasks}")
        if self.kind == "slurm":
            for name in ("partition", "time"):
                if not getattr(self, name):
                    raise ConfigError(f"--{name}", "needed with --executor slurm (e.g. --partition cpu --time 4:00:00)")
        if self.cpus_per_task < 1:
            raise ConfigError("--cpus-per-task", f"must be >= 1, got {self.cpus_per_task}")
        if not self.mem_per_cpu_gb > 0:
            raise ConfigError("--mem-per-cpu-gb", f"must be > 0, got {self.mem_per_cpu_gb}")


try:  # an optional extra: without it this module imports, and the distributor says how to install it
    from datatrove.pipeline.base import PipelineStep as _StepBase
except ImportError:
    _StepBase = object  # type: ignore[assignment,misc]


class UnitTasks(_StepBase):
    """A datatrove ``PipelineStep`` that builds one task's share of a preschool job's work units.

    ``run(data, rank, world_size)`` builds units ``k < units`` (every unit when None)
    with ``k % world_size == rank`` into ``work``, skipping finished ones; documents
    coming in through ``data`` are passed on untouched. ``job`` must be a task copy
    (``job.task_copy()``): it reads its own documents. Usable in any datatrove
    pipeline and executor.
    """

    name = "preschool work units"
    type = "PRESCHOOL"

    def __init__(self, job: UnitJob, work: str | Path, units: int | None, plugins: list[dict] | None = None):
        require_datatrove("preschool.data.distributed.UnitTasks")
        super().__init__()
        self.job, self.work, self.units = job, str(work), units
        # the plug-ins (path, sha256) this process had imported: a task elsewhere imports the same files
        # before it reads the job, whose classes may be a plug-in's (a user's generator)
        self.plugins = list(plugins) if plugins is not None else _plugins.for_workers()

    def __reduce__(self):
        # the job travels as bytes inside the step, so unpickling a task imports the recorded plug-ins first
        # (refusing a changed one) and only then the job; dill, as datatrove pickles the executor
        import dill

        return _unit_tasks, (self.plugins, dill.dumps(self.job), self.work, self.units)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        if data:
            yield from data
        os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per task, as in the engine
        work = Path(self.work)
        mine = range(rank, self.units, world_size) if self.units is not None else None
        if mine is not None and all((work / f"u{k:06d}.start.json").is_file() for k in mine):
            # the parent planned where each unit starts: read only this task's units
            for k in mine:
                if (unit_path(work, k) / "unit.json").is_file():
                    self.stat_update("units_reused")
                    continue
                first, payload = next(iter(self.job.units(start=(k, read_json(work / f"u{k:06d}.start.json")))))
                self._build(first, payload, work)
            return
        for k, payload in self.job.units():
            if self.units is not None and k >= self.units:
                break
            if k % world_size != rank:
                continue
            if (unit_path(work, k) / "unit.json").is_file():
                self.stat_update("units_reused")
                continue
            self._build(k, payload, work)

    def _build(self, k: int, payload, work: Path) -> None:
        with self.track_time("unit"):
            info = build_unit(self.job, k, payload, work)
        self.stat_update("units_built")
        self.stat_update("rows", value=sum(int(v) for s, v in info["rows"].items() if "-" not in s))


def _unit_tasks(plugins: list[dict], job: bytes, work: str, units: int | None) -> UnitTasks:
    """A :class:`UnitTasks` unpickled in a task: its plug-ins imported (``plugins.use_recorded``), then its job."""
    import dill

    _plugins.use_recorded(plugins, "prepare task")
    return UnitTasks(dill.loads(job), work, units, plugins)


class DatatroveDistributor(Distributor):
    """Builds each job's units with a datatrove executor before the engine links them (see module doc)."""

    def __init__(self, opts: ExecutorOptions):
        opts.validate()
        require_datatrove(f"--executor {opts.kind}")
        self.opts = opts
        self.runs: list[dict] = []  # what was handed out, per job (for the caller's report)

    def prebuild(self, job: UnitJob, work: Path, need: dict[str, int] | None) -> None:
        task = job.task_copy()
        if task is None:
            print("[preschool] this job reads a one-shot document stream: built on the local engine", flush=True)
            return
        units = iter(task.units())
        first = next(units, None)
        if first is None:
            return
        token = task.start_token(first[0])
        probe = build_unit(task, first[0], first[1], work)
        planned = units_for([probe], need)
        if planned is not None and planned <= 1:
            return
        if token is not None:  # the source keeps positions: one read here tells every task where its units start
            write_json(work / f"u{first[0]:06d}.start.json", token)
            planned = _plan(task, units, work, planned)
            if planned is not None and planned <= 1:
                return
        tasks = self.opts.tasks if planned is None else max(1, min(self.opts.tasks, planned - 1))
        logs = work / f"datatrove-{self.opts.kind}-t{tasks}-u{planned if planned is not None else 'all'}"
        step = UnitTasks(task, work, planned)
        carried = "".join(f"; plug-in {p['plugin']} (sha256 {str(p['sha256'])[:12]})" for p in step.plugins)
        print(f"[preschool] datatrove {self.opts.kind}: {planned if planned is not None else 'all'} units over "
              f"{tasks} tasks (logs: {logs}){carried}", flush=True)
        t0 = time.perf_counter()
        if self.opts.kind == "local":
            self._local(step, tasks, logs)
        elif self.opts.kind == "slurm":
            self._slurm(step, tasks, logs)
        else:
            self._ray(step, tasks, logs)
        self.runs.append({"executor": self.opts.kind, "tasks": tasks, "units": planned, "logs": str(logs),
                          "seconds": round(time.perf_counter() - t0, 3)})

    def _local(self, step, tasks: int, logs: Path) -> None:
        from datatrove.executor import LocalPipelineExecutor

        # tasks are forked, as the engine's workers are: a fresh interpreter per task (datatrove's default,
        # forkserver) costs seconds of imports each; the Slurm and Ray tasks unpickle the step instead
        ex = LocalPipelineExecutor(pipeline=[step], tasks=tasks, workers=self.opts.workers, logging_dir=str(logs),
                                   start_method="fork")
        _run(ex, logs)

    def _ray(self, step, tasks: int, logs: Path) -> None:
        try:
            import ray
            from datatrove.executor import RayPipelineExecutor
        except ImportError:
            raise MissingDependency("ray", "ray", "--executor ray") from None
        # a Ray this call starts (no cluster address: a local one) is shut down after it, so its worker
        # processes and object store do not outlive the prepare; a caller's own ray.init() is left alone
        started = not ray.is_initialized()
        if started:
            # datatrove's Ray tasks also log to <temp dir>/ray_logs, a folder every user of the machine shares
            # (a second user's tasks die on its permissions): this job's tasks get a temp folder of its own
            tmp = logs / "tmp"
            tmp.mkdir(parents=True, exist_ok=True)
            ray.init(address=self.opts.ray_address or os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True,
                     runtime_env={"env_vars": {"TMPDIR": str(tmp)}})
        ex = RayPipelineExecutor(pipeline=[step], tasks=tasks, workers=self.opts.workers, logging_dir=str(logs),
                                 cpus_per_task=self.opts.cpus_per_task, mem_per_cpu_gb=self.opts.mem_per_cpu_gb)
        try:
            _run(ex, logs)
        finally:
            if started:
                ray.shutdown()
        if ex.get_incomplete_ranks(skip_completed=True):
            raise DataError(f"datatrove ray: tasks {ex.get_incomplete_ranks(skip_completed=True)} did not complete; "
                            f"see the task logs in {logs / 'logs'} and rerun (finished units are kept)")

    def _slurm(self, step, tasks: int, logs: Path) -> None:
        from datatrove.executor import SlurmPipelineExecutor

        o = self.opts
        # datatrove writes --mem-per-cpu={gb}G, "4.0G" for the CLI's float, which sbatch 22.05 refuses: whole
        # megabytes instead (an --sbatch-arg mem-per-cpu=... still wins)
        sbatch_args = {"mem-per-cpu": f"{max(1, round(o.mem_per_cpu_gb * 1024))}M", **o.sbatch_args}
        ex = SlurmPipelineExecutor(
            pipeline=[step], tasks=tasks, time=o.time, partition=o.partition, cpus_per_task=o.cpus_per_task,
            mem_per_cpu_gb=o.mem_per_cpu_gb, workers=o.workers, job_name=o.job_name, qos=o.qos,
            env_command=o.env_command, venv_path=o.venv_path, sbatch_args=sbatch_args,
            logging_dir=str(logs), slurm_logs_folder=str(logs / "slurm_logs"))
        _run(ex, logs)  # submits the array (nothing when every task already completed)
        if ex.job_id in (None, -1):
            return
        if not o.wait:
            raise Submitted(f"submitted Slurm job {ex.job_id} ({tasks} tasks, script {logs / 'launch_script.slurm'}); "
                            "rerun the same command after it has finished: finished units are linked, "
                            "missing ones resubmitted")
        while left := ex.get_incomplete_ranks(skip_completed=True):
            if not _slurm_job_queued(str(ex.job_id)):
                raise DataError(f"Slurm job {ex.job_id} ended with {len(left)} of {tasks} tasks incomplete "
                                f"(ranks {left[:10]}); see {logs / 'slurm_logs'} and rerun the same command "
                                "(finished units are kept, the rest resubmitted)")
            print(f"[preschool] waiting for Slurm job {ex.job_id}: {tasks - len(left)}/{tasks} tasks done", flush=True)
            time.sleep(o.poll_s)


def _plan(task: UnitJob, units, work: Path, planned: int | None) -> int | None:
    """Read on through ``units`` (after unit 0) up to ``planned`` units (None: the end), writing where each
    starts to ``work/u<k>.start.json``; returns the number of units (``planned``, or the count found)."""
    k = 0
    if planned is not None and planned <= 1:
        return planned
    for k, _ in units:  # a unit's start is known once its first document is read, i.e. when it is yielded
        token = task.start_token(k)
        if token is None:  # no position after all: the tasks read from the start
            return planned
        write_json(work / f"u{k:06d}.start.json", token)
        if planned is not None and k >= planned - 1:
            break
    return planned if planned is not None else k + 1


def _run(ex, logs: Path) -> None:
    try:
        ex.run()
    except PreschoolError:
        raise
    except subprocess.CalledProcessError as e:
        if not (isinstance(e.cmd, (list, tuple)) and e.cmd and e.cmd[0] == "sbatch"):
            raise DataError(f"datatrove executor failed ({e}); task logs: {logs / 'logs'}; rerun the same command "
                            "(finished units are kept)") from e
        # sbatch refused the script (a bad option, partition, limit): the same command is refused again
        raise DataError(f"sbatch refused the job array {logs / 'launch_script.slurm'} (exit {e.returncode}; its "
                        "reason is printed above): the same command would be refused again, so change what it "
                        "names (--partition, --time, --cpus-per-task, --mem-per-cpu-gb, --qos, --sbatch-arg)") from e
    except Exception as e:
        raise DataError(f"datatrove executor failed ({type(e).__name__}: {e}); task logs: {logs / 'logs'}; "
                        "rerun the same command (finished units are kept)") from e


def _slurm_job_queued(job_id: str) -> bool:
    """Whether the job may still run: an unreachable squeue counts as yes."""
    return slurm_job_alive(job_id) is not False
