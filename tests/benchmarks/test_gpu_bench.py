"""benchmarks/gpu.py runs end to end on CPU (--tiny), so the first lent GPU can run it unchanged."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAST_ROWS = ["hf-loop", "hf-trainer", "ours-plain", "ours+fused-loss", "ours+kernels", "ours+all doc-masked"]


def _run(tmp_path, *args):
    env = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--device", "cpu", "--tiny",
                           "--out", str(tmp_path / "out"), *args], capture_output=True, text=True, env=env,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "gpu_bench.json").read_text())
    return report, (tmp_path / "out" / "gpu_bench.md").read_text(), done.stdout


def test_tiny_cpu_run_writes_json_and_table(tmp_path):
    report, md, out = _run(tmp_path, "--presets", "gpt-125m", "--no-compile", "--rows", *FAST_ROWS)
    rows = {r["row"]: r for r in report["rows"]}
    assert list(rows) == FAST_ROWS and report["device_type"] == "cpu"
    for name in ("hf-loop", "hf-trainer", "ours-plain", "ours+fused-loss", "ours+all doc-masked"):
        r = rows[name]
        if name == "hf-trainer" and importlib.util.find_spec("accelerate") is None:  # the bench extra
            assert "accelerate" in r["skipped"], r
            continue
        assert r["tokens_per_s"] > 0 and 0 < r["mfu"] < 5 and r["peak_memory_bytes"] > 0, r
    assert rows["ours+fused-loss"]["settings"]["fused_loss"] == "chunked"  # no Liger on CPU
    assert "Liger" in rows["ours+kernels"]["skipped"]  # said, not silently dropped
    assert rows["ours+all doc-masked"]["settings"]["attention_reset_between_docs"] is True
    assert "| gpt-125m | ours-plain |" in md and "| gpt-125m | ours+kernels | - |" in md
    assert "measured best matmul" in report["peak_source"]
    assert all(r["checkpoints"] == 0 for n, r in rows.items() if n.startswith("ours") and "tokens_per_s" in r)
    # the rows reached the JSON Lines file one by one, the same ones the report holds
    lines = [json.loads(l) for l in (tmp_path / "out" / "gpu_bench.jsonl").read_text().splitlines()]
    assert lines == report["rows"]


def test_rows_survive_a_killed_driver_and_its_worker_ends(tmp_path):
    """The driver killed while its worker runs: the rows finished before stay in gpu_bench.jsonl, whole,
    and the worker (in a session of its own) notices and ends instead of running on."""
    import os
    import signal
    import time

    env = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    out = tmp_path / "out"
    driver = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--device", "cpu", "--tiny",
                               "--no-compile", "--out", str(out), "--presets", "gpt-125m",
                               "--rows", "ours-plain", *["hf-loop"] * 40], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows_file = out / "gpu_bench.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and not (rows_file.is_file() and rows_file.read_text().count("\n") >= 1):
        time.sleep(0.5)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    rows = [json.loads(l) for l in rows_file.read_text().splitlines()]
    assert rows[0]["row"] == "ours-plain" and rows[0]["tokens_per_s"] > 0
    assert not (out / "gpu_bench.json").exists()  # the run did not finish: the rows file is all there is

    def workers():
        found = []
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and str(rows_file).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                pass
        return found

    deadline = time.time() + 30
    while workers() and time.time() < deadline:
        time.sleep(0.5)
    left = workers()
    for pid in left:  # ours: started by this test's driver
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_a_worker_past_the_budget_is_killed_and_said(tmp_path):
    """A worker still running --grace-s after the budget is stopped; the driver exits and names why."""
    report, _, _ = _run(tmp_path, "--presets", "gpt-125m", "--no-compile", "--rows", "ours-plain",
                        "--budget-s", "0.5", "--grace-s", "0")
    (row,) = report["rows"]
    assert "killed" in row["error"]


def test_budget_skips_rows_it_cannot_start(tmp_path):
    report, _, _ = _run(tmp_path, "--presets", "gpt-125m", "gpt-500m", "--rows", "ours-plain", "--budget-s", "0")
    assert [r.get("skipped") for r in report["rows"]] == ["time budget spent"] * 2


@pytest.mark.slow
def test_tiny_cpu_every_row_and_preset(tmp_path):
    """All rows including per-block compile, three presets (Inductor on CPU: several minutes)."""
    report, _, _ = _run(tmp_path, "--budget-s", "3000")
    got = [(r["preset"], r["row"]) for r in report["rows"] if "tokens_per_s" in r]
    assert ("gpt-1b", "ours+compile") in got and ("gpt-125m", "ours+all doc-masked") in got
    assert not [r for r in report["rows"] if "error" in r]


def test_the_hf_trainer_row_says_it_needs_accelerate_where_it_is_missing(tmp_path, monkeypatch):
    """The HF Trainer needs accelerate (the ``bench`` extra; a lent GPU's image may lack it): the row says so as
    a skip with the remedy, as ours+kernels does for Liger, instead of an ImportError from deep in transformers."""
    import torch

    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "benchmarks" / "gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    monkeypatch.setitem(sys.modules, "accelerate", None)  # find_spec: not installed
    row = gpu.run_row("hf-trainer", {}, {}, {}, torch.device("cpu"), tmp_path)
    assert row == {"row": "hf-trainer", "skipped": "the HF Trainer needs accelerate: pip install 'preschool[bench]'"}


def test_the_bf16_params_row_is_ours_auto_under_fsdp_mixed_precision_and_cuda_only():
    """``ours+auto bf16-params`` measures torchtitan's single-GPU yardstick of issue #38 (bf16 parameters with
    an fp32 master copy): ``ours+auto`` with ``parallel: fsdp`` in one process, whose FSDP2 mixed-precision
    policy is exactly that on CUDA. On a CPU FSDP trains under autocast instead, so the row says why it is skipped."""
    import torch

    from preschool.config import from_dict
    from preschool.train.parallel import make_parallel
    from preschool.train.trainer import TrainConfig

    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "benchmarks" / "gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    cuda = torch.device("cuda", 0)
    auto, _ = gpu.row_settings("ours+auto", cuda)
    extra, skip = gpu.row_settings("ours+auto bf16-params", cuda)
    assert skip is None and extra == {**auto, "parallel": "fsdp"}
    cfg = from_dict(TrainConfig, {"stages": [{"name": "pt", "data": "x", "tokens": 64}], **extra})
    parallel = make_parallel(cfg, cuda, 1)
    assert parallel.mixed_precision and parallel.amp_dtype is None and parallel.compute_dtype == torch.bfloat16
    extra, skip = gpu.row_settings("ours+auto bf16-params", torch.device("cpu"))
    assert extra == {} and "CUDA" in skip
    assert "ours+auto bf16-params" in gpu.ROWS
