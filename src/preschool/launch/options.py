"""What the generated jobs ask Slurm for (:class:`SlurmOptions`, from ``preschool launch``'s flags)."""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from ..errors import ConfigError
from ..io import read_json, write_json

CPUS_PER_PROCESS = 4  # default CPUs a job asks per training process (data loading + the main thread)
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
    # not flags: where the jobs run (--chdir) and whose Python (PATH), the launch's own unless recorded
    chdir: str | None = None
    python_dir: str | None = None

    def here(self) -> SlurmOptions:
        """These options with ``chdir`` and ``python_dir`` filled in from this process (where ``launch``
        runs, and its Python), as a launch writes them into the scripts and records them (:func:`save`)."""
        return dataclasses.replace(self, chdir=self.chdir or str(Path.cwd()),
                                   python_dir=self.python_dir or str(Path(sys.executable).parent))

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

    @property
    def side_time(self) -> str | None:
        """The time limit of the prepare and report jobs: ``report_time``, else ``time``."""
        return self.report_time or self.time

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


def options_record(out: Path) -> Path:
    """``<out>/slurm/launch.json``: the options of the last launch, which ``--status`` builds the jobs with."""
    return layout.slurm_dir(out) / "launch.json"


def save(out: Path, opt: SlurmOptions) -> None:
    """Record the options a launch wrote its scripts with (atomically)."""
    write_json(options_record(out), dataclasses.asdict(opt))


def saved(out: Path) -> SlurmOptions | None:
    """The options the last launch recorded in ``out``; None when none did (or the record cannot be read:
    it is only a memo, ``--status`` then uses the default options)."""
    path = options_record(out)
    try:
        known = read_json(path) if path.is_file() else None
    except ValueError:
        return None
    names = {f.name for f in dataclasses.fields(SlurmOptions)}
    if not isinstance(known, dict) or not set(known) <= names:
        return None
    try:
        return SlurmOptions(**known)
    except TypeError:
        return None
