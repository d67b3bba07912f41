"""`preschool launch --slurm` against a real one-node Slurm on this machine (scripts/local_slurm.sh).

Opt-in (marker ``slurm``, excluded by default): needs root and ``apt-get install -y slurm-wlm
munge``; runs ``pytest -m slurm tests/cluster -s`` in a few minutes on 2 cores. A micro
experiment of two arms runs as CPU jobs (two torchrun ranks per arm job, 2 CPUs), then a
second launch must submit nothing. docs/scale.md records a run's output.
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


def _wait(env: dict, ids: list[str], timeout: float) -> dict[str, str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        states = _states(env, ids)
        if all(s in FINAL for s in states.values()):
            return states
        time.sleep(3)
    raise AssertionError(f"jobs not finished after {timeout} s: {_states(env, ids)}")


def test_launch_on_a_local_slurm_then_a_second_launch_submits_nothing(tmp_path):
    if os.geteuid() != 0 or not all(shutil.which(x) for x in ("munged", "slurmctld", "slurmd", "sbatch")):
        pytest.skip("needs root and slurm-wlm + munge (apt-get install -y slurm-wlm munge)")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs (two ranks per arm job)")
    state = tmp_path / "slurm"
    subprocess.run([str(SCRIPT), "start", str(state)], check=True, capture_output=True, text=True)
    env = {**os.environ, "SLURM_CONF": str(state / "slurm.conf"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    try:
        cfg, out = MICRO_YAML, tmp_path / "out"
        launch = [sys.executable, "-m", "preschool.cli", "launch", str(cfg), "--slurm", "--gpus-per-node", "0",
                  "--procs-per-node", "2", "--cpus-per-task", "2", "--time", "00:20:00", "--set", f"out={out}"]
        first = subprocess.run(launch, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert first.returncode == 0, first.stderr
        ids = re.findall(r"submitted (\S+): job (\d+)", first.stdout)
        assert [n for n, _ in ids] == ["prepare", "a-seed0", "b-seed0", "report"], first.stdout
        states = _wait(env, [i for _, i in ids], timeout=1200)
        logs = {p.name: p.read_text() for p in sorted((out / "slurm" / "logs").glob("*.out"))}
        assert set(states.values()) == {"COMPLETED"}, (states, logs)
        for arm in ("a", "b"):
            assert (out / "arms" / arm / "seed0" / "DONE").is_file()
        assert (out / "report.md").is_file() and (out / "slurm" / "report.done").is_file()
        # srun handed the job's 2 CPUs to the node's task; its 2 ranks split them
        arm_log = next(text for name, text in logs.items() if name.startswith("micro-a-seed0-"))
        assert "torch threads per rank: 1 (2 CPUs / 2 local ranks)" in arm_log
        second = subprocess.run(launch, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert second.returncode == 0, second.stderr
        assert "nothing to run" in second.stdout and "submitted" not in second.stdout
        print(f"$ preschool launch (first)\n{first.stdout}\njob states: {states}\n"
              f"$ preschool launch (second)\n{second.stdout}")
    finally:
        subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True)
