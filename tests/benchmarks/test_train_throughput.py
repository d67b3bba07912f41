"""benchmarks/train_throughput.py compares the trainers on equal terms: every row under the same heap
setting, each row's ratio to the best HF Trainer row, medians over interleaved rounds."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_both_trainers_run_under_the_same_heap_and_ratios_are_to_the_best_hf_row(tmp_path):
    env = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_throughput.py"), "--presets", "micro",
                           "--precisions", "fp32", "--steps", "4", "--rounds", "2", "--no-compile", "--batch", "4",
                           "--seq-len", "32"], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    report = json.loads(out[out.index("\n{") + 1:])
    res = report["results"]["micro fp32"]
    rows = res["rows"]
    assert set(rows) == {"ours", "HF Trainer"}  # both with the retained heap: no row under glibc's defaults
    assert {r["heap"] for r in rows.values()} == {"retain"}
    assert all(len(r["rounds"]) == 2 and r["tokens_per_s"] > 0 and r["mfu"] > 0 for r in rows.values())
    best_hf = rows[res["best_hf_row"]]
    assert best_hf["ratio"] == 1.0
    assert rows["ours"]["ratio"] == pytest.approx(rows["ours"]["tokens_per_s"] / best_hf["tokens_per_s"])
    assert "family" in report["cpu"] and "RATIO" in out and "load average" in out
    # the kernel bound: the HF step with all but its matmuls and attention free, above every row at micro scale
    bound = res["bound"]
    assert bound["matmul_ms"] > 0 and bound["attention_ms"] > 0 and 0 < bound["share"] < 1
    assert bound["tokens_per_s"] > max(r["tokens_per_s"] for r in rows.values())
    assert bound["ratio"] == pytest.approx(bound["tokens_per_s"] / best_hf["tokens_per_s"])
    assert "kernel bound" in out
