"""benchmarks/gpu.py runs end to end on CPU (--tiny), so the first lent GPU can run it unchanged."""

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
        assert r["tokens_per_s"] > 0 and 0 < r["mfu"] < 5 and r["peak_memory_bytes"] > 0, r
    assert rows["ours+fused-loss"]["settings"]["fused_loss"] == "chunked"  # no Liger on CPU
    assert "Liger" in rows["ours+kernels"]["skipped"]  # said, not silently dropped
    assert rows["ours+all doc-masked"]["settings"]["attention_reset_between_docs"] is True
    assert "| gpt-125m | ours-plain |" in md and "| gpt-125m | ours+kernels | - |" in md
    assert "measured best matmul" in report["peak_source"]


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
