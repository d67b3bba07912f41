"""Refuse, before anything is submitted, a request no node of the partition can meet (``sinfo``)."""

from __future__ import annotations

import re
import shutil
import subprocess

from ..errors import ConfigError
from .options import SlurmOptions


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
    ``--cpus-per-task``, else :data:`~preschool.launch.options.CPUS_PER_PROCESS`), the report job
    ``--report-gpus`` GPUs (prepare asks none); every job ``--mem``, each its time limit. A request over
    the largest node (or more nodes than the partition has, or a time over its limit) would stay pending
    forever (``PartitionConfig``): :class:`ConfigError` names the flag. Returns what was checked (or why not).
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
    side_time = opt.side_time
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
