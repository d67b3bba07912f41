"""Training throughput: preschool's trainer vs the Hugging Face ``Trainer`` on the same model, data and batch.

For each preset (default: tiny-1m, small-6m at vocab 2048) both trainers run
the same number of optimizer steps of AdamW + cosine schedule + grad clipping
on the same random-token rows (fp32, this machine's CPU or GPU). Every run is a
fresh Python process (so one trainer's process-wide settings cannot help or
hurt the other), rounds alternate between the trainers, the best round of each
is kept, and tokens/s is measured over the steps after a warm-up. The script
prints our/HF ratio plus MFU against the machine's fp32 matmul rate, measured
here with a large matmul.

On CPU it also prints where the ratio comes from: our trainer with
``cpu_heap: system`` (glibc's allocator defaults, as the HF ``Trainer`` runs)
and the HF ``Trainer`` given our retained heap (``preschool.train.cpu_heap``).

    python benchmarks/train_throughput.py [--presets tiny-1m small-6m] [--steps 12] [--rounds 2] [--compile]

Model FLOPs per trained token: 6 * (non-embedding params + head matmul) +
6 * layers * seq_len * hidden (attention scores and values, causal not halved).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def matmul_flops(device: torch.device, n: int = 2048, reps: int = 10, dtype=torch.float32) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - t)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def make_data(root: Path, rows: int, seq_len: int, vocab: int) -> Path:
    from preschool.data.shards import ShardWriter

    rng = np.random.default_rng(0)
    with ShardWriter(root / "rand" / "train", seq_len + 1, vocab) as w:
        w.add_rows(rng.integers(0, vocab, (rows, seq_len + 1)))
    return root / "rand"


def flops_per_token(preset: str, vocab: int, seq_len: int) -> float:
    from preschool.train.flops import flops_per_token as fpt
    from preschool.train.model import ModelConfig, describe

    return fpt(describe(ModelConfig(preset=preset), vocab), seq_len)


def run_ours(preset, data, steps, warm, batch, seq_len, out: Path, compile: bool = False,
             cpu_heap: str = "retain") -> float:
    from preschool.train.callbacks import Callback
    from preschool.train.trainer import train

    cfg = {"model": {"preset": preset}, "batch_size": batch, "lr": 1e-3, "log_every": steps, "eval_every": 0,
           "val": [], "checkpoint_every": 10**9, "progress": False, "seed": 0, "compile": compile,
           "cpu_heap": cpu_heap,
           "stages": [{"name": "pt", "data": "rand", "tokens": steps * batch * seq_len, "warmup": 0.1}]}
    stamps = []

    class Clock(Callback):
        def on_step_end(self, trainer):
            _sync()
            stamps.append(time.perf_counter())

    train(cfg, out, {"rand": data}, callbacks=[Clock()])
    return (len(stamps) - 1 - warm) * batch * seq_len / (stamps[-1] - stamps[warm])


def run_hf(preset, data, steps, warm, batch, seq_len, out: Path, compile: bool = False,
           cpu_heap: str = "system") -> float:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from preschool.data.shards import ShardSet
    from preschool.train.model import ModelConfig, build_model

    if cpu_heap == "retain":  # attribution only: the HF Trainer does not do this itself
        from preschool.train.cpu_heap import retain_freed_memory

        retain_freed_memory()
    shards = ShardSet(data / "train")

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(shards)

        def __getitem__(self, i):
            row = torch.from_numpy(shards.row(i).astype(np.int64))
            return {"input_ids": row[:-1], "labels": row[1:]}

    stamps = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            _sync()
            stamps.append(time.perf_counter())

    model = build_model(ModelConfig(preset=preset), shards.vocab_size, seed=0)

    # labels are pre-shifted, so feed a loss that does not shift again (same work as ours)
    def loss_fn(outputs, labels, num_items_in_batch=None):
        logits = outputs.logits
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))

    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=batch, max_steps=steps,
                             learning_rate=1e-3, weight_decay=0.1, adam_beta2=0.95, max_grad_norm=1.0,
                             lr_scheduler_type="cosine", warmup_steps=max(1, steps // 10), logging_steps=10**9,
                             save_strategy="no", report_to=[], use_cpu=not torch.cuda.is_available(),
                             dataloader_num_workers=0, disable_tqdm=True, seed=0,
                             bf16=torch.cuda.is_available(), torch_compile=compile)  # ours: bf16 autocast on CUDA (precision auto)
    Trainer(model=model, args=args, train_dataset=Rows(), callbacks=[Clock()], compute_loss_func=loss_fn).train()
    return (len(stamps) - 1 - warm) * batch * seq_len / (stamps[-1] - stamps[warm])


def in_fresh_process(a, which: str, preset: str, data: Path, out: Path, compile: bool, cpu_heap: str) -> float:
    """Tokens/s of one run of ``which`` (ours | hf) in a new interpreter."""
    cmd = [sys.executable, __file__, "--worker", which, "--presets", preset, "--data", str(data), "--out", str(out),
           "--cpu-heap", cpu_heap, "--steps", str(a.steps), "--warmup-steps", str(a.warmup_steps),
           "--batch", str(a.batch), "--seq-len", str(a.seq_len)] + (["--compile"] if compile else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{which} run failed:\n{done.stderr[-4000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["tiny-1m", "small-6m"])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup-steps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--compile", action="store_true",
                    help="also compare with torch.compile on both sides (ours: compile: true; HF: torch_compile)")
    ap.add_argument("--no-attribution", action="store_true",
                    help="CPU: skip the two extra runs that show what the retained heap contributes")
    # internal: one timed run in this process (used by the rounds above)
    ap.add_argument("--worker", choices=["ours", "hf"], help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--cpu-heap", choices=["retain", "system"], help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.worker:
        run = run_ours if a.worker == "ours" else run_hf
        print(run(a.presets[0], a.data, a.steps, a.warmup_steps, a.batch, a.seq_len, a.out, a.compile, a.cpu_heap))
        return 0
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # the peak both trainers compute at: fp32 on CPU, bf16 (autocast) on CUDA
    if dev.type == "cuda":
        peak, kind = matmul_flops(dev, n=8192, dtype=torch.bfloat16), "bf16"
    else:
        peak, kind = matmul_flops(dev), "fp32"
    print(f"device {dev}, threads {torch.get_num_threads()}, measured {kind} matmul {peak / 1e9:.1f} GFLOP/s")
    # (trainer, cpu_heap): each trainer as it runs by default, then (CPU) each with the other's heap setting
    kinds = [("ours", "retain"), ("hf", "system")]
    if dev.type == "cpu" and not a.no_attribution:
        kinds += [("ours", "system"), ("hf", "retain")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = make_data(tmp, rows=a.batch * a.steps, seq_len=a.seq_len, vocab=a.vocab)
        for preset, comp in [(p, c) for p in a.presets for c in ([False, True] if a.compile else [False])]:
            got: dict[tuple[str, str], list[float]] = {k: [] for k in kinds}
            for r in range(a.rounds):
                for which, heap in kinds:
                    got[(which, heap)].append(in_fresh_process(a, which, preset, data,
                                                               tmp / f"{which}-{heap}-{preset}-{comp}-{r}", comp, heap))
            fpt = flops_per_token(preset, a.vocab, a.seq_len)
            o, h = max(got[("ours", "retain")]), max(got[("hf", "system")])
            label = preset + ("+compile" if comp else "")
            results[label] = {"ours_tokens_per_s": o, "hf_tokens_per_s": h, "ratio": o / h,
                              "mfu_ours": o * fpt / peak, "mfu_hf": h * fpt / peak,
                              "rounds": {f"{w}/{hp}": v for (w, hp), v in got.items()}}
            print(f"{label:17s} ours {o:9.0f} tok/s  HF Trainer {h:9.0f} tok/s  RATIO {o / h:5.2f}x  "
                  f"MFU ours {100 * o * fpt / peak:5.1f}%  HF {100 * h * fpt / peak:5.1f}%", flush=True)
            if ("ours", "system") in got:
                os_, hr = max(got[("ours", "system")]), max(got[("hf", "retain")])
                results[label].update(ours_system_heap_tokens_per_s=os_, hf_retained_heap_tokens_per_s=hr)
                print(f"{'':17s} attribution: ours with cpu_heap: system {os_:9.0f} tok/s ({os_ / h:4.2f}x HF); "
                      f"HF Trainer with our retained heap {hr:9.0f} tok/s (ours {o / hr:4.2f}x that)", flush=True)
    print(json.dumps({"device": str(dev), "matmul_flops": peak, "batch": a.batch, "seq_len": a.seq_len,
                      "steps": a.steps, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
