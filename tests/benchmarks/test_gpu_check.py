"""scripts/gpu_check.py (`make gpu-check`) on a CPU: CUDA-only steps say SKIP (never PASS), a failing step
says FAIL and makes the exit code non-zero, and the whole check runs end to end at tiny budgets."""

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cuda_steps_skip_on_a_cpu_and_a_failure_fails_the_run(tmp_path, monkeypatch):
    gc = _script()
    before = signal.getsignal(signal.SIGTERM)
    assert gc.main(["--device", "cpu", "--steps", "minimal_pairs", "flex", "--out", str(tmp_path / "a")]) == 0
    # main() called in-process leaves the caller's SIGTERM handling alone (a handler set here was inherited by
    # the caller's later multiprocessing children, whose pool shutdown then hung)
    assert signal.getsignal(signal.SIGTERM) is before
    report = json.loads((tmp_path / "a" / "gpu_check.json").read_text())
    assert [(s["step"], s["status"]) for s in report["steps"]] == [("minimal_pairs", "SKIP"), ("flex", "SKIP")]
    assert report["environment"]["device"] == "cpu" and report["environment"]["torch"]
    md = (tmp_path / "a" / "gpu_check.md").read_text()
    assert "| flex | SKIP |" in md and "torch " in md

    def broken(check):
        raise AssertionError("logits differ")

    monkeypatch.setitem(gc.RUNNERS, "flex", broken)
    assert gc.main(["--device", "cpu", "--steps", "minimal_pairs", "flex", "--out", str(tmp_path / "b")]) == 1
    steps = json.loads((tmp_path / "b" / "gpu_check.json").read_text())["steps"]
    assert steps[1]["status"] == "FAIL" and "logits differ" in steps[1]["detail"]


@pytest.mark.slow
def test_the_whole_check_runs_on_a_cpu(tmp_path):
    """Every step at tiny budgets (a few minutes on 2 cores: data, 3 arms, two FSDP runs, the benchmark)."""
    env = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--device", "cpu", "--out",
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=3000)
    assert done.returncode == 0, done.stdout[-3000:]
    steps = {s["step"]: s["status"] for s in json.loads((tmp_path / "gpu_check.json").read_text())["steps"]}
    assert steps == {"quickstart": "PASS", "minimal_pairs": "SKIP", "fsdp_resume": "PASS", "flex": "SKIP",
                     "benchmark": "PASS"}
    assert (tmp_path / "benchmark" / "gpu_bench.jsonl").is_file()
