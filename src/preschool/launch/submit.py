"""Talking to Slurm: what it holds of this experiment (``squeue``), ``sbatch`` in dependency order, ``scancel``.

Every job carries ``--comment=preschool:<out folder tag>:<job>:<script hash>``
(:func:`~preschool.launch.scripts.job_comment`), by which :func:`queue` finds this folder's jobs;
``<out>/slurm/jobs.json`` (:func:`jobs_record`) memos the id and script hash of every job a launch
submitted. A submission stops at the first ``sbatch`` that fails or prints no job id, cancelling what
it had submitted and any job of that script ``squeue`` shows queued.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from .. import layout
from ..errors import ConfigError, PreschoolError
from ..experiment import Experiment
from ..slurm_state import DONE, Job, Queued, Step, read_queue
from .scripts import job_comment, shell_word, slurm_job_name

# what `sbatch --parsable` prints: "jobid" or "jobid;cluster"
_JOB_ID = re.compile(r"(\d+)(;[\w.-]+)?")
NO_SBATCH = "sbatch not found on PATH (run on a Slurm login node, or use --dry-run)"


def jobs_record(exp: Experiment) -> Path:
    """``<out>/slurm/jobs.json``: the id and script hash of every job a launch submitted."""
    return layout.slurm_dir(exp.out_dir) / "jobs.json"


def queue(exp: Experiment) -> dict[str, list[Queued]] | None:
    """The experiment's jobs Slurm holds (:func:`preschool.slurm_state.read_queue` by this folder's comment
    prefix), name -> copies; None without squeue; :class:`~preschool.slurm_state.SlurmUnreachable` when
    squeue fails."""
    return read_queue(job_comment(exp, ""))


# ----------------------------------------------------------------------------- sbatch

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


def _stray(exp: Experiment, job: Job, ids: dict[str, str]) -> tuple[str | None, str]:
    """After an sbatch that printed no job id: the id of the job it may have queued anyway (squeue by
    the job's comment), and what the user is told when squeue cannot say."""
    hint = (f"sbatch may still have queued it: look for job name {slurm_job_name(exp, job.name)} with "
            f"comment {job.comment} (squeue --me --name={slurm_job_name(exp, job.name)} --format=%i,%k) "
            "and scancel it")
    try:
        held = queue(exp)
    except PreschoolError:
        return None, hint
    if held is None:
        return None, hint
    new = [q.job_id for q in held.get(job.name, []) if q.digest == job.digest and q.job_id not in ids.values()
           and q.job_id not in job.after_ended and q.state == "PENDING"]
    if new:
        return new[0], ""
    return None, f"squeue shows no job of {job.name}, so it was not queued"


def submit(jobs: list[Job], paths: dict[str, Path], dry_run: bool = False, exp: Experiment | None = None,
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
        raise ConfigError("--slurm", NO_SBATCH)
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
        cmd = " ".join(c if c.startswith("--dependency") else shell_word(c)
                       for c in sbatch_command(j, paths[j.name], refs))
        var = _id_var(j.name, taken)
        lines += [f"{var}=$({cmd} | cut -d ';' -f 1)",
                  f": \"${{{var}:?sbatch printed no job id for {j.name}}}\"",
                  f"echo \"submitted {j.name}: job ${var}\""]
        refs[j.name] = f"${{{var}}}"
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- scancel

def cancel_replaced(steps: list[Step]) -> None:
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
