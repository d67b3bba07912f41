"""`preschool launch --slurm` against a real one-node Slurm on this machine (scripts/local_slurm.sh).

Opt-in (marker ``slurm``, excluded by default): needs root and ``apt-get install -y slurm-wlm
munge``; runs ``pytest -m slurm tests/cluster -s`` in a few minutes on 2 cores. One Slurm serves the
module's tests. A micro experiment of three arms, one of them FSDP, runs as CPU jobs of two torchrun
ranks on one CPU each, so two arm jobs share the node at once (each with its own rendezvous); a
request the partition cannot meet is refused first; a relaunch while the jobs are queued or running
submits nothing, ``--status`` shows them, and a launch after they finished submits nothing. A
relaunch after a failed prepare resubmits the arms that can never start (and the report); one right
after ``scancel`` resubmits the dying arm; ``--status`` works with the controller unreachable; a
relaunch with another config replaces the queued jobs' stale scripts (issue 40), and, of the node's
two fake GPUs, a job given one whose torch sees no CUDA stops in one line instead of training on the
CPU (issue 48). docs/scale.md records a run's output.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local_slurm.sh"

MICRO_YAML = ROOT / "tests" / "launch_micro.yaml"  # two micro arms, a and b

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE"}


def _states(env: dict, ids: list[str]) -> dict[str, str]:
    out = {}
    for i in ids:
        res = subprocess.run(["scontrol", "show", "job", "-o", i], env=env, capture_output=True, text=True)
        m = re.search(r"JobState=(\S+)", res.stdout)
        out[i] = m.group(1) if m else "UNKNOWN"
    return out


def _wait(env: dict, ids: list[str], timeout: float, arms: list[str]) -> tuple[dict[str, str], int]:
    """Wait for ``ids`` to end; returns their final states and the most ``arms`` seen RUNNING at once."""
    end = time.monotonic() + timeout
    together = 0
    while time.monotonic() < end:
        states = _states(env, ids)
        together = max(together, sum(states[i] == "RUNNING" for i in arms))
        if all(s in FINAL for s in states.values()):
            return states, together
        time.sleep(2)
    raise AssertionError(f"jobs not finished after {timeout} s: {_states(env, ids)}")


def _times(env: dict, job: str) -> tuple[str, str]:
    res = subprocess.run(["scontrol", "show", "job", "-o", job], env=env, capture_output=True, text=True)
    return tuple(re.search(rf"{k}=(\S+)", res.stdout).group(1) for k in ("StartTime", "EndTime"))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A one-node Slurm for the module's tests: the environment its commands run in (SLURM_CONF set)."""
    if os.geteuid() != 0 or not all(shutil.which(x) for x in ("munged", "slurmctld", "slurmd", "sbatch")):
        pytest.skip("needs root and slurm-wlm + munge (apt-get install -y slurm-wlm munge)")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs (two arm jobs of one CPU at once)")
    state = tmp_path_factory.mktemp("slurm")
    # two fake GPUs (device files Slurm hands out; nothing computes on them): a job that asks for them gets
    # the environment of a GPU job (test_a_job_given_gpus_that_torch_cannot_see_stops_in_one_line)
    subprocess.run([str(SCRIPT), "start", str(state)], check=True, capture_output=True, text=True,
                   env={**os.environ, "GPUS": "2"})
    env = {**os.environ, "SLURM_CONF": str(state / "slurm.conf"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SLURM_CPUS_PER_TASK", None)
    try:
        version = subprocess.run(["sinfo", "--version"], env=env, capture_output=True, text=True).stdout.strip()
        print(f"\n{version}")
        yield env
    finally:
        subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)


def _micro(tmp_path: Path) -> Path:
    cfg = tmp_path / "micro.yaml"  # the launcher's micro experiment plus an FSDP arm
    cfg.write_text(MICRO_YAML.read_text().replace("report:", "  - name: c\n    train: {parallel: fsdp}\n"
                                                  "    stages: [{name: pt, data: pt, tokens: 2048}]\nreport:", 1))
    return cfg


def test_launch_on_a_local_slurm_shared_node_relaunch_and_fsdp(slurm, tmp_path):
    env = slurm
    cfg = _micro(tmp_path)
    out = tmp_path / "out"
    base = [sys.executable, "-m", "preschool.cli", "launch", str(cfg), "--set", f"out={out}"]
    launch = base + ["--slurm", "--gpus-per-node", "0", "--procs-per-node", "2", "--time", "00:20:00"]

    def run(*extra):
        return subprocess.run(launch + list(extra), env=env, cwd=tmp_path, capture_output=True, text=True)

    # a job the one 2-CPU node can never run is refused before anything is submitted (item 4)
    refused = run("--cpus-per-task", "4")
    assert refused.returncode == 2 and "--cpus-per-task" in refused.stderr, refused.stderr
    assert "the largest node of partition cpu has 2" in refused.stderr
    assert not (out / "slurm" / "jobs.json").exists()
    # one CPU per arm job: two of them run on the node at once (item 1)
    first = run("--cpus-per-task", "1")
    assert first.returncode == 0, first.stderr
    ids = re.findall(r"submitted (\S+): job (\d+)", first.stdout)
    assert [n for n, _ in ids] == ["prepare", "a-seed0", "b-seed0", "c-seed0", "report"], first.stdout
    # a relaunch while they are queued or running submits nothing (item 2)
    again = run("--cpus-per-task", "1")
    assert again.returncode == 0, again.stderr
    assert "submitted" not in again.stdout and "nothing to run" in again.stdout, again.stdout
    assert again.stdout.count("already in Slurm as job") == 5, again.stdout
    status = subprocess.run(base + ["--status"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert status.returncode == 0 and re.search(r"a-seed0: (PENDING|RUNNING) as job", status.stdout), status
    arm_ids = [i for n, i in ids if n.endswith("-seed0")]
    # and again once an arm job runs: still nothing is submitted twice
    end = time.monotonic() + 600
    while "RUNNING" not in _states(env, arm_ids).values() and time.monotonic() < end:
        time.sleep(1)
    running = run("--cpus-per-task", "1")
    assert running.returncode == 0 and "submitted" not in running.stdout, running
    assert re.search(r"keep [abc]-seed0 \[queued\]: already in Slurm as job \d+ \(RUNNING", running.stdout), \
        running.stdout
    states, together = _wait(env, [i for _, i in ids], timeout=1200, arms=arm_ids)
    logs = {p.name: p.read_text() for p in sorted((out / "slurm" / "logs").glob("*.out"))}
    assert set(states.values()) == {"COMPLETED"}, (states, logs)
    spans = {n: _times(env, i) for n, i in ids}
    overlap = any(spans[x][0] < spans[y][1] and spans[y][0] < spans[x][1]
                  for x in ("a-seed0", "b-seed0", "c-seed0") for y in ("a-seed0", "b-seed0", "c-seed0") if x < y)
    assert together >= 2 or overlap, spans  # two arm jobs shared the node at once
    for arm in ("a", "b", "c"):
        assert (out / "arms" / arm / "seed0" / "DONE").is_file()
    assert "parallel: fsdp" in (out / "arms" / "c" / "seed0" / "config.yaml").read_text()
    assert (out / "report.md").is_file() and (out / "slurm" / "report.done").is_file()
    # srun handed each job its 1 CPU; the job's 2 ranks share it, one torch thread each
    arm_log = next(text for name, text in logs.items() if name.startswith("micro-a-seed0-"))
    assert "torch threads per rank: 1 (1 CPUs" in arm_log and "/ 2 local ranks)" in arm_log
    last = run("--cpus-per-task", "1")
    assert last.returncode == 0, last.stderr
    assert "nothing to run" in last.stdout and "submitted" not in last.stdout
    print(f"$ preschool launch --cpus-per-task 4\n{refused.stderr}\n$ preschool launch (first)\n{first.stdout}\n"
          f"$ preschool launch (again, while queued)\n{again.stdout}\n$ preschool launch --status\n"
          f"{status.stdout}\n$ preschool launch (again, while an arm runs)\n{running.stdout}\n"
          f"job states: {states}; arm jobs running at once: {together}; spans: {spans}\n"
          f"$ preschool launch (after)\n{last.stdout}")


def _squeue(env: dict) -> dict[str, tuple[str, str]]:
    """job id -> (state, reason) of every job squeue lists."""
    res = subprocess.run(["squeue", "--noheader", "--format=%i|%T|%r"], env=env, capture_output=True, text=True)
    return {i: (s, r) for i, s, r in (line.split("|") for line in res.stdout.split())}


def _until(what, timeout: float, every: float = 0.5):
    """Poll ``what()`` until it returns something true; that value (AssertionError after ``timeout`` s)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"not reached in {timeout} s")


def test_a_relaunch_after_a_failed_prepare_and_after_scancel_recovers(slurm, tmp_path):
    """Issue 40 items 1, 3, 4, 5. prepare fails (its setup line finds no okflag), so the arms sit PENDING
    with DependencyNeverSatisfied; once okflag exists, one relaunch resubmits prepare, the arms and the
    report and cancels the old ones, and the experiment finishes. An arm cancelled while it runs
    (its shell sleeps 8 s on SIGTERM, so it stays COMPLETING) is resubmitted by a relaunch at once,
    starting after the dying job. --status with the controller unreachable still shows every job done."""
    env = slurm
    out = tmp_path / "out"
    base = [sys.executable, "-m", "preschool.cli", "launch", str(MICRO_YAML), "--set", f"out={out}"]
    launch = base + ["--slurm", "--gpus-per-node", "0", "--cpus-per-task", "1", "--time", "00:20:00",
                     "--setup", "[ -e okflag ] || exit 1", "--setup", "trap 'sleep 8' TERM"]

    def run(cmd):
        res = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert res.returncode == 0, (res.stdout, res.stderr)
        return res.stdout

    first = run(launch)
    ids = dict(re.findall(r"submitted (\S+): job (\d+)", first))
    _until(lambda: all(_squeue(env).get(ids[a], ("", ""))[1] == "DependencyNeverSatisfied"
                       for a in ("a-seed0", "b-seed0")), 120)
    # issue 48 item 14: the log of the job its --setup line stopped says so, and --status shows it truthfully
    prep_log = out / "slurm" / "logs" / f"micro-prepare-{ids['prepare']}.out"
    assert "[preschool] the job script stopped with exit 1 in its --setup lines" in prep_log.read_text()
    failed = run(base + ["--status"])
    assert (f"prepare: job {ids['prepare']} ended without finishing (FAILED); `preschool launch` again resubmits it "
            "(it keeps the datasets and work units already built)\n  last lines of") in failed, failed
    (tmp_path / "okflag").touch()
    again = run(launch)
    assert f"resubmit prepare [failed]: job {ids['prepare']} ended without finishing" in again, again
    for arm in ("a-seed0", "b-seed0"):
        assert f"resubmit {arm} [never-runnable]: job {ids[arm]} (PENDING) can never start" in again, again
    assert f"resubmit report [queued]: job {ids['report']} (PENDING, reason Dependency) waits on" in again, again
    new = dict(re.findall(r"submitted (\S+): job (\d+)", again))
    assert list(new) == ["prepare", "a-seed0", "b-seed0", "report"], again
    # the old jobs are gone: one report job is left (two ran before, the old one while an arm trained)
    queued = _squeue(env)
    assert not {ids["a-seed0"], ids["b-seed0"], ids["report"]} & set(queued), queued
    states = _states(env, [ids[n] for n in ("prepare", "a-seed0", "b-seed0", "report")])
    assert states[ids["prepare"]] == "FAILED" and states[ids["report"]] == "CANCELLED", states
    # cancel a-seed0 while it trains and relaunch at once: it is ending (COMPLETING) and is resubmitted
    _until(lambda: _squeue(env).get(new["a-seed0"], ("",))[0] == "RUNNING", 600)
    time.sleep(3)  # let it start training
    subprocess.run(["scancel", new["a-seed0"]], env=env, check=True)
    _until(lambda: _squeue(env).get(new["a-seed0"], ("",))[0] == "COMPLETING", 10, every=0.1)
    third = run(launch)
    assert f"resubmit a-seed0 [failed]: job {new['a-seed0']} is ending (COMPLETING) without finishing" in third, third
    last = dict(re.findall(r"submitted (\S+): job (\d+)", third))
    assert "a-seed0" in last and "report" in last, third
    status = run(base + ["--status"])
    assert f"a-seed0: PENDING as job {last['a-seed0']}" in status or f"a-seed0: RUNNING as job {last['a-seed0']}" \
        in status, status  # the id jobs.json records, not the old one's
    final = _wait(env, [last["a-seed0"], last["report"], new["b-seed0"]], timeout=1200, arms=[])[0]
    logs = {p.name: p.read_text()[-2000:] for p in sorted((out / "slurm" / "logs").glob("*.out"))}
    assert set(final.values()) == {"COMPLETED"}, (final, logs)
    for arm in ("a", "b"):
        assert (out / "arms" / arm / "seed0" / "DONE").is_file()
    assert (out / "report.md").is_file() and (out / "slurm" / "report.done").is_file()
    # the controller unreachable (a config naming a port nobody listens on): --status reads the folders
    conf = Path(env["SLURM_CONF"])
    away = tmp_path / "away.conf"
    away.write_text(re.sub(r"SlurmctldPort=\d+", "SlurmctldPort=9", conf.read_text()))
    unreachable = subprocess.run(base + ["--status"], env={**env, "SLURM_CONF": str(away)}, cwd=tmp_path,
                                 capture_output=True, text=True)
    assert unreachable.returncode == 0, unreachable.stderr
    assert unreachable.stdout.startswith("(the Slurm controller cannot be reached"), unreachable.stdout
    assert "a-seed0: done (finished with this config" in unreachable.stdout
    assert "report: done (reported this config" in unreachable.stdout
    print(f"$ preschool launch ... --setup '[ -e okflag ] || exit 1'\n{first}\n# prepare failed\n"
          f"$ preschool launch --status\n{failed}\n# touch okflag\n"
          f"$ preschool launch ... (again)\n{again}\n# scancel {new['a-seed0']} (a-seed0, running)\n"
          f"$ preschool launch ... (at once)\n{third}\n$ preschool launch --status (controller unreachable)\n"
          f"{unreachable.stdout}")


def test_a_relaunch_with_another_config_replaces_the_held_jobs(slurm, tmp_path):
    """Issue 40 item 2: the jobs are held (--sbatch=--hold); a relaunch with --set train.lr=0.01 used to say
    "nothing to run" while the queued jobs kept the old script. Issue 48 items 3 and 5: only the jobs whose
    inputs changed are stale (arm a and the report; not prepare, nor arm b, which sets its own lr), and the
    jobs of a seed taken out of the config are cancelled, not left queued unseen. Slurm holds the new
    script; the same relaunch again submits nothing."""
    env = slurm
    out = tmp_path / "out"
    base = [sys.executable, "-m", "preschool.cli", "launch", str(MICRO_YAML), "--set", f"out={out}"]
    launch = base + ["--slurm", "--gpus-per-node", "0", "--cpus-per-task", "1", "--sbatch=--hold"]

    def run(cmd, *extra):
        res = subprocess.run(cmd + list(extra), env=env, cwd=tmp_path, capture_output=True, text=True)
        assert res.returncode == 0, (res.stdout, res.stderr)
        return res.stdout

    first = dict(re.findall(r"submitted (\S+): job (\d+)", run(launch, "--set", "seeds=[0,1]")))
    assert list(first) == ["prepare", "a-seed0", "b-seed0", "a-seed1", "b-seed1", "report"], first
    new: dict[str, str] = {}
    try:
        status = run(base, "--status", "--set", "train.lr=0.01")  # seeds: [0]
        assert f"a-seed1: PENDING as job {first['a-seed1']} (reason JobHeldUser); it is no job of the current " \
               "config" in status, status
        changed = run(launch, "--set", "train.lr=0.01")
        for name in ("a-seed0", "report"):
            assert f"resubmit {name} [stale]: job {first[name]} (PENDING, reason JobHeldUser) runs another script" \
                in changed, changed
        for name in ("prepare", "b-seed0"):
            assert f"keep {name} [queued]: already in Slurm as job {first[name]} (PENDING, reason JobHeldUser)" \
                in changed, changed
        for name in ("a-seed1", "b-seed1"):
            assert f"cancel {name} [removed]: job {first[name]} (PENDING, reason JobHeldUser)" in changed, changed
        new = dict(re.findall(r"submitted (\S+): job (\d+)", changed))
        assert list(new) == ["a-seed0", "report"], changed
        held = subprocess.run(["scontrol", "write", "batch_script", new["a-seed0"], "-"], env=env,
                              capture_output=True, text=True, check=True).stdout
        assert "--set train.lr=0.01" in held
        states = _states(env, list(first.values()))
        assert {n: states[first[n]] for n in first} == {
            "prepare": "PENDING", "a-seed0": "CANCELLED", "b-seed0": "PENDING", "a-seed1": "CANCELLED",
            "b-seed1": "CANCELLED", "report": "CANCELLED"}, states
        same = run(launch, "--set", "train.lr=0.01")
        assert "nothing to run" in same and same.count("[queued]: already in Slurm") == 4, same
        assert "[removed]" not in same and "submitted" not in same, same
        print(f"$ preschool launch ... --sbatch=--hold --set seeds=[0,1]  (jobs held)\n"
              f"$ preschool launch --status --set train.lr=0.01\n{status}\n"
              f"$ preschool launch ... --sbatch=--hold --set train.lr=0.01\n{changed}\n"
              f"$ preschool launch ... (the same again)\n{same}")
    finally:
        subprocess.run(["scancel", *first.values(), *new.values()], env=env)


def test_a_job_given_gpus_that_torch_cannot_see_stops_in_one_line(slurm, tmp_path):
    """Issue 48 item 2: `launch --slurm --gpus-per-node 2` jobs got CUDA_VISIBLE_DEVICES=0,1 on a node whose
    torch saw no CUDA (a CPU-only wheel, a driver mismatch); `device: auto` became the CPU and every job
    COMPLETED. On the node's fake GPUs (Slurm hands them out, nothing computes on them) an arm job given one
    fails at once, its log saying why in one line, and trains nothing."""
    import torch

    env = slurm
    gres = subprocess.run(["sinfo", "--noheader", "--format=%G"], env=env, capture_output=True, text=True).stdout
    if "gpu:" not in gres:
        pytest.skip(f"the local Slurm has no fake GPUs (mknod not allowed?): sinfo gres {gres.strip()!r}")
    if torch.cuda.is_available():
        pytest.skip("torch sees CUDA here: the job would train on the GPU")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "preschool.cli", "launch", str(MICRO_YAML), "--set", f"out={out}", "--slurm",
           "--gpus-per-node", "1", "--cpus-per-task", "1", "--report-gpus", "0", "--time", "00:10:00"]
    res = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, (res.stdout, res.stderr)
    ids = dict(re.findall(r"submitted (\S+): job (\d+)", res.stdout))
    try:
        states, _ = _wait(env, [ids[n] for n in ("prepare", "a-seed0", "b-seed0")], timeout=900, arms=[])
        assert states[ids["prepare"]] == "COMPLETED", states
        for arm in ("a", "b"):
            job = ids[f"{arm}-seed0"]
            log = (out / "slurm" / "logs" / f"micro-{arm}-seed0-{job}.out").read_text()
            assert states[job] == "FAILED", (states, log)
            said = [x for x in log.splitlines() if "this Slurm job was given GPUs" in x]
            assert said and "SLURM_GPUS_ON_NODE=1" in said[0] and "CUDA_VISIBLE_DEVICES=" in said[0], log
            assert "refusing to train on the CPU" in said[0] and "device: cpu" in said[0], log
            assert not (out / "arms" / arm / "seed0" / "DONE").exists()
            assert not layout_checkpoints(out / "arms" / arm / "seed0")
        print(f"$ preschool launch micro.yaml --slurm --gpus-per-node 1 ... (torch {torch.__version__}, no CUDA)\n"
              f"{res.stdout}\njob states: {states}\n{said[0]}")
    finally:
        subprocess.run(["scancel", *ids.values()], env=env)


def layout_checkpoints(run: Path) -> list:
    """The checkpoints a run folder holds (none when it has no checkpoints/ folder)."""
    from preschool import layout

    return layout.list_checkpoints(run, required=False)
