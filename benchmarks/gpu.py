"""GPU training throughput at the papers' scale: tokens/s, MFU and peak memory per setting, one command.

    python benchmarks/gpu.py [--out results/gpu_bench] [--presets gpt-125m gpt-500m gpt-1b]
    python benchmarks/gpu.py --device cpu --tiny          # the same code path on micro shapes (tests)

For each preset at seq 4096 and a 128,256-token vocabulary (the verify-ppt
shape; ``--tiny``: 2-layer d=64 stand-ins, vocab 512, seq 64) it trains a few
AdamW steps on random tokens and measures, after the warm-up steps:

| row | what runs |
|---|---|
| hf-loop | the HF model in a plain PyTorch loop: forward, fp32 cross-entropy on full logits, backward, clip, fused AdamW |
| hf-trainer | the HF ``Trainer`` at the same batch, bf16, schedule and clipping |
| ours-plain | our trainer with ``fused_loss: off``, ``kernels: off``, no compile |
| ours+fused-loss | + ``fused_loss``: Liger's fused linear cross-entropy when installed, else ``chunked`` |
| ours+compile | + ``compile: blocks`` (each decoder layer compiled) |
| ours+kernels | + ``kernels: liger`` (RMSNorm, SwiGLU); skipped without ``preschool[gpu]`` |
| ours+all | fused loss + kernels (when installed) + per-block compile, every option on |
| ours+auto | ``compile: blocks`` with ``kernels: auto`` and ``fused_loss: auto``: what the trainer picks (docs/training.md) |
| ours+all doc-masked | ours+all on packed rows with ``attention_reset_between_docs`` (FlexAttention on CUDA); first preset only unless ``--doc-masked-all`` |
| ours+auto bf16-params | ours+auto with ``parallel: fsdp`` in one process: FSDP2's mixed precision, bf16 parameters computed on with an fp32 master copy (torchtitan's single-GPU setting); CUDA only |

No row writes a checkpoint (ours: the checkpoint write is switched off for the
benchmark; the HF Trainer: ``save_strategy="no"``); each row records how many
it found (``checkpoints``, 0). Each preset runs in its own worker process, in
a session of its own; every row is appended to ``<out>/gpu_bench.jsonl`` (one
JSON object a line, flushed and fsynced) the moment it finishes, so a run that
is killed keeps its finished rows. Peak memory is
``torch.cuda.max_memory_allocated`` per row on CUDA and the process's peak RSS
per row on CPU (``VmHWM``, reset before each row). MFU = tokens/s x model FLOPs
per token (``preschool.train.flops.flops_per_token``: 6N + causal attention) /
the GPU's dense bf16 peak from ``preschool.train.flops.GPUS`` (datasheet
figures with their sources); on a GPU not in that table, and on CPU, the best
measured matmul rate over several shapes instead (the output says which).

Budget (``--budget-s``, default 450): no row starts after it, and a worker
still running ``--grace-s`` (default 60) seconds past it is killed with its
process group (the rows it finished stay), so the command ends within about
budget + grace + the matmul probe. The default three presets x ten rows do
*not* fit in 450 s on one H200: the 8 rows of gpt-1b alone took over 240 s
(issue #38); rows the budget leaves out are listed as skipped. For the whole
table give ``--budget-s 1800``. Output: ``<out>/gpu_bench.jsonl`` (rewritten
at the start of a run), ``<out>/gpu_bench.json`` and ``<out>/gpu_bench.md``
(written atomically at the end), the table on stdout, and each worker's log in
``<out>/worker-<preset>.log``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_throughput as tt  # noqa: E402  (shared run helpers, FLOP count, matmul peak)

PRESETS = ["gpt-125m", "gpt-500m", "gpt-1b"]
ROWS = ["hf-loop", "hf-trainer", "ours-plain", "ours+fused-loss", "ours+compile", "ours+kernels", "ours+all",
        "ours+auto", "ours+all doc-masked", "ours+auto bf16-params"]
ROWS_FILE = "gpu_bench.jsonl"
FULL = {"seq_len": 4096, "vocab": 128_256, "batch": 4, "steps": 8, "warmup_steps": 3}
TINY = {"seq_len": 64, "vocab": 512, "batch": 2, "steps": 3, "warmup_steps": 1}
TINY_SHAPE = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1,
              "intermediate_size": 128}


def make_doc_data(root: Path, rows: int, seq_len: int, vocab: int, seed: int = 1) -> Path:
    """Random-token rows packed from documents of random length (``segments``), as a prepared dataset."""
    from preschool.data.shards import ShardWriter

    rng = np.random.default_rng(seed)
    with ShardWriter(root / "docs" / "train", seq_len + 1, vocab, arrays=["segments"]) as w:
        for _ in range(rows):
            lengths = rng.geometric(1 / max(seq_len // 8, 2), size=seq_len + 1)
            seg = np.repeat(np.arange(seq_len + 1), lengths)[:seq_len + 1].astype(np.uint16)
            w.add_rows(rng.integers(0, vocab, (1, seq_len + 1)), segments=seg[None])
    return root / "docs"


# --------------------------------------------------------------------------- memory


def _reset_peak(dev: torch.device) -> None:
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    else:
        try:  # Linux: "5" resets the process's peak RSS (VmHWM) to its current RSS
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass


def _peak_bytes(dev: torch.device) -> int | None:
    if dev.type == "cuda":
        return int(torch.cuda.max_memory_allocated(dev))
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# --------------------------------------------------------------------------- rows


def run_hf_loop(model_cfg: dict, data: Path, s: dict, dev: torch.device) -> float:
    """Tokens/s of the HF model in the plainest training loop a user would write."""
    from preschool.config import from_dict
    from preschool.data.shards import ShardSet
    from preschool.train.model import ModelConfig, build_model

    shards = ShardSet(data / "train")
    model = build_model(from_dict(ModelConfig, model_cfg), shards.vocab_size, seed=0).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.95), fused=True)
    clock = tt._Clock()
    amp = dev.type == "cuda"
    for step in range(s["steps"]):
        idx = list(range(step * s["batch"], (step + 1) * s["batch"]))
        rows = torch.from_numpy(shards.rows(idx).astype(np.int64)).to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(input_ids=rows[:, :-1], use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        clock.tick()
    return clock.tokens_per_s(s["warmup_steps"] - 1, s["batch"] * s["seq_len"])


def row_settings(row: str, dev: torch.device, no_compile: bool = False) -> tuple[dict, str | None]:
    """Our trainer's extra config for a row, or a reason to skip it on this machine."""
    from preschool.train.loss import liger_available

    liger = dev.type == "cuda" and liger_available()
    fused = {"fused_loss": "liger" if liger else "chunked"}
    kernels = {"kernels": "liger"} if liger else None
    plain = {"fused_loss": "off", "kernels": "off"}
    if row == "ours-plain":
        return plain, None
    if row == "ours+fused-loss":
        return {**plain, **fused}, None
    if row == "ours+compile":
        return ({}, "--no-compile") if no_compile else ({**plain, "compile": "blocks"}, None)
    if row == "ours+kernels":
        if kernels is None:
            return {}, "needs CUDA and Liger-Kernel (pip install 'preschool[gpu]')"
        return {**plain, **kernels}, None
    auto = {"fused_loss": "auto", "kernels": "auto", **({} if no_compile else {"compile": "blocks"})}
    if row == "ours+auto":
        return auto, None
    if row == "ours+auto bf16-params":
        if dev.type != "cuda":
            return {}, ("bf16 parameters with an fp32 master copy are FSDP2's mixed precision, on CUDA only "
                        "(on a CPU, FSDP trains under autocast)")
        return {**auto, "parallel": "fsdp"}, None  # one process: FSDP2's policy, params bf16, master fp32
    allx = {**plain, **fused, **(kernels or {}), **({} if no_compile else {"compile": "blocks"})}
    if row == "ours+all":
        return allx, None
    if row == "ours+all doc-masked":
        return {**allx, "attention_reset_between_docs": True, "doc_attention": "auto"}, None
    raise ValueError(row)


def run_row(row: str, model_cfg: dict, data: dict[str, Path], s: dict, dev: torch.device, tmp: Path,
            no_compile: bool = False) -> dict:
    """One measured row in this process: tokens/s and peak memory (or the reason it was skipped / failed)."""
    out: dict = {"row": row}
    if row == "hf-trainer" and importlib.util.find_spec("accelerate") is None:  # said, not an ImportError
        return {**out, "skipped": "the HF Trainer needs accelerate: pip install 'preschool[bench]'"}
    extra, skip = ({}, None) if row.startswith("hf-") else row_settings(row, dev, no_compile)
    if skip:
        return {**out, "skipped": skip}
    if "fused_loss" in extra:
        out["settings"] = {k: v for k, v in extra.items() if k != "fused_loss" or v != "off"}
    _reset_peak(dev)
    t0 = time.perf_counter()
    try:
        if row == "hf-loop":
            tps = run_hf_loop(model_cfg, data["rand"], s, dev)
        elif row == "hf-trainer":
            tps = tt.run_hf(model_cfg, data["rand"], s["steps"], s["warmup_steps"] - 1, s["batch"], s["seq_len"],
                            tmp / "hf")
        else:
            ds = data["docs"] if extra.get("attention_reset_between_docs") else data["rand"]
            cfg = {**extra, "device": str(dev), "micro_batch_size": s["batch"]}
            run_dir = tmp / row.replace(" ", "_").replace("+", "_")
            tps = _run_ours(model_cfg, ds, s, run_dir, cfg)
            out["checkpoints"] = len(list(run_dir.glob("checkpoints/step-*")))
    except Exception as e:  # one row failing (OOM, a kernel that does not fit this torch) must not lose the rest
        return {**out, "error": f"{type(e).__name__}: {str(e)[:500]}", "seconds": time.perf_counter() - t0}
    finally:
        torch._dynamo.reset()  # compiled graphs hold on to the row's model
    return {**out, "tokens_per_s": tps, "peak_memory_bytes": _peak_bytes(dev), "seconds": time.perf_counter() - t0}


def _run_ours(model_cfg: dict, ds: Path, s: dict, out: Path, extra: dict) -> float:
    """``train_throughput.run_ours`` on a dataset named ``rand`` (it names its dataset so), writing no checkpoint."""
    from preschool.train.callbacks import Callback

    class NoCheckpoints(Callback):
        """The trainer checkpoints at every stage end; a benchmark row measures training only (a gpt-1b
        checkpoint with AdamW state is ~13 GB, and six of them overfill a 64 GiB disk)."""

        def on_train_start(self, trainer) -> None:
            trainer.save_checkpoint = lambda: None

    return tt.run_ours(model_cfg, ds, s["steps"], s["warmup_steps"] - 1, s["batch"], s["seq_len"], out,
                       compile=extra.pop("compile", False), precision="auto", extra=extra,
                       callbacks=(NoCheckpoints(),))


def append_row(path: Path, row: dict) -> None:
    """One JSON line appended and synced to disk, so a killed run keeps every row finished before it."""
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def worker(a) -> int:
    """All rows of one preset, each appended to ``--worker`` (the run's JSON Lines file) as it finishes,
    with its MFU against ``--peak-flops``."""
    import threading

    from preschool.device import use_device

    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    s = TINY if a.tiny else FULL
    dev = use_device(a.device_resolved)  # CUDA: made current, as the HF Trainer, timing syncs and Triton use it
    model_cfg = {"preset": a.preset, "overrides": dict(TINY_SHAPE) if a.tiny else {}}
    fpt = tt.flops_per_token(model_cfg, s["vocab"], s["seq_len"])
    deadline = time.time() + a.worker_budget
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows_needed = s["batch"] * s["steps"]
        data = {"rand": tt.make_data(tmp, rows=rows_needed, seq_len=s["seq_len"], vocab=s["vocab"]),
                "docs": make_doc_data(tmp, rows=rows_needed, seq_len=s["seq_len"], vocab=s["vocab"])}
        for row in a.rows:
            if time.time() > deadline:
                res = {"row": row, "skipped": "time budget spent"}
            else:
                res = run_row(row, model_cfg, data, s, dev, tmp, a.no_compile)
            if "tokens_per_s" in res:
                res["mfu"] = res["tokens_per_s"] * fpt / a.peak_flops
            append_row(Path(a.worker), {"preset": a.preset, **res, "flops_per_token": fpt})
    return 0


def _exit_with_parent(parent: int) -> None:
    """End this worker when the driver that started it is gone (killed): a worker runs in a session of
    its own, so no terminal signal reaches it, and it must not go on filling the GPU for nobody."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)


def run_worker(cmd: list[str], log: Path, timeout: float) -> int | str:
    """Run one worker in a session of its own, output to ``log`` (no pipe the driver must drain);
    returns its exit code, or why it was stopped. Whatever it leaves behind in its process group
    (Inductor's compile workers) is killed when it ends, so nothing outlives the driver."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            rc: int | str = proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            rc = f"killed {timeout:.0f} s after it started (--budget-s plus --grace-s)"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return rc


# --------------------------------------------------------------------------- driver


def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f} GiB"


def table(rows: list[dict], peak: float) -> str:
    """Markdown table of the measured rows (skips and errors say why)."""
    out = ["| preset | row | tokens/s | MFU | peak memory | vs hf-trainer |", "|---|---|---|---|---|---|"]
    hf = {r["preset"]: r.get("tokens_per_s") for r in rows if r["row"] == "hf-trainer"}
    for r in rows:
        if "tokens_per_s" not in r:
            why = r.get("skipped") or r.get("error", "")
            out.append(f"| {r['preset']} | {r['row']} | - | - | - | {why[:120]} |")
            continue
        ratio = f"{r['tokens_per_s'] / hf[r['preset']]:.2f}x" if hf.get(r["preset"]) else "-"
        out.append(f"| {r['preset']} | {r['row']} | {r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% | "
                   f"{_fmt_bytes(r.get('peak_memory_bytes'))} | {ratio} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", help="auto (CUDA when available, else cpu) | cuda | cpu; default auto")
    ap.add_argument("--tiny", action="store_true", help="2-layer d=64 models, vocab 512, seq 64 (CPU tests)")
    ap.add_argument("--presets", nargs="+", default=PRESETS, help=f"model presets, one worker each (default {PRESETS})")
    ap.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS, metavar="ROW",
                    help=f"subset of {ROWS} (default: all)")
    ap.add_argument("--doc-masked-all", action="store_true", help="the doc-masked row for every preset (default: first)")
    ap.add_argument("--no-compile", action="store_true",
                    help="rows without compile (quick CPU checks: Inductor takes ~1 min per compiled row on CPU)")
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="start no row after this many seconds (default 450; all presets and rows need ~1800)")
    ap.add_argument("--grace-s", type=float, default=60.0,
                    help="kill a worker still running this long after the budget; its finished rows stay (default 60)")
    ap.add_argument("--out", type=Path, default=Path("results/gpu_bench"),
                    help="output folder: gpu_bench.jsonl (row by row), .json, .md, worker logs "
                         "(default results/gpu_bench)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one preset in this process, rows to this file
    ap.add_argument("--preset", help=argparse.SUPPRESS)
    ap.add_argument("--device-resolved", help=argparse.SUPPRESS)
    ap.add_argument("--worker-budget", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--peak-flops", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.worker:
        rc = worker(a)
        sys.stdout.flush()
        sys.stderr.flush()
        # every row is on disk; skip interpreter teardown (compile pools, CUDA) that can hang an exit
        os._exit(rc)
    if a.device == "auto":
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(a.device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise SystemExit("--device cuda: CUDA is not available here")
    s = TINY if a.tiny else FULL
    from preschool.io import write_json, write_text
    from preschool.train.flops import gpu_for_device_name, peak_matmul_flops

    a.out.mkdir(parents=True, exist_ok=True)
    rows_file = a.out / ROWS_FILE
    write_text(rows_file, "")  # this run's rows only
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    measured, shape = peak_matmul_flops(str(dev), "bfloat16" if dev.type == "cuda" else "float32",
                                        seconds=0.05 if a.tiny else 0.3)
    listed = gpu_for_device_name(name) if dev.type == "cuda" else None
    peak, peak_source = ((listed.bf16_flops, listed.source) if listed else
                         (measured, f"measured best matmul here ({shape}); no datasheet entry"))
    print(f"device {name}; MFU denominator {peak / 1e12:.1f} TFLOP/s ({peak_source}); "
          f"measured matmul {measured / 1e12:.2f} TFLOP/s; rows to {rows_file}", flush=True)
    t_end = time.time() + a.budget_s  # the rows' budget, after the probe
    for i, preset in enumerate(a.presets):
        rows = [r for r in a.rows if r != "ours+all doc-masked" or i == 0 or a.doc_masked_all]
        left = t_end - time.time()
        if left <= 0:
            for r in rows:
                append_row(rows_file, {"preset": preset, "row": r, "skipped": "time budget spent"})
            continue
        cmd = [sys.executable, __file__, "--worker", str(rows_file), "--preset", preset, "--device-resolved", str(dev),
               "--worker-budget", str(left), "--peak-flops", str(peak), "--rows", *rows] + (
                   ["--tiny"] if a.tiny else []) + (["--no-compile"] if a.no_compile else [])
        log = a.out / f"worker-{preset}.log"
        rc = run_worker(cmd, log, left + a.grace_s)
        if rc != 0:
            seen = {r["row"] for r in _read_rows(rows_file) if r["preset"] == preset}
            tail = log.read_text(errors="replace")[-300:] if log.is_file() else ""
            why = f"worker exited {rc}" if isinstance(rc, int) else f"worker {rc}"
            for r in rows:
                if r not in seen:
                    append_row(rows_file, {"preset": preset, "row": r, "error": f"{why}: {tail}"})
        for r in _read_rows(rows_file):
            if r["preset"] == preset:
                print(json.dumps(r), flush=True)
    results = _read_rows(rows_file)
    md = table(results, peak)
    report = {"device": name, "device_type": dev.type, "tiny": a.tiny, **s, "peak_flops": peak,
              "peak_source": peak_source, "measured_matmul_flops": measured, "measured_matmul_shape": shape,
              "torch": torch.__version__, "rows": results}
    write_json(a.out / "gpu_bench.json", report)
    write_text(a.out / "gpu_bench.md", md + "\n")
    print(md, flush=True)
    return 0


def _read_rows(path: Path) -> list[dict]:
    """The rows appended so far (a line cut short by a kill is left out)."""
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


if __name__ == "__main__":
    sys.exit(main())
