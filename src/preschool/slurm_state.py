"""Where each job of an experiment's Slurm graph stands, and what a (re)launch does about it.

``preschool launch`` (:mod:`preschool.launch`) writes the job graph; this module is its relaunch
state machine. Every job is in exactly one state, read from the run folders (``done``, which the
launcher computes), Slurm's queue (``squeue``, each job found by the ``--comment`` it carries) and
``<out>/slurm/jobs.json`` (the id and script hash of every job a launch submitted):

==================  ==================================================  ======================================
state               the job is                                          a launch
==================  ==================================================  ======================================
``done``            finished with the current config (its outputs say   skips it; later jobs drop the
                    so)                                                 dependency
``queued``          pending or running in Slurm with the current        keeps it; later jobs depend on it
                    script
``stale``           pending or running with another script (the hash    cancels it and submits the current
                    in its comment is not the current script's: the     script; keeps a running arm whose run
                    config, a flag or a ``--set`` changed)              folder holds the current training
                                                                        config (cancelling it would lose the
                                                                        steps since its last checkpoint)
``never-runnable``  pending on a dependency that failed (Slurm's        cancels it and submits it again
                    reason ``DependencyNeverSatisfied``, or it waits
                    ``afterok`` on a job that ended without finishing)
``failed``          not done and no longer queued, or still ending      submits it again (after the dying job,
                    (``COMPLETING`` after ``scancel``)                  ``afterany``)
``absent``          never submitted and not in Slurm                    submits it
``removed``         in Slurm, carrying this output folder's tag, but    cancels it (pending or running): its
                    naming no job of the current graph (its arm, seed   run is no longer part of the
                    or rung was taken out of the config)                experiment
==================  ==================================================  ======================================

A job submitted again takes its dependents with it: a pending job that waits on it (it would wait
on the old id, or on nothing) is cancelled and submitted again after the new one; a running
report (``afterany`` on the arms) is kept and another one is submitted after it and the new arms.
A running job is never cancelled because its inputs (``afterok``) are submitted again: it already
started from them. Of several queued copies of one job (one submitted by hand), the one whose id
``jobs.json`` records decides the state; a job submitted again replaces every copy.

A job's *identity* (the hash in its comment) is what it reads, not the whole text of its script: the
launcher hashes the script without its ``--set`` arguments, plus a key of the inputs the job reads of the
config (prepare: the data; a run: its record and the data; the report: everything). So a ``--set
train.lr`` leaves a queued prepare current, and a ``--set`` of anything the job reads makes it stale.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .errors import PreschoolError
from .io import read_json, write_json

DONE, QUEUED, STALE, NEVER, FAILED, ABSENT = "done", "queued", "stale", "never-runnable", "failed", "absent"
REMOVED = "removed"

#: squeue states of a job that is over (squeue lists a job while it is COMPLETING; some sites list
#: ended jobs for a while): such a job holds nothing, so it is resubmitted (after it)
ENDING = {"COMPLETING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
          "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
#: squeue states of a job that has ended (COMPLETING is still ending: its processes may still hold what they held)
ENDED = ENDING - {"COMPLETING"}
NEVER_REASON = "DependencyNeverSatisfied"
_COMMENT_LINE = "#SBATCH --comment="
_DIGEST = re.compile(r"(.+):([0-9a-f]{12})")


@dataclass
class Job:
    """One sbatch script and the jobs it waits for."""

    name: str  # also the script's file stem
    role: str  # prepare | arm | report
    script: str
    after_ok: list[str] = field(default_factory=list)
    after_any: list[str] = field(default_factory=list)
    comment: str = ""  # the job's --comment, by which squeue finds it: <prefix><name>:<digest>
    run: tuple | None = None  # an arm job's (rung or None, arm, seed)
    digest: str = ""  # the job's identity (script_hash of what it runs and reads): in its comment and jobs.json
    after_ended: list[str] = field(default_factory=list)  # ids of dying jobs of this name it starts after


def script_hash(script: str) -> str:
    """12 hex digits of a job script, its ``--comment`` line left out (the comment carries the hash)."""
    body = "\n".join(x for x in script.rstrip("\n").splitlines() if not x.startswith(_COMMENT_LINE))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]


def with_digest(job: Job, digest: str | None = None) -> Job:
    """``job`` with ``digest`` (its identity; default: its script's hash) appended to its comment
    (``#SBATCH --comment=<comment>:<digest>``)."""
    digest = script_hash(job.script) if digest is None else digest
    comment = f"{job.comment}:{digest}"
    lines = [f"{_COMMENT_LINE}{comment}" if x == f"{_COMMENT_LINE}{job.comment}" else x
             for x in job.script.split("\n")]
    job.script, job.comment, job.digest = "\n".join(lines), comment, digest
    return job


# ----------------------------------------------------------------------------- what Slurm holds

@dataclass
class Queued:
    """A job of this experiment that ``squeue`` lists (pending, running, completing...)."""

    job_id: str
    state: str  # PENDING, RUNNING, COMPLETING, ...
    reason: str  # Slurm's reason: Resources, Priority, Dependency, DependencyNeverSatisfied, None...
    digest: str | None = None  # the identity its comment carries (None: a comment without one)
    script: str | None = None  # without a digest: script_hash of the script Slurm holds (None: not known)


class SlurmUnreachable(PreschoolError):
    """squeue failed (the controller is down or unreachable): what Slurm holds is unknown."""


def _said(res: subprocess.CompletedProcess) -> str:
    return " | ".join((res.stderr.strip() or res.stdout.strip() or "no output").splitlines())


def batch_script_hash(job_id: str) -> str | None:
    """The hash of the script Slurm holds for ``job_id`` (``scontrol write batch_script ID -``), None if
    it cannot be read (for a job whose comment carries no hash: one an older preschool submitted)."""
    if shutil.which("scontrol") is None:
        return None
    res = subprocess.run(["scontrol", "write", "batch_script", job_id, "-"], capture_output=True, text=True)
    return script_hash(res.stdout) if res.returncode == 0 and res.stdout.startswith("#!") else None


def read_queue(prefix: str) -> dict[str, list[Queued]] | None:
    """The jobs ``squeue --me`` lists whose comment starts with ``prefix``, name -> copies (squeue's order).

    None when ``squeue`` is not on PATH; a failing squeue raises :class:`SlurmUnreachable`. A comment
    without a digest (an older launch) gets the hash of the script Slurm holds, when it can be read.
    """
    if shutil.which("squeue") is None:
        return None
    res = subprocess.run(["squeue", "--me", "--noheader", "--format=%i|%T|%r|%k"], capture_output=True, text=True)
    if res.returncode != 0:
        raise SlurmUnreachable(f"squeue failed (exit {res.returncode}: {_said(res)})")
    found: dict[str, list[Queued]] = {}
    for line in res.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) != 4 or not parts[3].startswith(prefix):
            continue
        rest = parts[3][len(prefix):]
        m = _DIGEST.fullmatch(rest)
        held = Queued(parts[0], parts[1], parts[2], m.group(2)) if m else Queued(
            parts[0], parts[1], parts[2], script=batch_script_hash(parts[0]))
        found.setdefault(m.group(1) if m else rest, []).append(held)
    return found


# ----------------------------------------------------------------------------- what was submitted

@dataclass
class Recorded:
    """A job a launch submitted, as ``jobs.json`` records it."""

    job_id: str
    digest: str | None = None  # None: recorded by an older launch (a bare id)


def read_record(path: Path) -> dict[str, Recorded]:
    """``jobs.json``: name -> :class:`Recorded`; {} when missing or unreadable (it is only a memo of ids)."""
    try:
        known = read_json(path) if path.is_file() else {}
    except ValueError:
        return {}
    out = {}
    for name, v in (known.items() if isinstance(known, dict) else ()):
        if isinstance(v, dict) and isinstance(v.get("id"), (str, int)):
            out[name] = Recorded(str(v["id"]), v.get("script") if isinstance(v.get("script"), str) else None)
        elif isinstance(v, (str, int)):
            out[name] = Recorded(str(v))
    return out


def write_record(path: Path, submitted: dict[str, Recorded]) -> None:
    """Merge ``submitted`` into ``jobs.json`` (``{"<job>": {"id": "<job id>", "script": "<hash>"}}``), atomically."""
    known = {**read_record(path), **submitted}
    write_json(path, {n: {"id": r.job_id, **({"script": r.digest} if r.digest else {})} for n, r in known.items()})


# ----------------------------------------------------------------------------- the state machine

@dataclass
class Step:
    """What a launch does with one job: its state, in words, and whether it is submitted."""

    name: str
    state: str  # DONE, QUEUED, STALE, NEVER, FAILED or ABSENT
    says: str  # the state in words (the launch's and --status's line)
    submit: bool = False
    job_id: str | None = None  # the job Slurm holds for it (kept: later jobs depend on it), or the recorded one
    queued: Queued | None = None  # the copy that decided the state
    cancel: list[str] = field(default_factory=list)  # queued copies cancelled before it is submitted again
    after_ended: list[str] = field(default_factory=list)  # dying copies the new job starts after (afterany)

    @property
    def action(self) -> str:
        """The verb a launch prints: skip (done), keep (queued), submit (absent), resubmit, or cancel (removed)."""
        if self.state == REMOVED:
            return "cancel"
        if not self.submit:
            return "skip" if self.state == DONE else "keep"
        return "submit" if self.state == ABSENT else "resubmit"


def _in_slurm(q: Queued) -> str:
    return f"job {q.job_id} ({q.state}, reason {q.reason})"


def _is_stale(q: Queued, j: Job) -> bool:
    """Whether the queued copy ``q`` runs another job than ``j``: its identity is not ``j``'s; for a copy whose
    comment carries none (an older launch), the script Slurm holds is not ``j``'s script (unknown: not stale)."""
    if q.digest is not None:
        return q.digest != j.digest
    return q.script is not None and q.script != script_hash(j.script)


def plan(jobs: list[Job], done: dict[str, str], queue: dict[str, list[Queued]] | None,
         record: dict[str, Recorded], training: set[str] | frozenset = frozenset(),
         keeps: dict[str, str] | None = None) -> list[Step]:
    """The state of every job of ``jobs`` (in the graph's order, dependencies first) and what a launch does,
    then the jobs of ``queue`` that name no job of ``jobs`` (``removed``: each cancelled).

    ``done``: name -> why, the jobs whose outputs are complete and current; ``queue``: what
    :func:`read_queue` found (None: not known, every job not done counts as absent or failed from
    ``record``); ``record``: :func:`read_record`; ``training``: the arm jobs whose run folder was
    started with the current config (the launcher checked it), so that a running one of them whose
    script is stale (a flag or an eval/report setting changed) trains what the current script would:
    it is kept, not cancelled; ``keeps``: name -> what a job started again keeps of the work done
    (the launcher read it from the run folders: "it resumes from step 40, its last checkpoint"), said
    where a running job is replaced or kept. Pure: it reads nothing and runs nothing.
    """
    queue = queue or {}
    keeps = keeps or {}
    steps: dict[str, Step] = {}
    for j in jobs:
        copies, rec = queue.get(j.name, []), record.get(j.name)
        q = next((c for c in copies if rec is not None and c.job_id == rec.job_id), copies[0] if copies else None)
        if j.name in done:
            steps[j.name] = Step(j.name, DONE, done[j.name])
            continue
        if q is None:
            steps[j.name] = (Step(j.name, FAILED, f"job {rec.job_id} ended without finishing", True, rec.job_id)
                             if rec is not None else Step(j.name, ABSENT, "never submitted", True))
            continue
        pending = q.state == "PENDING"
        failed_inputs = [d for d in j.after_ok if steps[d].state in (FAILED, NEVER)]
        # a pending job waits on its dependencies' old ids: every one submitted again takes it along; a running
        # one already started from its inputs (afterok), but reports on what it waits for with afterany
        redone = [d for d in (j.after_ok + j.after_any if pending else j.after_any) if steps[d].submit]
        kept_running = False
        if q.state in ENDING:  # e.g. COMPLETING right after scancel: the new job starts once it is gone
            step = Step(j.name, FAILED, f"job {q.job_id} is ending ({q.state}) without finishing", True, q.job_id, q)
        elif pending and (q.reason == NEVER_REASON or failed_inputs):
            why = (f"reason {NEVER_REASON}" if q.reason == NEVER_REASON
                   else f"it waits on {', '.join(failed_inputs)}, which ended without finishing")
            step = Step(j.name, NEVER, f"job {q.job_id} (PENDING) can never start ({why})", True, q.job_id, q)
        elif _is_stale(q, j) and not pending and j.name in training:
            # cancelling it would lose the steps since its last checkpoint for nothing the training needs
            step = Step(j.name, STALE, f"{_in_slurm(q)} runs another script ({_hashes(q, j)}), but its run folder "
                        "holds the current training config: kept (scancel it and launch again to apply the new "
                        f"script{'; ' + keeps[j.name] if j.name in keeps else ''})", False, q.job_id, q)
        elif _is_stale(q, j):
            step = Step(j.name, STALE, f"{_in_slurm(q)} runs another script ({_hashes(q, j)})"
                        + ("" if pending or j.name not in keeps else f"; {keeps[j.name]}"), True, q.job_id, q)
        elif redone and pending:
            step = Step(j.name, QUEUED, f"{_in_slurm(q)} waits on {', '.join(redone)}, submitted again", True,
                        q.job_id, q)
        elif redone:  # a running report: it is kept, and another one reports after it and the new jobs
            step = Step(j.name, QUEUED, f"{_in_slurm(q)} started before {', '.join(redone)} were submitted again: "
                        "another one runs after them and it", True, q.job_id, q, after_ended=[q.job_id])
            kept_running = True
        else:
            step = Step(j.name, QUEUED, f"already in Slurm as {_in_slurm(q)} with the current script", False,
                        q.job_id, q)
        if step.submit and not kept_running:
            step.cancel = [c.job_id for c in copies if c.state not in ENDING]
            # a copy that ran dies for a while after scancel (COMPLETING): the new job starts after it is gone,
            # so the two never hold the run folder at once
            step.after_ended = [c.job_id for c in copies if c.state != "PENDING"]
        steps[j.name] = step
    # a job of this folder that names no job of the graph: its arm, seed or rung was taken out of the config;
    # left alone it would run (and write its run folder) unseen, or wait for ever on a cancelled prepare
    removed = [Step(name, REMOVED, f"{_in_slurm(copies[0])} is no job of the current config (its arm, seed or "
                    "rung was taken out of it)", False, copies[0].job_id, copies[0],
                    cancel=[c.job_id for c in copies if c.state not in ENDING])
               for name, copies in queue.items() if name not in steps and copies]
    removed.sort(key=lambda st: int(st.job_id) if st.job_id.isdigit() else 0)  # the order they were submitted in
    return [steps[j.name] for j in jobs] + removed


def _hashes(q: Queued, j: Job) -> str:
    """The queued copy's identity and the current one, as a launch line says them."""
    return f"hash {q.digest}; now {j.digest}" if q.digest is not None else "the script Slurm holds is not the current one"


def slurm_job_alive(job_id: str) -> bool | None:
    """Whether Slurm still queues or runs job ``job_id`` (``squeue``): a job listed in a state before
    :data:`ENDED` is (squeue may still list an ended job for MinJobAge); None when squeue cannot say (not
    on PATH, unreachable, an error other than an unknown job). What a lock held by a job on another node
    (:mod:`preschool.lock`) and the prepare job's wait (``data/distributed.py``) ask."""
    if shutil.which("squeue") is None:
        return None
    try:
        res = subprocess.run(["squeue", "--noheader", "--format=%T", f"--jobs={job_id}"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return False if "Invalid job id" in res.stderr else None
    return any(state.strip() not in ENDED for state in res.stdout.split())
