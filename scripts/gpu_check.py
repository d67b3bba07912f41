"""One command that says whether this toolkit works on this GPU: PASS / FAIL / SKIP per step, non-zero exit on a FAIL.

    make gpu-check                                  # = python scripts/gpu_check.py (CUDA)
    python scripts/gpu_check.py --device cpu --out /tmp/gc   # the same steps on a CPU, tiny (tests)

Steps (``--steps`` runs a subset, in this order):

| step | what it checks |
|---|---|
| quickstart | ``preschool run examples/quickstart.yaml`` at micro budgets on the device, with ``compile: blocks`` and, when Liger-Kernel is installed, ``kernels: liger`` (on a CPU: neither), through evaluation and the report; every evaluation summary says it ran on the device |
| minimal_pairs | the quickstart's final ``pt_only`` checkpoint scored on the GPU and on the CPU (fp32 both): every sentence's log-prob within ``LOGP_ATOL`` (1e-3 nats), and every decision equal except near-ties (CPU margin within ``TIE_ATOL``, 1e-4 nats). CUDA only |
| fsdp_resume | ``parallel: fsdp`` in one process with DCP (sharded) checkpoints: a run killed (SIGKILL) right after its step-4 checkpoint and resumed ends with the train and validation losses of an uninterrupted run, bit for bit (on CUDA with deterministic algorithms asked for, and attention by SDPA's math backend: the others' backwards are non-deterministic unless torch raises for every op without a deterministic version) |
| flex | document-masked attention: FlexAttention's logits equal the dense 4D mask's (rtol 1e-4, atol 1e-5, fp32). CUDA only (torch's FlexAttention has no CPU backward) |
| benchmark | ``benchmarks/gpu.py`` on one preset (gpt-125m, rows ``ours-plain`` and ``ours+auto``; on a CPU ``--tiny --no-compile``) finishes with rows and no error |

A step that needs CUDA is SKIP (never PASS) on a CPU. The output folder
(default ``docs/results/gpu/<date>-<device>``, ready to commit) gets
``gpu_check.json`` and ``gpu_check.md`` (device, driver, CUDA, torch,
transformers, triton and Liger versions, commit, date; each step's status,
seconds and detail), rewritten after every step so a check killed from
outside keeps what it finished, the benchmark's output under ``benchmark/``
and every step's log under ``logs/``. ``--budget-s`` bounds the whole check
(a machine lent by the minute): a step's processes are killed when it runs
out, and a step not started by then is a FAIL ("not run"). The work folders (runs, data) go to a temporary
folder, removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

STEPS = ["quickstart", "minimal_pairs", "fsdp_resume", "flex", "benchmark"]
LOGP_ATOL = 1e-3  # nats: a sentence's summed log-prob, GPU vs CPU, both fp32
TIE_ATOL = 1e-4  # nats: a pair whose CPU margin is this small may be decided either way

# the quickstart at micro budgets: seconds of training per arm, every stage, evaluator and report section; the
# storybook read in units of 8,192 tokens (the default 2M-token unit generates ~30 s of stories 42k tokens do not need)
QUICKSTART_MICRO = [
    "seq_len=64", "tokenizer.vocab_size=512", "tokenizer.sample_documents=300",
    "data.pt.tokens=40000", "data.pt.val_tokens=2080", "data.pt.unit_tokens=8192",
    "data.dyck.tokens=4160", "data.dyck.val_tokens=1040",
    "data.dyck.params.length=32", "minimal_pairs.per_paradigm=20", "model.preset=micro",
    "train.batch_size=8", "train.eval_every=10", "train.checkpoint_every=10", "train.val_rows=8",
    "arms.0.stages.0.tokens=10240", "arms.1.stages.0.tokens=2048", "arms.1.stages.1.tokens=10240",
    "arms.2.stages.0.tokens=2048", "arms.2.stages.1.tokens=10240",
]

# one FSDP run in its own process; the second argument kills it (SIGKILL) at the end of that step
FSDP_RUN = """
import json, os, signal, sys
import torch
from preschool.train.callbacks import Callback
from preschool.train.trainer import train
cfg, out, datasets, tokenizer, kill_at = json.loads(sys.argv[1])
if cfg["device"] == "cuda":
    torch.use_deterministic_algorithms(True, warn_only=True)
    # attention by SDPA's math backend: the flash, efficient and cuDNN backwards stay non-deterministic
    # under warn_only (they only warn), and the check is of the resume, not of attention kernels
    for backend in ("flash", "mem_efficient", "cudnn"):
        getattr(torch.backends.cuda, f"enable_{backend}_sdp")(False)
class Kill(Callback):
    def on_step_end(self, trainer):
        if trainer.step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
train(cfg, out, datasets, tokenizer, callbacks=[Kill()])
"""


class Check:
    """The steps' shared state: device, folders, the log of each subprocess."""

    def __init__(self, device: str, out: Path, work: Path, deadline: float | None = None):
        self.device, self.out, self.work = device, out, work
        self.deadline = deadline  # time.monotonic() past which no step's process may run (--budget-s)
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.quickstart = work / "quickstart"

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def sh(self, name: str, cmd: list[str], timeout: float, env: dict | None = None) -> int:
        """Run ``cmd`` with its output in ``logs/<name>.log``; its exit code (124 past ``timeout``, or past the
        check's deadline when that comes first)."""
        if self.deadline is not None:
            timeout = min(timeout, max(self.deadline - time.monotonic(), 1.0))
        full_env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false", **(env or {})}
        with open(self.logs / f"{name}.log", "a") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=REPO, env=full_env, start_new_session=True)
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return 124
            finally:
                try:  # the step's whole process group: Inductor's compile workers too
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()

    def tail(self, name: str, n: int = 300) -> str:
        p = self.logs / f"{name}.log"
        return p.read_text(errors="replace")[-n:].replace("\n", " | ") if p.is_file() else ""


class Skip(Exception):
    """The step cannot run here (said as SKIP, never PASS)."""


# --------------------------------------------------------------------------- steps


def step_quickstart(c: Check) -> str:
    from preschool.train.loss import liger_available

    kernels = "liger" if c.cuda and liger_available() else "auto"  # auto: off here (no Liger, or a CPU)
    compile_ = "blocks" if c.cuda else "false"
    sets = [*QUICKSTART_MICRO, f"out={c.quickstart}", f"train.device={c.device}", f"train.compile={compile_}",
            f"train.kernels={kernels}"]
    cmd = [sys.executable, "-m", "preschool.cli", "run", str(REPO / "examples" / "quickstart.yaml"), "--no-progress",
           *[x for s in sets for x in ("--set", s)]]
    rc = c.sh("quickstart", cmd, timeout=1500)
    if rc != 0:
        raise AssertionError(f"preschool run exited {rc}: {c.tail('quickstart')}")
    if not (c.quickstart / "report.md").is_file():
        raise AssertionError(f"no report.md in {c.quickstart}")
    summaries = sorted(c.quickstart.glob("arms/*/seed0/evals/step-*/*/summary.json"))
    where = {json.loads(p.read_text()).get("evaluated_on", {}).get("device") for p in summaries}
    if not summaries or where != {c.device}:
        raise AssertionError(f"evaluation summaries say devices {sorted(map(str, where))}, not {c.device}")
    return f"3 arms trained (compile: {compile_}, kernels: {kernels}), {len(summaries)} evaluations on {c.device}, report written"


def step_minimal_pairs(c: Check) -> str:
    if not c.cuda:
        raise Skip("needs CUDA (compares GPU with CPU decisions)")
    return minimal_pairs_on(c, "cuda")


def minimal_pairs_on(c: Check, device: str) -> str:
    """Score the quickstart's final ``pt_only`` checkpoint on the CPU and on ``device`` (fp32 both) and compare
    them (:func:`compare_pairs`); the detail line, or AssertionError with it."""
    from preschool.evals.runner import evaluate_checkpoint
    from preschool.layout import list_checkpoints

    run = c.quickstart / "arms" / "pt_only" / "seed0"
    if not list_checkpoints(run, required=False):
        raise AssertionError(f"no checkpoint in {run} (the quickstart step must run first)")
    _, ckpt = list_checkpoints(run)[-1]
    summary = next(iter(sorted(run.glob("evals/step-*/minimal_pairs/summary.json"))), None)
    if summary is None:
        raise AssertionError(f"no minimal_pairs summary under {run}/evals")
    spec = [("minimal_pairs", json.loads(summary.read_text())["config"])]
    items = []
    for i, dev in enumerate(("cpu", device)):
        out = c.work / "mp" / f"{i}-{dev}"
        evaluate_checkpoint(ckpt, spec, out, device=dev, force=True, log=None)
        items.append([json.loads(x) for x in (out / "minimal_pairs" / "items.jsonl").read_text().splitlines()])
    ok, detail = compare_pairs(*items, device=device)
    if not ok:
        raise AssertionError(detail)
    return detail


def compare_pairs(cpu: list[dict], other: list[dict], device: str = "cuda") -> tuple[bool, str]:
    """Two scorings of the same pairs (the evaluator's ``items.jsonl`` rows): equal when every sentence's
    log-prob is within ``LOGP_ATOL`` and every decision that differs is a near-tie on the CPU (``|margin|`` at
    most ``TIE_ATOL``). ``(equal, detail)``."""
    if len(cpu) != len(other) or not cpu:
        return False, f"{len(cpu)} pairs scored on the CPU, {len(other)} on {device}"
    worst = max(abs(a[k] - b[k]) for a, b in zip(cpu, other) for k in ("logp_good", "logp_bad"))
    differ = [a for a, b in zip(cpu, other) if a["correct"] != b["correct"]]
    near = [a for a in differ if abs(a["margin"]) <= TIE_ATOL]
    detail = (f"{len(cpu)} pairs: max |logp {device} - cpu| {worst:.2e} (tolerance {LOGP_ATOL:g}); {len(differ)} "
              f"decisions differ, {len(near)} of them near-ties (|margin| <= {TIE_ATOL:g})")
    return worst <= LOGP_ATOL and len(near) == len(differ), detail


def _losses(run: Path) -> dict[tuple[str, int], float]:
    """Every logged train and validation value by (metric, step); a row repeated after a resume overrides."""
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("event") == "train":
            out[("loss", r["step"])] = r["loss"]
        elif r.get("event") == "val":
            out.update({(k, r["step"]): v for k, v in r.items() if k.startswith("val/")})
    return out


def step_fsdp_resume(c: Check) -> str:
    from preschool.layout import data_dir, tokenizer_dir

    data = data_dir(c.quickstart)
    if not (data / "pt").is_dir():  # run alone (--steps fsdp_resume): prepare the quickstart's data only
        sets = [*QUICKSTART_MICRO, f"out={c.quickstart}"]
        rc = c.sh("fsdp_prepare", [sys.executable, "-m", "preschool.cli", "prepare",
                                   str(REPO / "examples" / "quickstart.yaml"), "--no-progress",
                                   *[x for s in sets for x in ("--set", s)]], timeout=900)
        if rc != 0:
            raise AssertionError(f"preschool prepare exited {rc}: {c.tail('fsdp_prepare')}")
    cfg = {"model": {"preset": "micro"}, "device": c.device, "parallel": "fsdp", "batch_size": 8, "lr": 3e-3,
           "log_every": 1, "eval_every": 4, "checkpoint_every": 4, "progress": False, "val_rows": 8, "seed": 0,
           "stages": [{"name": "pt", "data": "pt", "tokens": 8 * 64 * 10}]}
    datasets = {"pt": str(data / "pt")}
    env = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}

    def run(name: str, kill_at: int) -> int:
        arg = json.dumps([cfg, str(c.work / name), datasets, str(tokenizer_dir(data)), kill_at])
        return c.sh(f"fsdp_{name}", [sys.executable, "-c", FSDP_RUN, arg], timeout=900, env=env)

    if (rc := run("whole", 0)) != 0:
        raise AssertionError(f"the uninterrupted FSDP run exited {rc}: {c.tail('fsdp_whole')}")
    if (rc := run("killed", 5)) != -signal.SIGKILL:
        raise AssertionError(f"the run to kill exited {rc}, not killed at step 5: {c.tail('fsdp_killed')}")
    sharded = list((c.work / "killed" / "checkpoints").glob("step-*/sharded"))
    if not sharded:
        raise AssertionError("the killed run left no sharded (DCP) checkpoint")
    if (rc := run("killed", 0)) != 0:
        raise AssertionError(f"the resumed run exited {rc}: {c.tail('fsdp_killed')}")
    a, b = _losses(c.work / "whole"), _losses(c.work / "killed")
    if a.keys() != b.keys():
        raise AssertionError(f"logged (metric, step) differ: {sorted(a.keys() ^ b.keys())[:6]}")
    diff = max(abs(a[k] - b[k]) for k in a)
    if diff != 0.0:
        raise AssertionError(f"resumed run differs from the uninterrupted one by up to {diff:.3e}")
    return (f"killed at step 5 after the step-4 DCP checkpoint, resumed: {len(a)} train/val values "
            "identical to the uninterrupted run")


def step_flex(c: Check) -> str:
    if not c.cuda:
        raise Skip("needs CUDA (torch's FlexAttention trains on CUDA only)")
    return flex_vs_dense("cuda")


def flex_vs_dense(device: str) -> str:
    """Document-masked attention on ``device``: the micro model's logits with FlexAttention equal those with
    the dense 4D mask (rtol 1e-4, atol 1e-5, fp32); the detail line, or AssertionError."""
    import torch

    from preschool.train.attention import doc_attention_kwargs, use_flex
    from preschool.train.model import ModelConfig, build_model

    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(8, 120, (64,), generator=g)
    seg = torch.repeat_interleave(torch.arange(64), lengths)[:512].reshape(1, 512).repeat(2, 1).to(device)
    ids = torch.randint(0, 997, seg.shape, generator=g).to(device)
    model = build_model(ModelConfig("micro", overrides={"hidden_size": 64}), 997, seed=1).to(device).eval()
    with torch.no_grad():
        dense = model(input_ids=ids, use_cache=False, **doc_attention_kwargs(model, seg)).logits
        use_flex(model)
        flex = model(input_ids=ids, use_cache=False, **doc_attention_kwargs(model, seg)).logits
    torch.testing.assert_close(flex, dense, rtol=1e-4, atol=1e-5)
    return f"{int(seg[0].max()) + 1} documents in 512 positions: flex logits equal dense (max diff " \
           f"{float((flex - dense).abs().max()):.1e})"


def step_benchmark(c: Check) -> str:
    out = c.out / "benchmark"
    args = (["--presets", "gpt-125m", "--rows", "ours-plain", "ours+auto", "--budget-s", "150"] if c.cuda else
            ["--tiny", "--no-compile", "--presets", "gpt-125m", "--rows", "ours-plain", "ours+auto"])
    rc = c.sh("benchmark", [sys.executable, str(REPO / "benchmarks" / "gpu.py"), "--device", c.device,
                            "--out", str(out), *args], timeout=600)
    if rc != 0:
        raise AssertionError(f"benchmarks/gpu.py exited {rc}: {c.tail('benchmark')}")
    rows = json.loads((out / "gpu_bench.json").read_text())["rows"]
    bad = [r for r in rows if "tokens_per_s" not in r]
    if bad:
        raise AssertionError(f"rows without a result: {[(r['row'], r.get('error') or r.get('skipped')) for r in bad]}")
    return "; ".join(f"{r['row']}: {r['tokens_per_s']:,.0f} tokens/s, MFU {100 * r['mfu']:.1f} %" for r in rows)


RUNNERS: dict[str, Callable[[Check], str]] = {"quickstart": step_quickstart, "minimal_pairs": step_minimal_pairs,
                                              "fsdp_resume": step_fsdp_resume, "flex": step_flex,
                                              "benchmark": step_benchmark}


# --------------------------------------------------------------------------- environment and report


def environment(device: str) -> dict:
    """What the results were measured on: device, driver, versions, commit, date."""
    import importlib.metadata as md

    import torch

    def version(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    def cmd(*args: str) -> str | None:
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=REPO).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            return None

    return {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": device,
            "device_name": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            "driver": cmd("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") if device == "cuda"
            else None, "cuda": torch.version.cuda, "torch": torch.__version__,
            "transformers": version("transformers"), "triton": version("triton"),
            "liger_kernel": version("liger-kernel"), "commit": cmd("git", "rev-parse", "--short", "HEAD"),
            "python": sys.version.split()[0]}


def markdown(env: dict, results: list[dict]) -> str:
    lines = [f"# gpu-check {env['date']}", "",
             f"{env['device_name']} (driver {env['driver'] or '-'}, CUDA {env['cuda'] or '-'}); torch {env['torch']}, "
             f"transformers {env['transformers']}, triton {env['triton'] or '-'}, liger-kernel "
             f"{env['liger_kernel'] or 'not installed'}; commit {env['commit'] or '-'}", "",
             "| step | status | seconds | detail |", "|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['status']} | {r['seconds']:.0f} | {r['detail'].replace('|', '/')} |" for r in results]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda (default): the check proper; cpu: the same steps on a CPU, CUDA-only ones SKIP")
    ap.add_argument("--steps", nargs="+", choices=STEPS, default=STEPS, metavar="STEP",
                    help=f"a subset of {STEPS} (default: all, in that order)")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default docs/results/gpu/<date>-<device>)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (runs, data) and print its path")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="seconds for the whole check: a step's processes are killed at the end of it and a step "
                         "not started by then is a FAIL (not run); for a machine lent by the minute (default: "
                         "none, each step its own timeout)")
    a = ap.parse_args(argv)
    import torch

    from preschool.io import write_json, write_text

    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu-check: CUDA is not available here (use --device cpu for the CPU run)", file=sys.stderr)
        return 2
    env = environment(a.device)
    slug = env["device_name"].replace(" ", "-").replace("/", "-")
    out = a.out or REPO / "docs" / "results" / "gpu" / f"{env['date'][:10]}-{slug}"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    deadline = None if a.budget_s is None else time.monotonic() + a.budget_s
    c = Check(a.device, out, work, deadline)
    results = []

    def save() -> None:  # after every step: a check killed from outside keeps the steps it finished
        write_json(out / "gpu_check.json", {"environment": env, "steps": results, "logp_atol": LOGP_ATOL,
                                             "tie_atol": TIE_ATOL, "budget_s": a.budget_s})
        write_text(out / "gpu_check.md", markdown(env, results))

    try:
        for name in [s for s in STEPS if s in a.steps]:
            t0 = time.perf_counter()
            if deadline is not None and time.monotonic() >= deadline:
                status, detail = "FAIL", f"not run: the --budget-s of {a.budget_s:g} s was spent"
            else:
                try:
                    status, detail = "PASS", RUNNERS[name](c)
                except Skip as e:
                    status, detail = "SKIP", str(e)
                except Exception as e:  # a failed step is reported, and the next one still runs
                    status, detail = "FAIL", f"{type(e).__name__}: {str(e)[:600]}"
            results.append({"step": name, "status": status, "seconds": time.perf_counter() - t0, "detail": detail})
            print(f"{status} {name} ({results[-1]['seconds']:.0f} s): {detail}", flush=True)
            save()
    finally:
        if a.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    save()
    failed = [r["step"] for r in results if r["status"] == "FAIL"]
    print(f"gpu-check: {len(results) - len(failed)} of {len(results)} steps passed or skipped; "
          f"{'FAILED: ' + ', '.join(failed) if failed else 'no failure'}; output in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    # a kill (timeout, Ctrl-C from a wrapper) unwinds through Check.sh, which ends the step's process group;
    # set only when run as a script: a caller's process (a test calling main()) keeps its own SIGTERM handling,
    # which the processes it forks later (multiprocessing pools) inherit
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
