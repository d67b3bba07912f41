"""Training throughput: preschool's trainer vs the Hugging Face ``Trainer`` on the same model, data and batch.

For each preset (default: tiny-1m, small-6m at vocab 2048) both trainers run
the same number of optimizer steps of AdamW + cosine schedule + grad clipping
on the same random-token rows (fp32, this machine's CPU or GPU). Tokens/s is
measured over the steps after a warm-up, rounds alternate between the two
trainers (best round of each is kept, so background load hurts both alike),
and the script prints our/HF ratio plus MFU against the machine's fp32 matmul
rate, measured here with a large matmul.

    python benchmarks/train_throughput.py [--presets tiny-1m small-6m] [--steps 12] [--rounds 2] [--compile]

Model FLOPs per trained token: 6 * (non-embedding params + head matmul) +
6 * layers * seq_len * hidden (attention scores and values, causal not halved).
"""

from __future__ import annotations

import argparse
import json
import os
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
    from preschool.train.model import ModelConfig, describe, hf_config

    d = describe(ModelConfig(preset=preset), vocab)
    hf = hf_config(ModelConfig(preset=preset), vocab)
    n = d["params_non_embedding"] + vocab * hf.hidden_size  # the head is a matmul even when tied
    return 6 * n + 6 * hf.num_hidden_layers * seq_len * hf.hidden_size


def run_ours(preset, data, steps, warm, batch, seq_len, out: Path, compile: bool = False) -> float:
    from preschool.train.trainer import train

    cfg = {"model": {"preset": preset}, "batch_size": batch, "lr": 1e-3, "log_every": steps, "eval_every": 0,
           "val": [], "checkpoint_every": 10**9, "progress": False, "seed": 0, "compile": compile,
           "stages": [{"name": "pt", "data": "rand", "tokens": steps * batch * seq_len, "warmup": 0.1}]}
    stamps = []

    from preschool.train.callbacks import Callback

    class Clock(Callback):
        def on_step_end(self, trainer):
            _sync()
            stamps.append(time.perf_counter())

    train(cfg, out, {"rand": data}, callbacks=[Clock()])
    return (len(stamps) - 1 - warm) * batch * seq_len / (stamps[-1] - stamps[warm])


def run_hf(preset, data, steps, warm, batch, seq_len, out: Path, compile: bool = False) -> float:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from preschool.data.shards import ShardSet
    from preschool.train.model import ModelConfig, build_model

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
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # the peak both trainers compute at: fp32 on CPU, bf16 (autocast) on CUDA
    if dev.type == "cuda":
        peak, kind = matmul_flops(dev, n=8192, dtype=torch.bfloat16), "bf16"
    else:
        peak, kind = matmul_flops(dev), "fp32"
    print(f"device {dev}, threads {torch.get_num_threads()}, measured {kind} matmul {peak / 1e9:.1f} GFLOP/s")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = make_data(tmp, rows=a.batch * a.steps, seq_len=a.seq_len, vocab=a.vocab)
        for preset, comp in [(p, c) for p in a.presets for c in ([False, True] if a.compile else [False])]:
            ours, hf = [], []
            for r in range(a.rounds):
                ours.append(run_ours(preset, data, a.steps, a.warmup_steps, a.batch, a.seq_len,
                                     tmp / f"o-{preset}-{comp}-{r}", comp))
                hf.append(run_hf(preset, data, a.steps, a.warmup_steps, a.batch, a.seq_len,
                                 tmp / f"h-{preset}-{comp}-{r}", comp))
            fpt = flops_per_token(preset, a.vocab, a.seq_len)
            o, h = max(ours), max(hf)
            label = preset + ("+compile" if comp else "")
            results[label] = {"ours_tokens_per_s": o, "hf_tokens_per_s": h, "ratio": o / h,
                               "mfu_ours": o * fpt / peak, "mfu_hf": h * fpt / peak,
                               "rounds_ours": ours, "rounds_hf": hf}
            print(f"{label:17s} ours {o:9.0f} tok/s  HF Trainer {h:9.0f} tok/s  ratio {o / h:5.2f}x  "
                  f"MFU ours {100 * o * fpt / peak:5.1f}%  HF {100 * h * fpt / peak:5.1f}%", flush=True)
    print(json.dumps({"device": str(dev), "matmul_flops": peak, "batch": a.batch, "seq_len": a.seq_len,
                      "steps": a.steps, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
