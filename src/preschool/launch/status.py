"""``preschool launch --status``: one line per job of the graph, in the relaunch state machine's states."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from pathlib import Path

from ..experiment import Experiment
from ..slurm_state import ABSENT, DONE, FAILED, NEVER, REMOVED, STALE, SlurmUnreachable, plan, read_record
from .jobs import current_jobs, rerun_keeps, slurm_jobs, training_jobs
from .options import SlurmOptions, saved
from .scripts import logs_dir, slurm_job_name
from .submit import jobs_record, queue


def _log_tail(exp: Experiment, name: str, job_id: str | None, lines: int = 10) -> tuple[Path, str] | None:
    """The last ``lines`` lines of job ``name``'s log (of job ``job_id``, else its newest), or None."""
    logs = logs_dir(exp)
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


def status(exp: Experiment, opt: SlurmOptions | None = None) -> list[str]:
    """One line per job of the graph (``preschool launch --status``), in the relaunch's states: done;
    in Slurm with its state and reason (and, when it runs another script or can never start, that a
    launch replaces it); ended without finishing (the state Slurm recorded, and its log's last lines);
    or never submitted. When the controller cannot be reached the states come from ``jobs.json`` and
    the run folders alone, and the first line says so. A job of the folder that names no job of the
    graph (its arm, seed or rung was taken out of the config) is said to be one, which a launch cancels.
    The jobs are those a launch now would write, with the options the last launch recorded (``opt``
    when given; :func:`preschool.launch.options.saved`). Returns the lines (printed by the CLI)."""
    jobs = slurm_jobs(exp, opt or saved(exp.out_dir) or SlurmOptions().here())
    done = current_jobs(exp, jobs)
    out = []
    try:
        held = queue(exp)
    except SlurmUnreachable as e:
        held = None
        out.append(f"(the Slurm controller cannot be reached: {e}; what follows is from {jobs_record(exp)} and "
                   "the run folders: a job not done may still be queued or running)")
    else:
        if held is None:
            out.append("(squeue is not on PATH: queued and running jobs are not shown)")
    unknown = held is None
    digests = {j.name: j.digest for j in jobs}
    record = read_record(jobs_record(exp))
    keeps = rerun_keeps(exp, jobs)
    for st in plan(jobs, done, held, record, training_jobs(exp, jobs), keeps):
        q = st.queued
        if st.state == DONE:
            out.append(f"{st.name}: done ({st.says})")
        elif st.state == REMOVED:
            out.append(f"{st.name}: {q.state} as job {q.job_id} (reason {q.reason}); it is no job of the current "
                       "config (its arm, seed or rung was taken out of it): `preschool launch` again cancels it")
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
                       f"`preschool launch` again resubmits it ({keeps[st.name]})")
            tail = _log_tail(exp, st.name, st.job_id)
            if tail is not None and tail[1].strip():
                out.append(f"  last lines of {tail[0]}:")
                out += [f"    {x}" for x in tail[1].splitlines()]
            elif tail is not None:
                out.append(f"  its log {tail[0]} is empty: the job ended before printing anything")
    return out
