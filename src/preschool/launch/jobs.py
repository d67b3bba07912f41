"""The job graph of an experiment: which Slurm jobs there are, what each waits for, and which are done.

Three kinds of job: **prepare** (the data, once); **one job per run** (rung x arm x seed), each
``afterok`` on prepare and, for an arm that starts from another arm's run (e.g. ``compartment_model:
{init_from: c1}``), on that arm's job of the same seed (and rung); **report**, ``afterany`` on every
run job. The jobs are built from the Experiment's run records; each :class:`~preschool.slurm_state.Job`
names its dependencies explicitly, by job name (:func:`run_job_name` of the runs :func:`parent_runs`
gives); its script's text is :mod:`preschool.launch.scripts`. :func:`current_jobs` says which jobs' outputs are
already complete and current (the relaunch state machine's ``done``).

A job's identity (the digest its comment carries, :mod:`preschool.slurm_state`) is its script without
the ``--set`` arguments, plus a key of what it reads: prepare the config's data (:data:`DATA_INPUTS`),
a run its record (its resolved training config, datasets, callbacks) and the data, the report the whole
config. Every script carries every override, so that each job runs the config the launch read; but a
``--set train.lr`` makes stale only the runs whose training config it changes, and the report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .. import layout
from ..config import to_dict
from ..errors import DataError
# the runner (experiment/) loads the experiment and says whether its data is prepared; this package only
# writes and submits the jobs that run its commands
from ..experiment import Experiment, RunKey, RunRecord, check_run, require_prepared, training_order
from ..slurm_state import Job, script_hash, with_digest
from .options import SlurmOptions
from .scripts import arm_script, job_comment, prepare_script, report_script, report_stamp

#: the fields of an experiment config the prepare job reads (experiment.prepare.build_data: the plug-ins that
#: may define its parts, the data seed, the row length, the corpora, the tokenizer, every dataset, the
#: storybook minimal pairs): a change of any other field leaves a queued prepare current
DATA_INPUTS = ("plugins", "seed", "seq_len", "corpora", "tokenizer", "data", "minimal_pairs")


def _plain(obj: Any) -> Any:
    """``obj`` as JSON-able plain data (a frozen mapping or a record included)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return str(obj) if not isinstance(obj, (str, int, float, bool, type(None))) else obj


def _key(obj: Any) -> str:
    """16 hex digits naming ``obj``'s plain data."""
    return hashlib.sha256(json.dumps(_plain(obj), sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _identified(job: Job, unset: str, reads: str) -> Job:
    """``job`` with its identity: the hash of its script rendered without ``--set`` arguments (``unset``) and
    of the key of what it reads."""
    return with_digest(job, script_hash(f"{unset}\n# reads {reads}"))


def _rung_named(exp: Experiment, rung: str | None) -> bool:
    """Whether a run job names its rung: in a whole ladder; the view of one rung (``--set rung=R``) already says it."""
    return rung is not None and exp.cfg.rung is None


def run_job_name(exp: Experiment, key: RunKey | tuple) -> str:
    """The job of run ``key`` (rung, arm, seed): ``<arm>-seed<k>``, ``<rung>-<arm>-seed<k>`` in a whole ladder."""
    rung, arm, seed = key
    return f"{rung}-{arm}-seed{seed}" if _rung_named(exp, rung) else f"{arm}-seed{seed}"


def parent_runs(exp: Experiment, rec: RunRecord) -> list[RunKey]:
    """The runs whose jobs must end well (``afterok``) before ``rec``'s starts, besides prepare: the runs it starts
    from (``init_from: {arm: ...}``, a callback's ``arms_needed`` such as ``compartment_model: {init_from: c1}``)
    and the run whose shared prefix it continues (its branch), of the same rung and seed
    (``RunRecord.depends_on``)."""
    return list(rec.depends_on)


# record fields that say how runs hang together; left out of a run's key while unset, so the jobs of runs
# that start from nothing keep the identity they had before these fields existed
_LINKS = ("parents", "branch", "keep_state_at")


def _run_key(rec: RunRecord) -> str:
    plain = _plain(rec)
    return _key({k: v for k, v in plain.items() if not (k in _LINKS and not v)})


def slurm_jobs(exp: Experiment, opt: SlurmOptions) -> list[Job]:
    """The job graph: prepare -> one job per arm x seed (a ladder: per rung x arm x seed, ``--rung``) ->
    eval + report (scripts as text), dependencies first, each with its identity."""
    opt.validate()
    sets = exp.overrides
    tree = to_dict(exp.cfg)
    data = _key({k: tree[k] for k in DATA_INPUTS})
    jobs = [_identified(Job("prepare", "prepare", prepare_script(exp, opt, sets), comment=job_comment(exp, "prepare")),
                        prepare_script(exp, opt, ()), data)]
    arm_jobs: list[str] = []
    # one job per run record (a ladder's: per rung x arm x seed, each with --rung), submitted seed by seed within
    # a rung: every arm of the first seed queues before the second seed's, and a parent before its children
    seed_at = {s: k for k, s in enumerate(exp.seeds)}
    for rec in training_order(sorted(exp.runs, key=lambda r: (exp.rungs.index(r.rung), seed_at[r.seed], r.arm_index))):
        rung, arm, seed = rec.key
        name = run_job_name(exp, rec.key)
        after = ["prepare", *(run_job_name(exp, p) for p in parent_runs(exp, rec))]
        args = (exp, opt, name, arm, seed, rung if _rung_named(exp, rung) else None)
        job = Job(name, "arm", arm_script(*args, sets), after_ok=after, run=(rung, arm, seed),
                  comment=job_comment(exp, name))
        jobs.append(_identified(job, arm_script(*args, ()), f"{_run_key(rec)} {data}"))
        arm_jobs.append(name)
    whole = _key({k: v for k, v in tree.items() if k != "workers"})  # the report reads everything
    jobs.append(_identified(Job("report", "report", report_script(exp, opt, sets), after_any=arm_jobs,
                                comment=job_comment(exp, "report")), report_script(exp, opt, ()), whole))
    return jobs


def current_jobs(exp: Experiment, jobs: list[Job]) -> dict[str, str]:
    """The jobs whose outputs are complete and current, name -> why; a later launch submits only the rest.

    prepare: every dataset is prepared with its current spec. An arm x seed: the
    data is current, the run folder has ``DONE`` and its ``config.yaml`` matches
    the config (:func:`~preschool.experiment.check_run`, the runner's own check;
    a run made with another config raises :class:`ConfigError` here, named by the
    YAML key, before anything is submitted). report: no prepare or arm job runs and
    the last report job wrote the current config's key (``<out>/slurm/report.done``)
    after every run finished.
    """
    from ..lock import config_key

    done: dict[str, str] = {}
    try:
        require_prepared(exp)
    except DataError:
        return done  # the data is (re)built, so every arm trains on what prepare makes
    done["prepare"] = "data prepared with the current spec"
    finished = []
    for j in jobs:
        if j.role != "arm":
            continue
        rec = exp.record(j.run)
        run = rec.run_dir
        # verify "size": compare the manifests' recorded checksums, not rehash every shard on the login node
        check_run(exp, rec, verify="size")
        if layout.is_done(run):
            done[j.name] = f"finished with this config ({run / layout.DONE})"
            finished.append(run / layout.DONE)
    if all(j.name in done for j in jobs if j.role != "report"):
        stamp = report_stamp(exp)
        if (stamp.is_file() and stamp.read_text().strip() == config_key(exp.cfg)
                and all(stamp.stat().st_mtime >= f.stat().st_mtime for f in finished)):
            done["report"] = f"reported this config after every run finished ({stamp})"
    return done


def training_jobs(exp: Experiment, jobs: list[Job]) -> set[str]:
    """The arm jobs whose run folder has a ``config.yaml``: :func:`current_jobs` checked that it is the
    current training config (it refuses any other), so such a job trains what the current script would."""
    return {j.name for j in jobs if j.role == "arm" and layout.run_config_path(exp.record(j.run).run_dir).is_file()}


def rerun_keeps(exp: Experiment, jobs: list[Job]) -> dict[str, str]:
    """name -> what a job of ``jobs`` started again keeps of the work already done, read from its outputs:
    prepare its finished datasets and work units; a run its last checkpoint (or none yet); the report the
    evaluations already cached."""
    keeps = {}
    for j in jobs:
        if j.role == "prepare":
            keeps[j.name] = "it keeps the datasets and work units already built"
        elif j.role == "arm":
            cks = layout.list_checkpoints(exp.record(j.run).run_dir, required=False)
            keeps[j.name] = (f"it resumes from step {cks[-1][0]}, its last checkpoint" if cks
                             else "it starts from the beginning: no checkpoint was written yet")
        else:
            keeps[j.name] = "it reuses the evaluations already cached"
    return keeps
