"""The relaunch state machine (preschool.slurm_state.plan) on graphs and queues written out by hand: each
job's state and what a launch does with it, without any Slurm tool."""

import json

from preschool.slurm_state import (ABSENT, DONE, FAILED, NEVER, QUEUED, REMOVED, STALE, Job, Queued, Recorded, plan,
                                   read_record, script_hash, with_digest, write_record)


def _graph() -> list[Job]:
    """prepare -> a, b (afterok) -> report (afterany), each script stamped with its hash."""
    jobs = [Job("prepare", "prepare", "#!/bin/bash\n#SBATCH --comment=p:prepare\necho prepare\n", comment="p:prepare")]
    for arm in ("a", "b"):
        jobs.append(Job(arm, "arm", f"#!/bin/bash\n#SBATCH --comment=p:{arm}\necho {arm}\n", after_ok=["prepare"],
                        comment=f"p:{arm}"))
    jobs.append(Job("report", "report", "#!/bin/bash\n#SBATCH --comment=p:report\necho report\n",
                    after_any=["a", "b"], comment="p:report"))
    return [with_digest(j) for j in jobs]


def _by_name(steps):
    return {s.name: s for s in steps}


def test_the_comment_carries_the_hash_of_the_script_without_the_comment_line():
    job = _graph()[1]
    assert job.comment == f"p:a:{job.digest}" and f"#SBATCH --comment=p:a:{job.digest}\n" in job.script
    assert script_hash(job.script) == job.digest  # the stamped script hashes as the unstamped one did
    assert script_hash(job.script.replace("echo a", "echo a2")) != job.digest


def test_a_running_stale_job_is_cancelled_and_its_successor_starts_after_it():
    jobs = _graph()
    d = {j.name: j.digest for j in jobs}
    queue = {"a": [Queued("12", "RUNNING", "None", "0" * 12)], "b": [Queued("13", "RUNNING", "None", d["b"])],
             "report": [Queued("14", "PENDING", "Dependency", d["report"])]}
    keeps = {"a": "it resumes from step 40, its last checkpoint"}  # what the launcher read in a's run folder
    steps = _by_name(plan(jobs, {"prepare": "data prepared"}, queue, {}, keeps=keeps))
    assert steps["prepare"].state == DONE and steps["prepare"].action == "skip"
    assert steps["a"].state == STALE and steps["a"].cancel == ["12"] and steps["a"].after_ended == ["12"]
    assert "it resumes from step 40, its last checkpoint" in steps["a"].says
    # issue 48 item 14: a job of which nothing is known to resume is not said to resume from a checkpoint
    assert "checkpoint" not in _by_name(plan(jobs, {"prepare": "data prepared"}, queue, {}))["a"].says
    assert steps["b"].state == QUEUED and steps["b"].action == "keep" and steps["b"].job_id == "13"
    assert steps["report"].submit and steps["report"].cancel == ["14"] and steps["report"].after_ended == []


def test_a_running_stale_arm_that_trains_the_current_config_is_kept():
    """A running arm whose script changed only in what its training does not read (its run folder holds the
    current training config): cancelling it would lose the steps since its last checkpoint, so it is kept
    and said to be stale; a pending stale one is replaced."""
    jobs = _graph()
    d = {j.name: j.digest for j in jobs}
    queue = {"a": [Queued("12", "RUNNING", "None", "0" * 12)], "b": [Queued("13", "PENDING", "Resources", "1" * 12)],
             "report": [Queued("14", "PENDING", "Dependency", d["report"])]}
    steps = _by_name(plan(jobs, {"prepare": "ok"}, queue, {}, training={"a", "b"}))
    a = steps["a"]
    assert a.state == STALE and not a.submit and a.action == "keep" and a.cancel == [] and a.job_id == "12"
    assert "scancel it and launch again" in a.says
    assert steps["b"].state == STALE and steps["b"].submit and steps["b"].cancel == ["13"]
    assert steps["report"].submit and steps["report"].cancel == ["14"]  # it waits on b, submitted again


def test_a_running_report_is_kept_and_another_follows_it_when_an_arm_is_resubmitted():
    jobs = _graph()
    d = {j.name: j.digest for j in jobs}
    queue = {"report": [Queued("14", "RUNNING", "None", d["report"])]}
    steps = _by_name(plan(jobs, {"prepare": "ok", "b": "DONE"}, queue, {"a": Recorded("12", d["a"])}))
    assert steps["a"].state == FAILED and steps["a"].submit and steps["a"].job_id == "12"
    report = steps["report"]
    assert report.state == QUEUED and report.submit and report.cancel == [] and report.after_ended == ["14"]


def test_the_recorded_copy_decides_and_a_resubmission_replaces_every_copy():
    jobs = _graph()
    d = {j.name: j.digest for j in jobs}
    old = Queued("9", "PENDING", "DependencyNeverSatisfied", d["a"])
    queue = {"prepare": [Queued("10", "RUNNING", "None", d["prepare"])],
             "a": [old, Queued("11", "PENDING", "Dependency", d["a"])]}
    steps = _by_name(plan(jobs, {}, queue, {"a": Recorded("11", d["a"])}))
    assert steps["a"].state == QUEUED and steps["a"].job_id == "11" and not steps["a"].submit
    steps = _by_name(plan(jobs, {}, queue, {"a": Recorded("9", d["a"])}))
    assert steps["a"].state == NEVER and steps["a"].cancel == ["9", "11"]
    assert steps["b"].state == ABSENT and steps["report"].state == ABSENT


def test_jobs_json_of_an_older_launch_still_reads(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"prepare": "7", "a": 8}))
    assert read_record(path) == {"prepare": Recorded("7"), "a": Recorded("8")}
    write_record(path, {"a": Recorded("9", "abcdefabcdef")})
    assert json.loads(path.read_text()) == {"prepare": {"id": "7"}, "a": {"id": "9", "script": "abcdefabcdef"}}


def test_a_lock_holders_job_is_alive_while_squeue_lists_it_before_its_end(tmp_path, monkeypatch):
    # issue #39: the run lock's and the prepare job's liveness check is this one squeue call; a fake squeue
    # prints the state the test gives it (or fails as the controller does)
    from preschool.slurm_state import slurm_job_alive

    squeue = tmp_path / "squeue"
    monkeypatch.setenv("PATH", f"{tmp_path}")

    def says(out: str, err: str = "", rc: int = 0) -> None:
        squeue.write_text(f"#!/bin/sh\nprintf '{out}'\nprintf '{err}' >&2\nexit {rc}\n")
        squeue.chmod(0o755)

    assert slurm_job_alive("7") is None  # no squeue on PATH: cannot say
    for out, alive in (("RUNNING\\n", True), ("PENDING\\n", True), ("COMPLETING\\n", True),
                       ("COMPLETED\\n", False), ("TIMEOUT\\n", False), ("", False)):
        says(out)
        assert slurm_job_alive("7") is alive, out
    says("", "slurm_load_jobs error: Invalid job id specified", 1)
    assert slurm_job_alive("7") is False
    says("", "slurm_load_jobs error: Unable to contact slurm controller", 1)
    assert slurm_job_alive("7") is None


def test_a_queued_job_of_the_folder_that_names_no_job_of_the_graph_is_removed_and_cancelled():
    """Issue 48 item 3: a seed or arm taken out of the config left its queued jobs running, unseen. A job whose
    comment carries this folder's tag but names no job of the graph is ``removed``: every copy still alive is
    cancelled (pending or running), and nothing is submitted for it."""
    jobs = _graph()
    d = {j.name: j.digest for j in jobs}
    queue = {"a": [Queued("12", "PENDING", "Dependency", d["a"])],
             "c": [Queued("15", "RUNNING", "None", "2" * 12), Queued("16", "COMPLETING", "None", "2" * 12)],
             "c-held": [Queued("17", "PENDING", "DependencyNeverSatisfied", "3" * 12)]}
    steps = plan(jobs, {"prepare": "ok"}, queue, {})
    assert [s.name for s in steps] == ["prepare", "a", "b", "report", "c", "c-held"]
    c, held = steps[-2:]
    assert c.state == REMOVED and c.action == "cancel" and not c.submit and c.cancel == ["15"]
    assert held.state == REMOVED and held.cancel == ["17"] and "no job of the current config" in held.says
    assert _by_name(steps)["a"].state == QUEUED and not _by_name(steps)["a"].submit
