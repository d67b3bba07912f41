"""`preschool launch --slurm` against a real one-node Slurm on this machine (scripts/local_slurm.sh).

Opt-in (marker ``slurm``, excluded by default): needs root and ``apt-get install -y slurm-wlm
munge``; runs ``pytest -m slurm tests/cluster -s`` in a few minutes on 2 cores. A micro
experiment of three arms, one of them FSDP, runs as CPU jobs of two torchrun ranks on one CPU
each, so two arm jobs share the node at once (each with its own rendezvous); a request the
partition cannot meet is refused first; a relaunch while the jobs are queued or running submits
nothing, ``--status`` shows them, and a launch after they finished submits nothing.
docs/scale.md records a run's output.
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


def test_launch_on_a_local_slurm_shared_node_relaunch_and_fsdp(tmp_path):
    if os.geteuid() != 0 or not all(shutil.which(x) for x in ("munged", "slurmctld", "slurmd", "sbatch")):
        pytest.skip("needs root and slurm-wlm + munge (apt-get install -y slurm-wlm munge)")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs (two arm jobs of one CPU at once)")
    cfg = tmp_path / "micro.yaml"  # the launcher's micro experiment plus an FSDP arm
    cfg.write_text(MICRO_YAML.read_text().replace("report:", "  - name: c\n    train: {parallel: fsdp}\n"
                                                  "    stages: [{name: pt, data: pt, tokens: 2048}]\nreport:", 1))
    state = tmp_path / "slurm"
    subprocess.run([str(SCRIPT), "start", str(state)], check=True, capture_output=True, text=True)
    env = {**os.environ, "SLURM_CONF": str(state / "slurm.conf"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SLURM_CPUS_PER_TASK", None)
    try:
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
        assert re.search(r"skip [abc]-seed0: already in Slurm as job \d+ \(RUNNING", running.stdout), running.stdout
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
    finally:
        subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)
