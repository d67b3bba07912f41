"""Training throughput: preschool's trainer vs the Hugging Face ``Trainer`` on the same model, data and batch.

For each preset (default: tiny-1m, small-6m at vocab 2048) and precision both
trainers run the same number of optimizer steps of AdamW + cosine schedule +
grad clipping on the same random-token rows. Every run is a fresh Python
process (so one trainer's process-wide settings cannot help or hurt the
other), rounds alternate between the trainers, the best round of each is kept,
and tokens/s is measured over the steps after a warm-up. The script prints
our/HF ratio plus MFU against this machine's peak matmul rate in that
precision, measured here as the best of several matmul shapes.

Precisions: ``fp32`` (the CPU default) and ``bf16`` (autocast; on CPU only
worth it with AMX / AVX-512 BF16, see preschool.train.precision), both by
default on a CPU that has native bf16, fp32 only on one without; on CUDA bf16.

On CPU the fp32 rows also show where the ratio comes from: our trainer with
``cpu_heap: system`` (glibc's allocator defaults, as the HF ``Trainer`` runs)
and the HF ``Trainer`` given our retained heap (``preschool.train.cpu_heap``).

    python benchmarks/train_throughput.py [--presets tiny-1m small-6m] [--precisions fp32 bf16]
        [--steps 12] [--rounds 2] [--compile]

Model FLOPs per trained token: ``preschool.train.flops.flops_per_token``
(6 x matmul params incl. the head, plus causal attention).
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

from preschool.train.flops import peak_matmul_flops


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def make_data(root: Path, rows: int, seq_len: int, vocab: int) -> Path:
    from preschool.data.shards import ShardWriter

    rng = np.random.default_rng(0)
    with ShardWriter(root / "rand" / "train", seq_len + 1, vocab) as w:
        w.add_rows(rng.integers(0, vocab, (rows, seq_len + 1)))
    return root / "rand"


def flops_per_token(model: "str | dict", vocab: int, seq_len: int) -> float:
    """Model FLOPs per trained token (preschool.train.flops) of a preset name or a ModelConfig dict."""
    from preschool.config import from_dict
    from preschool.train.flops import flops_per_token as fpt
    from preschool.train.model import ModelConfig, describe

    return fpt(describe(from_dict(ModelConfig, _model_dict(model)), vocab), seq_len)


def _model_dict(model: "str | dict") -> dict:
    return {"preset": model} if isinstance(model, str) else dict(model)


class _Clock:
    """Timestamps after every optimizer step (device synchronised); tokens/s over the steps after ``warm``."""

    def __init__(self):
        self.stamps: list[float] = []

    def tick(self) -> None:
        _sync()
        self.stamps.append(time.perf_counter())

    def tokens_per_s(self, warm: int, tokens_per_step: int) -> float:
        s = self.stamps
        return (len(s) - 1 - warm) * tokens_per_step / (s[-1] - s[warm])


def run_ours(model, data, steps, warm, batch, seq_len, out: Path, compile: "bool | str" = False,
             cpu_heap: str = "retain", precision: str = "auto", extra: dict | None = None,
             callbacks: tuple = ()) -> float:
    """Tokens/s of our trainer; ``extra`` adds train-config fields (fused_loss, kernels, micro_batch_size...),
    ``callbacks`` run before the clock's."""
    from preschool.train.callbacks import Callback
    from preschool.train.trainer import train

    cfg = {"model": _model_dict(model), "batch_size": batch, "lr": 1e-3, "log_every": steps, "eval_every": 0,
           "val": [], "checkpoint_every": 10**9, "progress": False, "seed": 0, "compile": compile,
           "cpu_heap": cpu_heap, "precision": precision,
           "stages": [{"name": "pt", "data": "rand", "tokens": steps * batch * seq_len, "schedule": {"warmup": 0.1}}],
           **(extra or {})}
    clock = _Clock()

    class Clock(Callback):
        def on_step_end(self, trainer):
            clock.tick()

    train(cfg, out, {"rand": data}, callbacks=[*callbacks, Clock()])
    return clock.tokens_per_s(warm, batch * seq_len)


def run_hf(model, data, steps, warm, batch, seq_len, out: Path, compile: bool = False,
           cpu_heap: str = "system", precision: str = "auto") -> float:
    """Tokens/s of the HF ``Trainer`` on the same model, rows and optimisation (bf16 when ``precision`` says so)."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from preschool.config import from_dict
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

    clock = _Clock()

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            clock.tick()

    net = build_model(from_dict(ModelConfig, _model_dict(model)), shards.vocab_size, seed=0)

    # labels are pre-shifted, so feed a loss that does not shift again (same work as ours)
    def loss_fn(outputs, labels, num_items_in_batch=None):
        logits = outputs.logits
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))

    bf16 = precision == "bf16" or (precision == "auto" and torch.cuda.is_available())
    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=batch, max_steps=steps,
                             learning_rate=1e-3, weight_decay=0.1, adam_beta2=0.95, max_grad_norm=1.0,
                             lr_scheduler_type="cosine", warmup_steps=max(1, steps // 10), logging_steps=10**9,
                             save_strategy="no", report_to=[], use_cpu=not torch.cuda.is_available(),
                             dataloader_num_workers=0, disable_tqdm=True, seed=0,
                             bf16=bf16, torch_compile=compile)  # bf16: autocast, as ours
    Trainer(model=net, args=args, train_dataset=Rows(), callbacks=[Clock()], compute_loss_func=loss_fn).train()
    return clock.tokens_per_s(warm, batch * seq_len)


def in_fresh_process(a, which: str, preset: str, data: Path, out: Path, compile: bool, cpu_heap: str,
                     precision: str) -> float:
    """Tokens/s of one run of ``which`` (ours | hf) in a new interpreter."""
    cmd = [sys.executable, __file__, "--worker", which, "--presets", preset, "--data", str(data), "--out", str(out),
           "--cpu-heap", cpu_heap, "--precisions", precision, "--steps", str(a.steps),
           "--warmup-steps", str(a.warmup_steps), "--batch", str(a.batch), "--seq-len", str(a.seq_len)]
    done = subprocess.run(cmd + (["--compile"] if compile else []), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{which} run failed:\n{done.stderr[-4000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def default_precisions(dev: torch.device) -> list[str]:
    """bf16 on CUDA; fp32, plus bf16 where this CPU multiplies bf16 natively."""
    if dev.type == "cuda":
        return ["bf16"]
    from preschool.train.precision import cpu_bf16_capability

    return ["fp32", "bf16"] if cpu_bf16_capability() else ["fp32"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["tiny-1m", "small-6m"])
    ap.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"],
                    help="default: bf16 on CUDA; fp32 and (with AMX / AVX-512 BF16) bf16 on CPU")
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
        print(run(a.presets[0], a.data, a.steps, a.warmup_steps, a.batch, a.seq_len, a.out, a.compile, a.cpu_heap,
                  a.precisions[0]))
        return 0
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    precisions = a.precisions or default_precisions(dev)
    peaks = {}
    for prec in precisions:
        peaks[prec] = peak_matmul_flops(str(dev), "bfloat16" if prec == "bf16" else "float32")
        print(f"device {dev}, threads {torch.get_num_threads()}, peak {prec} matmul "
              f"{peaks[prec][0] / 1e9:.1f} GFLOP/s (best of several shapes, at {peaks[prec][1]})", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = make_data(tmp, rows=a.batch * a.steps, seq_len=a.seq_len, vocab=a.vocab)
        for preset, prec, comp in [(p, q, c) for p in a.presets for q in precisions
                                   for c in ([False, True] if a.compile else [False])]:
            # (trainer, cpu_heap): each trainer as it runs by default, then (CPU fp32) each with the other's heap
            kinds = [("ours", "retain"), ("hf", "system")]
            if dev.type == "cpu" and prec == "fp32" and not a.no_attribution:
                kinds += [("ours", "system"), ("hf", "retain")]
            got: dict[tuple[str, str], list[float]] = {k: [] for k in kinds}
            for r in range(a.rounds):
                for which, heap in kinds:
                    got[(which, heap)].append(in_fresh_process(
                        a, which, preset, data, tmp / f"{which}-{heap}-{preset}-{prec}-{comp}-{r}", comp, heap, prec))
            fpt = flops_per_token(preset, a.vocab, a.seq_len)
            peak = peaks[prec][0]
            o, h = max(got[("ours", "retain")]), max(got[("hf", "system")])
            label = f"{preset} {prec}" + (" +compile" if comp else "")
            results[label] = {"preset": preset, "precision": prec, "compile": comp,
                              "ours_tokens_per_s": o, "hf_tokens_per_s": h, "ratio": o / h,
                              "mfu_ours": o * fpt / peak, "mfu_hf": h * fpt / peak,
                              "rounds": {f"{w}/{hp}": v for (w, hp), v in got.items()}}
            print(f"{label:22s} ours {o:9.0f} tok/s  HF Trainer {h:9.0f} tok/s  RATIO {o / h:5.2f}x  "
                  f"MFU ours {100 * o * fpt / peak:5.1f}%  HF {100 * h * fpt / peak:5.1f}%", flush=True)
            if ("ours", "system") in got:
                os_, hr = max(got[("ours", "system")]), max(got[("hf", "retain")])
                results[label].update(ours_system_heap_tokens_per_s=os_, hf_retained_heap_tokens_per_s=hr)
                print(f"{'':22s} attribution: ours with cpu_heap: system {os_:9.0f} tok/s ({os_ / h:4.2f}x HF); "
                      f"HF Trainer with our retained heap {hr:9.0f} tok/s (ours {o / hr:4.2f}x that)", flush=True)
        for preset in a.presets:  # fp32 vs bf16, ours, per preset
            r32, r16 = results.get(f"{preset} fp32"), results.get(f"{preset} bf16")
            if r32 and r16:
                print(f"{preset:22s} bf16 / fp32 (ours): {r16['ours_tokens_per_s'] / r32['ours_tokens_per_s']:4.2f}x",
                      flush=True)
    print(json.dumps({"device": str(dev), "peak_matmul_flops": {k: v[0] for k, v in peaks.items()},
                      "peak_shapes": {k: v[1] for k, v in peaks.items()}, "batch": a.batch, "seq_len": a.seq_len,
                      "steps": a.steps, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
