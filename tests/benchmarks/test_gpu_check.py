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


def test_a_budget_bounds_the_check_and_a_killed_check_keeps_its_finished_steps(tmp_path, monkeypatch):
    """On a machine lent by the minute: ``--budget-s`` kills a step's processes when it runs out and fails the
    steps it leaves unstarted (never a silent pass); the results file is written after every step, so a check
    killed from outside still says what it finished."""
    import time

    gc = _script()
    c = gc.Check("cpu", tmp_path / "c", tmp_path / "w", deadline=time.monotonic() + 2)
    t0 = time.monotonic()
    assert c.sh("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], timeout=600) == 124
    assert time.monotonic() - t0 < 30

    assert gc.main(["--device", "cpu", "--steps", "minimal_pairs", "flex", "--budget-s", "0",
                    "--out", str(tmp_path / "a")]) == 1
    steps = json.loads((tmp_path / "a" / "gpu_check.json").read_text())["steps"]
    assert [(s["status"], s["detail"]) for s in steps] == [("FAIL", "not run: the --budget-s of 0 s was spent")] * 2

    def killed(check):
        raise SystemExit(143)  # as the SIGTERM handler ends a script killed from outside

    monkeypatch.setitem(gc.RUNNERS, "flex", killed)
    with pytest.raises(SystemExit):
        gc.main(["--device", "cpu", "--steps", "minimal_pairs", "flex", "--out", str(tmp_path / "b")])
    steps = json.loads((tmp_path / "b" / "gpu_check.json").read_text())["steps"]
    assert [(s["step"], s["status"]) for s in steps] == [("minimal_pairs", "SKIP")]
    assert "| minimal_pairs | SKIP |" in (tmp_path / "b" / "gpu_check.md").read_text()


def test_the_cuda_steps_comparisons_hold_on_a_cpu_and_catch_a_difference(tmp_path, monkeypatch):
    """The code of the two CUDA-only steps, run with the CPU in the GPU's place (a GPU's first check should not
    be where a key name is found wrong): the quickstart's minimal pairs scored twice agree, and the comparison
    refuses log-probs past the tolerance and a flipped decision that is no near-tie; FlexAttention's
    document-masked logits equal the dense mask's, and a mask that lets documents see each other is caught."""
    gc = _script()
    c = gc.Check("cpu", tmp_path / "out", tmp_path / "work")
    gc.step_quickstart(c)
    detail = gc.minimal_pairs_on(c, "cpu")
    assert "max |logp cpu - cpu| 0.00e+00" in detail and "0 decisions differ" in detail
    rows = (tmp_path / "work" / "mp" / "0-cpu" / "minimal_pairs" / "items.jsonl").read_text().splitlines()
    items = [json.loads(r) for r in rows]
    assert gc.compare_pairs(items, [dict(r) for r in items])[0]
    shifted = [{**r, "logp_good": r["logp_good"] + 2 * gc.LOGP_ATOL} for r in items]
    ok, why = gc.compare_pairs(items, shifted)
    assert not ok and f"{2 * gc.LOGP_ATOL:.2e}" in why
    clear = max(range(len(items)), key=lambda i: abs(items[i]["margin"]))  # the least tied pair
    flipped = [dict(r) for r in items]
    flipped[clear]["correct"] = 1.0 - flipped[clear]["correct"]
    ok, why = gc.compare_pairs(items, flipped)
    assert not ok and "1 decisions differ, 0 of them near-ties" in why

    assert "flex logits equal dense" in gc.flex_vs_dense("cpu")
    import preschool.train.attention as attention

    real = attention.doc_attention_kwargs

    def leaky(model, seg):  # flex gets one document per row: the masks no longer agree
        impl = model.config._attn_implementation
        return real(model, seg.clamp(max=0) if impl == attention.FLEX_IMPL else seg)

    monkeypatch.setattr(attention, "doc_attention_kwargs", leaky)
    with pytest.raises(AssertionError):
        gc.flex_vs_dense("cpu")


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
