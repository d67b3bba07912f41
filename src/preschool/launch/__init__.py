"""Slurm job graphs for an experiment (``preschool launch``): the scripts, what is current, the submission.

The jobs run the runner's commands (:mod:`preschool.experiment`: ``preschool
prepare``, ``preschool run --arm A --seed S``, ``preschool run --only eval
--only report``); this package only writes, checks and submits them.

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

The package, by role: ``options.py`` (what the jobs ask Slurm for), ``jobs.py`` (the job graph and
which jobs are done), ``scripts.py`` (each job's script text, names and paths), ``partition.py``
(the ``sinfo`` check), ``submit.py`` (``squeue``, ``sbatch``, ``scancel``, ``jobs.json``),
``launcher.py`` (one launch, start to end), ``status.py`` (``--status``); the command is
``commands/launch.py``.
The relaunch state machine itself is :mod:`preschool.slurm_state`, outside this package because the
runner asks it whether a Slurm job still holds a lock. The names below are re-exported here.
"""

from __future__ import annotations

from .options import CPUS_PER_PROCESS, PORT_SPAN, SlurmOptions
from .jobs import current_jobs, slurm_jobs
from .scripts import check_scripts, job_comment, out_tag, report_stamp, script_paths, slurm_job_name, write_scripts
from .partition import check_partition
from .submit import parse_job_id, sbatch_command, submit, submit_script, to_submit
from .launcher import launch
from .status import status

__all__ = ["CPUS_PER_PROCESS", "PORT_SPAN", "SlurmOptions", "check_partition", "check_scripts", "current_jobs",
           "job_comment", "launch", "out_tag", "parse_job_id", "report_stamp", "sbatch_command", "script_paths",
           "slurm_job_name", "slurm_jobs", "status", "submit", "submit_script", "to_submit", "write_scripts"]
