"""One ``preschool launch --slurm``: check, decide every job's state, write the scripts, cancel, submit, record."""

from __future__ import annotations

import shlex
import shutil

from .. import layout
from ..errors import ConfigError, DataError, PreschoolError
from ..experiment import Experiment, check_stale_data
from ..lock import command_line, output_lock
from ..slurm_state import DONE, REMOVED, STALE, Recorded, SlurmUnreachable, plan, read_record, write_record
from .jobs import current_jobs, rerun_keeps, slurm_jobs, training_jobs
from .options import SlurmOptions, save
from .partition import check_partition
from .scripts import check_scripts, write_scripts
from .submit import NO_SBATCH, cancel_replaced, jobs_record, queue, submit, submit_script, to_submit

#: the key every launch holds the ``<out>/slurm`` lock with: a second launch of the folder waits for the first
LAUNCH_KEY = "preschool launch"


def launch(exp: Experiment, opt: SlurmOptions, dry_run: bool = False) -> dict[str, str]:
    """Check the scripts and the partition, put every job in its state (:func:`preschool.slurm_state.plan`),
    write the scripts, cancel the queued jobs it replaces (and those of the folder that name no job of the
    graph) and submit the rest; name -> job id of what was submitted.

    Nothing is written before the decision is made: a launch refused (no sbatch, a bad request, squeue
    failing) leaves the scripts of the last launch as they were. A dry run prints the same decision and
    a submission script (also written to ``<out>/slurm/submit.sh``), cancelling and submitting nothing.
    A launch that can submit holds the lock of ``<out>/slurm`` from reading the queue to writing
    ``jobs.json``: a second launch of the same folder waits for it, then finds its jobs queued.
    """
    opt = opt.here()
    jobs = slurm_jobs(exp, opt)
    check_scripts(jobs)
    checked = check_partition(opt)
    refuse_stale_data(exp)
    done = current_jobs(exp, jobs)
    if dry_run or shutil.which("sbatch") is None:  # nothing can be submitted: no race to guard against
        return _launch(exp, opt, jobs, checked, done, dry_run)
    command = command_line("launch", str(exp.path), exp.overrides, None)
    with output_lock(layout.slurm_dir(exp.out_dir), command, key=LAUNCH_KEY):
        return _launch(exp, opt, jobs, checked, done, dry_run)


def refuse_stale_data(exp: Experiment) -> None:
    """Refuse (DataError, one line) a config whose data spec differs from the data already prepared in its
    folder: the prepare job would stop asking for ``--rebuild``, which a launch does not give, and every job
    after it would never start. The runner's own check (:func:`~preschool.experiment.check_stale_data`),
    with the rebuild's own refusal of data a trained run used; the fix is a ``preschool prepare --rebuild``."""
    stale = check_stale_data(exp, rebuild=True)
    if stale:
        first = stale[0]
        also = f" (and {', '.join(repr(s.dataset) for s in stale[1:])})" if stale[1:] else ""
        cmd = " ".join(["preschool", "prepare", shlex.quote(str(exp.path)),
                        *(f"--set {shlex.quote(o)}" for o in exp.overrides), "--rebuild"])
        raise DataError(f"{first.path}: dataset {first.dataset!r} was prepared with another {first.field} "
                        f"({first.detail}){also}; nothing was submitted: a launch does not replace prepared data, "
                        f"so rebuild it first ({cmd}) or give the experiment another out")


def _launch(exp: Experiment, opt: SlurmOptions, jobs: list, checked: str, done: dict[str, str],
            dry_run: bool) -> dict[str, str]:
    """:func:`launch` from reading the queue on (under the lock when it submits)."""
    from ..io import write_text

    try:
        held = queue(exp)
    except SlurmUnreachable as e:
        if not dry_run:
            raise PreschoolError(f"{e}; without it the jobs of {exp.out_dir} that are already queued cannot be "
                                 "told apart, so nothing was submitted") from None
        held, unchecked = None, str(e)  # a dry run away from the cluster still shows the rest
    else:
        unchecked = "squeue is not on PATH"
    steps = plan(jobs, done, held, read_record(jobs_record(exp)), training_jobs(exp, jobs), rerun_keeps(exp, jobs))
    todo = to_submit(jobs, steps)
    if todo and not dry_run and shutil.which("sbatch") is None:
        raise ConfigError("--slurm", NO_SBATCH)  # before any script is written
    paths = write_scripts(exp, jobs, checked=True)
    save(exp.out_dir, opt)  # what --status builds the jobs with
    hw = (f"{opt.nodes} node(s) x {opt.gpus_per_node} GPU(s)" if opt.gpus_per_node
          else f"{opt.nodes} node(s) x {opt.procs} CPU process(es)")
    print(f"[preschool] {len(jobs)} job scripts in {layout.slurm_dir(exp.out_dir)}: prepare, "
          f"{len(jobs) - 2} arm x seed job(s) on {hw}, report")
    print(f"[preschool] {checked}")
    if held is None:
        print(f"[preschool] queued jobs not checked ({unchecked})")
    for st in steps:  # every job, in the graph's order, then the removed ones: its state and what is done
        print(f"[preschool] {st.action} {st.name} [{st.state}]: {st.says}")
    cancel = [i for st in steps for i in st.cancel]
    if not todo:
        kept_stale = any(st.state == STALE for st in steps)
        print("[preschool] nothing to run: every job's outputs are complete and current"
              + ((", or it is queued or running" + ("" if kept_stale else " with the current script")) if held
                 else ""))
        if cancel and not dry_run:
            cancel_replaced(steps)
        elif cancel:
            print(f"[preschool] would cancel job(s) {', '.join(cancel)}")
        return {}
    kept = {st.name: st.job_id for st in steps if st.state not in (DONE, REMOVED) and not st.submit}
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
    cancel_replaced(steps)
    digests = {j.name: j.digest for j in todo}
    try:
        ids = submit(todo, paths, exp=exp, kept=kept)
    except PreschoolError as e:
        replaced = [i for st in steps if st.state != REMOVED for i in st.cancel]
        if replaced:  # the jobs cancelled are gone: say so, a relaunch submits them (failed or absent)
            raise PreschoolError(f"{e}; the jobs cancelled before it ({', '.join(replaced)}) are submitted by the "
                                 "next launch") from None
        raise
    write_record(jobs_record(exp), {n: Recorded(i, digests[n]) for n, i in ids.items()})
    return ids
