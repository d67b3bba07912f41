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
| ours+kernels | + ``kernels: liger`` (RMSNorm, SwiGLU, RoPE); skipped without ``preschool[gpu]`` |
| ours+all | fused loss + kernels (when installed) + per-block compile |
| ours+all doc-masked | ours+all on packed rows with ``attention_reset_between_docs`` (FlexAttention on CUDA); first preset only unless ``--doc-masked-all`` |

Each preset runs in its own process (Liger's RoPE patch is process-wide, so the
rows without kernels run first). Peak memory is ``torch.cuda.max_memory_allocated``
per row on CUDA and the process's peak RSS per row on CPU (``VmHWM``, reset
before each row). MFU = tokens/s x model FLOPs per token
(``preschool.train.flops.flops_per_token``: 6N + causal attention) / the GPU's
dense bf16 peak from ``preschool.train.flops.GPUS`` (datasheet figures with
their sources); on a GPU not in that table, and on CPU, the best measured
matmul rate over several shapes instead (the output says which). The run stops starting rows after ``--budget-s``
seconds (default 450, so the whole command stays under 8 minutes on one H200)
and records the rows it skipped. Output: ``<out>/gpu_bench.json`` and
``<out>/gpu_bench.md`` (written atomically), and the table on stdout.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
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
        "ours+all doc-masked"]
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
        return {**plain, "compile": "blocks"}, None
    if row == "ours+kernels":
        if kernels is None:
            return {}, "needs CUDA and Liger-Kernel (pip install 'preschool[gpu]')"
        return {**plain, **kernels}, None
    if no_compile and row == "ours+compile":
        return {}, "--no-compile"
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
            cfg = {**extra, "device": dev.type, "micro_batch_size": s["batch"]}
            tps = _run_ours(model_cfg, ds, s, tmp / row.replace(" ", "_").replace("+", "_"), cfg)
    except Exception as e:  # one row failing (OOM, a kernel that does not fit this torch) must not lose the rest
        return {**out, "error": f"{type(e).__name__}: {str(e)[:500]}", "seconds": time.perf_counter() - t0}
    finally:
        torch._dynamo.reset()  # compiled graphs hold on to the row's model
    return {**out, "tokens_per_s": tps, "peak_memory_bytes": _peak_bytes(dev), "seconds": time.perf_counter() - t0}


def _run_ours(model_cfg: dict, ds: Path, s: dict, out: Path, extra: dict) -> float:
    """``train_throughput.run_ours`` on a dataset named ``rand`` (it names its dataset so)."""
    return tt.run_ours(model_cfg, ds, s["steps"], s["warmup_steps"] - 1, s["batch"], s["seq_len"], out,
                       compile=extra.pop("compile", False), precision="auto", extra=extra)


def worker(a) -> int:
    """All rows of one preset, one JSON line per row appended to ``--worker`` (a file the driver reads)."""
    s = TINY if a.tiny else FULL
    dev = torch.device(a.device_resolved)
    model_cfg = {"preset": a.preset, "overrides": dict(TINY_SHAPE) if a.tiny else {}}
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
            with open(a.worker, "a") as f:  # line by line, so a crash keeps the rows before it
                f.write(json.dumps({"preset": a.preset, **res}) + "\n")
    return 0


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
    ap.add_argument("--device", default="auto", help="auto | cuda | cpu")
    ap.add_argument("--tiny", action="store_true", help="2-layer d=64 models, vocab 512, seq 64 (CPU tests)")
    ap.add_argument("--presets", nargs="+", default=PRESETS)
    ap.add_argument("--rows", nargs="+", default=ROWS, choices=ROWS, metavar="ROW", help=f"subset of {ROWS}")
    ap.add_argument("--doc-masked-all", action="store_true", help="the doc-masked row for every preset")
    ap.add_argument("--no-compile", action="store_true",
                    help="rows without compile (quick CPU checks: Inductor takes ~1 min per compiled row on CPU)")
    ap.add_argument("--budget-s", type=float, default=450.0, help="start no row after this many seconds")
    ap.add_argument("--out", type=Path, default=Path("results/gpu_bench"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one preset in this process, rows to this file
    ap.add_argument("--preset", help=argparse.SUPPRESS)
    ap.add_argument("--device-resolved", help=argparse.SUPPRESS)
    ap.add_argument("--worker-budget", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.worker:
        return worker(a)
    if a.device == "auto":
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(a.device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise SystemExit("--device cuda: CUDA is not available here")
    s = TINY if a.tiny else FULL
    from preschool.train.flops import gpu_for_device_name, peak_matmul_flops

    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    measured, shape = peak_matmul_flops(str(dev), "bfloat16" if dev.type == "cuda" else "float32",
                                        seconds=0.05 if a.tiny else 0.3)
    listed = gpu_for_device_name(name) if dev.type == "cuda" else None
    peak, peak_source = ((listed.bf16_flops, listed.source) if listed else
                         (measured, f"measured best matmul here ({shape}); no datasheet entry"))
    print(f"device {name}; MFU denominator {peak / 1e12:.1f} TFLOP/s ({peak_source}); "
          f"measured matmul {measured / 1e12:.2f} TFLOP/s", flush=True)
    t_end = time.time() + a.budget_s
    results: list[dict] = []
    for i, preset in enumerate(a.presets):
        rows = [r for r in a.rows if r != "ours+all doc-masked" or i == 0 or a.doc_masked_all]
        left = t_end - time.time()
        if left <= 0:
            results += [{"preset": preset, "row": r, "skipped": "time budget spent"} for r in rows]
            continue
        rows_file = Path(tempfile.mkdtemp()) / "rows.jsonl"
        cmd = [sys.executable, __file__, "--worker", str(rows_file), "--preset", preset, "--device-resolved", str(dev),
               "--worker-budget", str(left), "--rows", *rows] + (["--tiny"] if a.tiny else []) + (
                   ["--no-compile"] if a.no_compile else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        got = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.is_file() else []
        shutil.rmtree(rows_file.parent, ignore_errors=True)
        if done.returncode != 0:
            seen = {r["row"] for r in got}
            got += [{"preset": preset, "row": r, "error": f"worker exited {done.returncode}: {done.stderr[-300:]}"}
                    for r in rows if r not in seen]
        fpt = tt.flops_per_token({"preset": preset, "overrides": TINY_SHAPE if a.tiny else {}}, s["vocab"],
                                 s["seq_len"])
        for r in got:
            if "tokens_per_s" in r:
                r["mfu"] = r["tokens_per_s"] * fpt / peak
            r["flops_per_token"] = fpt
            print(json.dumps(r), flush=True)
        results += got
    md = table(results, peak)
    report = {"device": name, "device_type": dev.type, "tiny": a.tiny, **s, "peak_flops": peak,
              "peak_source": peak_source, "measured_matmul_flops": measured, "measured_matmul_shape": shape,
              "torch": torch.__version__, "rows": results}
    from preschool.io import write_json, write_text

    a.out.mkdir(parents=True, exist_ok=True)
    write_json(a.out / "gpu_bench.json", report)
    write_text(a.out / "gpu_bench.md", md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
