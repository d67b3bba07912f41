"""Training throughput: preschool's trainer vs the Hugging Face ``Trainer`` on equal terms, one run.

For each preset (default: tiny-1m, small-6m at vocab 2048) and precision both
trainers run the same number of optimizer steps of AdamW + cosine schedule +
grad clipping on the same random-token rows, each in every setting the other
gets: the retained CPU heap (``preschool.train.cpu_heap``, the faster heap for
both; ``--heaps retain system`` adds glibc's defaults), and eager as well as
``torch.compile``-d (ours ``compile: true``, the HF ``Trainer``'s
``torch_compile``; ``--no-compile`` leaves those rows out). Every run is a
fresh Python process (so one trainer's process-wide settings cannot help or
hurt the other), each round runs every row once, interleaved, and a row's
figure is the median of its rounds. tokens/s is measured over the steps after
a warm-up (a compiled row's compile happens there; its time is printed as
``compile s``: the warm-up steps' time minus as many steady steps).

Printed per row: tokens/s, the ratio to the best HF ``Trainer`` row of the same
preset and precision, MFU against this machine's peak matmul rate in that
precision (measured here, the best of several shapes), and the ratio in CPU time
(per CPU-second of the process: on a machine shared with other jobs the wall
clock mostly measures the neighbours). Then ours-best / HF-best per preset and
precision, and ours bf16 / ours fp32 per preset. On a CPU, per preset in fp32,
also the kernel bound: the share of an eager step of the HF model that its
matmuls and flash attention take (one profile of a few steps after warm-up),
and the HF eager row's tokens/s divided by it, as a ratio to the best HF row:
about what no trainer running this model on PyTorch's kernels could beat, so a
target well above it is out of reach on this machine.

Precisions: ``fp32`` (the CPU default) and ``bf16`` (autocast; on CPU only
worth it with AMX / AVX-512 BF16, see preschool.train.precision), both by
default on a CPU that has native bf16, fp32 only on one without; on CUDA bf16.

    python benchmarks/train_throughput.py [--presets tiny-1m small-6m] [--precisions fp32 bf16]
        [--steps 12] [--rounds 3] [--no-compile] [--heaps retain]

Model FLOPs per trained token: ``preschool.train.flops.flops_per_token``
(6 x matmul params incl. the head, plus causal attention).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
    """Timestamps (wall and process CPU time) after every optimizer step (device synchronised); tokens/s over
    the steps after ``warm``."""

    def __init__(self):
        self.stamps: list[float] = []
        self.cpu: list[float] = []
        self.start = time.perf_counter()

    def tick(self) -> None:
        _sync()
        self.stamps.append(time.perf_counter())
        self.cpu.append(time.process_time())

    def tokens_per_s(self, warm: int, tokens_per_step: int) -> float:
        s = self.stamps
        return (len(s) - 1 - warm) * tokens_per_step / (s[-1] - s[warm])

    def tokens_per_cpu_s(self, warm: int, tokens_per_step: int) -> float:
        c = self.cpu
        return (len(c) - 1 - warm) * tokens_per_step / (c[-1] - c[warm])

    def warmup_excess_s(self, warm: int) -> float:
        """The warm-up steps' wall time beyond as many steady steps (a compiled run: about its compile time)."""
        s = self.stamps
        steady = (s[-1] - s[warm]) / (len(s) - 1 - warm)
        return (s[warm] - self.start) - (warm + 1) * steady


def run_ours(model, data, steps, warm, batch, seq_len, out: Path, compile: "bool | str" = False,
             cpu_heap: str = "retain", precision: str = "auto", extra: dict | None = None,
             callbacks: tuple = (), clock: "_Clock | None" = None) -> float:
    """Tokens/s of our trainer; ``extra`` adds train-config fields (fused_loss, kernels, micro_batch_size...),
    ``callbacks`` run before the clock's (``clock``: one to read more from afterwards)."""
    from preschool.train.callbacks import Callback
    from preschool.train.trainer import train

    cfg = {"model": _model_dict(model), "batch_size": batch, "lr": 1e-3, "log_every": steps, "eval_every": 0,
           "val": [], "checkpoint_every": 10**9, "progress": False, "seed": 0, "compile": compile,
           "cpu_heap": cpu_heap, "precision": precision,
           "stages": [{"name": "pt", "data": "rand", "tokens": steps * batch * seq_len, "schedule": {"warmup": 0.1}}],
           **(extra or {})}
    clock = clock or _Clock()

    class Clock(Callback):
        def on_step_end(self, trainer):
            clock.tick()

    train(cfg, out, {"rand": data}, callbacks=[*callbacks, Clock()])
    return clock.tokens_per_s(warm, batch * seq_len)


def run_hf(model, data, steps, warm, batch, seq_len, out: Path, compile: bool = False,
           cpu_heap: str = "system", precision: str = "auto", clock: "_Clock | None" = None) -> float:
    """Tokens/s of the HF ``Trainer`` on the same model, rows and optimisation (bf16 when ``precision`` says so)."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from preschool.config import from_dict
    from preschool.data.shards import ShardSet
    from preschool.train.model import ModelConfig, build_model

    if cpu_heap == "retain":  # attribution only: the HF Trainer does not do this itself
        from preschool.train.cpu_heap import retain_freed_memory

        retain_freed_memory()
    shards = ShardSet(data / "train")
    clock = clock or _Clock()

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(shards)

        def __getitem__(self, i):
            row = torch.from_numpy(shards.row(i).astype(np.int64))
            return {"input_ids": row[:-1], "labels": row[1:]}


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
                     precision: str) -> dict:
    """One run of ``which`` (ours | hf) in a new interpreter: tokens/s, tokens per CPU second, compile s."""
    cmd = [sys.executable, __file__, "--worker", which, "--presets", preset, "--data", str(data), "--out", str(out),
           "--cpu-heap", cpu_heap, "--precisions", precision, "--steps", str(a.steps),
           "--warmup-steps", str(a.warmup_steps), "--batch", str(a.batch), "--seq-len", str(a.seq_len)]
    done = subprocess.run(cmd + (["--compile"] if compile else []), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{which} run failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# leaf ops whose self time is the model's matmuls (linear layers, head; bmm if attention falls back to math)
# and its flash attention, forward and backward
_KERNEL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def kernel_share(preset: str, vocab: int, batch: int, seq_len: int, steps: int = 4) -> dict:
    """The share of an eager step of this preset's HF model (bare loop: forward, fp32 cross-entropy, backward,
    clip, fused AdamW, retained heap) spent in its matmuls and flash attention, from a profile of ``steps``
    steps after warm-up: their self time against the self time of every op and of the Python between them
    in the same steps (the same steps, because this machine's speed drifts by up to 1.4x between moments).
    ``1 / share`` is about the most any trainer of this model on PyTorch's kernels could gain over that step
    if everything else were free; the profiler's per-op cost falls mostly on the many small ops, so the share
    reads slightly low and the bound slightly generous."""
    from train_cpu_limits import profile_step  # benchmarks/ is this script's folder

    from preschool.train.model import ModelConfig, build_model

    hf = build_model(ModelConfig(preset=preset), vocab, seed=0)
    rows = torch.randint(0, vocab, (batch, seq_len + 1), generator=torch.Generator().manual_seed(0))
    per_step = {e.key: e.self_cpu_time_total / 1e3 / steps
                for e in profile_step(hf, lambda m, x: m(input_ids=x).logits, rows, steps=steps).key_averages()}
    mm = sum(v for k, v in per_step.items() if k in _KERNEL_OPS)
    attn = sum(v for k, v in per_step.items() if "flash_attention" in k)
    step = sum(per_step.values())
    return {"step_ms": step, "matmul_ms": mm, "attention_ms": attn, "share": (mm + attn) / step}


def default_precisions(dev: torch.device) -> list[str]:
    """bf16 on CUDA; fp32, plus bf16 where this CPU multiplies bf16 natively."""
    if dev.type == "cuda":
        return ["bf16"]
    from preschool.train.precision import cpu_bf16_capability

    return ["fp32", "bf16"] if cpu_bf16_capability() else ["fp32"]


def row_name(which: str, heap: str, comp: bool) -> str:
    return ("ours" if which == "ours" else "HF Trainer") + (" +compile" if comp else "") + \
        ("" if heap == "retain" else f" (heap {heap})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["tiny-1m", "small-6m"])
    ap.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"],
                    help="default: bf16 on CUDA; fp32 and (with AMX / AVX-512 BF16) bf16 on CPU")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup-steps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile rows of both trainers")
    ap.add_argument("--heaps", nargs="+", choices=["retain", "system"], default=["retain"],
                    help="CPU heap settings every trainer runs under (default: the retained heap, the faster)")
    # internal: one timed run in this process (used by the rounds above)
    ap.add_argument("--worker", choices=["ours", "hf"], help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--cpu-heap", choices=["retain", "system"], help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.worker:
        run = run_ours if a.worker == "ours" else run_hf
        clock = _Clock()
        tps = run(a.presets[0], a.data, a.steps, a.warmup_steps, a.batch, a.seq_len, a.out, a.compile, a.cpu_heap,
                  a.precisions[0], clock=clock)
        tokens = a.batch * a.seq_len
        print(json.dumps({"tokens_per_s": tps, "tokens_per_cpu_s": clock.tokens_per_cpu_s(a.warmup_steps, tokens),
                          "warmup_excess_s": clock.warmup_excess_s(a.warmup_steps)}))
        return 0
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    precisions = a.precisions or default_precisions(dev)
    heaps = a.heaps if dev.type == "cpu" else ["system"]  # the heap setting is a CPU one
    print(f"{cpu_model()}; load average before: {os.getloadavg()[0]:.2f}", flush=True)
    if dev.type == "cpu":  # the rows run under the retained heap; so do the bound's kernels and the peak
        from preschool.train.cpu_heap import retain_freed_memory

        retain_freed_memory()
    peaks = {}
    for prec in precisions:
        peaks[prec] = peak_matmul_flops(str(dev), "bfloat16" if prec == "bf16" else "float32")
        print(f"device {dev}, threads {torch.get_num_threads()}, peak {prec} matmul "
              f"{peaks[prec][0] / 1e9:.1f} GFLOP/s (best of several shapes, at {peaks[prec][1]})", flush=True)
    rows = [(w, h, c) for c in ([False] if a.no_compile else [False, True]) for w in ("ours", "hf") for h in heaps]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = make_data(tmp, rows=a.batch * a.steps, seq_len=a.seq_len, vocab=a.vocab)
        for preset, prec in [(p, q) for p in a.presets for q in precisions]:
            got: dict[tuple, list[dict]] = {r: [] for r in rows}
            for r in range(a.rounds):  # every row once per round, interleaved
                for which, heap, comp in rows:
                    got[(which, heap, comp)].append(in_fresh_process(
                        a, which, preset, data, tmp / f"{which}-{heap}-{preset}-{prec}-{comp}-{r}", comp, heap, prec))
            fpt = flops_per_token(preset, a.vocab, a.seq_len)
            peak = peaks[prec][0]
            med = {k: {f: statistics.median(run[f] for run in v) for f in v[0]} for k, v in got.items()}
            best_hf = max((k for k in rows if k[0] == "hf"), key=lambda k: med[k]["tokens_per_s"])
            best_hf_cpu = max(med[k]["tokens_per_cpu_s"] for k in rows if k[0] == "hf")
            label = f"{preset} {prec}"
            res = results[label] = {"preset": preset, "precision": prec, "best_hf_row": row_name(*best_hf),
                                    "rows": {}}
            print(f"{label}  (median of {a.rounds} rounds; ratios to the best HF Trainer row, "
                  f"{row_name(*best_hf)})", flush=True)
            for k in rows:
                m = med[k]
                ratio, cpu_ratio = m["tokens_per_s"] / med[best_hf]["tokens_per_s"], m["tokens_per_cpu_s"] / best_hf_cpu
                res["rows"][row_name(*k)] = {**m, "ratio": ratio, "cpu_ratio": cpu_ratio,
                                             "mfu": m["tokens_per_s"] * fpt / peak, "compile": k[2], "heap": k[1],
                                             "rounds": got[k]}
                comp = f"  compile {m['warmup_excess_s']:5.1f} s" if k[2] else ""
                print(f"  {row_name(*k):28s} {m['tokens_per_s']:9.0f} tok/s  RATIO {ratio:5.2f}x  "
                      f"MFU {100 * m['tokens_per_s'] * fpt / peak:5.1f}% of {prec} peak  "
                      f"(per CPU s: {cpu_ratio:5.2f}x){comp}", flush=True)
            ours_rows = {n: r for n, r in res["rows"].items() if n.startswith("ours")}
            best_name = max(ours_rows, key=lambda n: ours_rows[n]["tokens_per_s"])
            res["best_ours_row"], res["best_ratio"] = best_name, ours_rows[best_name]["ratio"]
            print(f"  best ours ({best_name}) / best HF Trainer: RATIO {ours_rows[best_name]['ratio']:.2f}x", flush=True)
            if dev.type == "cpu" and prec == "fp32":
                b = res["bound"] = kernel_share(preset, a.vocab, a.batch, a.seq_len)
                hf_eager = med[("hf", best_hf[1], False)]["tokens_per_s"]
                b["tokens_per_s"] = hf_eager / b["share"]  # the HF eager row with all but the kernels free
                b["ratio"] = b["tokens_per_s"] / med[best_hf]["tokens_per_s"]
                print(f"  kernel bound: matmuls {b['matmul_ms']:.0f} ms + flash attention {b['attention_ms']:.0f} ms "
                      f"of a {b['step_ms']:.0f} ms eager HF step ({100 * b['share']:.0f} %, one profile) -> with all else "
                      f"free {b['tokens_per_s']:9.0f} tok/s  RATIO {b['ratio']:5.2f}x the best HF row", flush=True)
        for preset in a.presets:  # bf16 vs fp32, ours, per preset, row by row and best to best
            r32, r16 = results.get(f"{preset} fp32"), results.get(f"{preset} bf16")
            if r32 and r16:
                for name in r32["rows"]:
                    if name.startswith("ours"):
                        q = r16["rows"][name]["tokens_per_s"] / r32["rows"][name]["tokens_per_s"]
                        print(f"{preset:10s} bf16 / fp32, {name}: {q:4.2f}x", flush=True)
                best = lambda r: r["rows"][r["best_ours_row"]]["tokens_per_s"]  # noqa: E731
                print(f"{preset:10s} bf16 / fp32, best ours to best ours: {best(r16) / best(r32):4.2f}x", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)
    print(json.dumps({"device": str(dev), "cpu": cpu_model(), "threads": torch.get_num_threads(),
                      "peak_matmul_flops": {k: v[0] for k, v in peaks.items()},
                      "peak_shapes": {k: v[1] for k, v in peaks.items()}, "batch": a.batch, "seq_len": a.seq_len,
                      "steps": a.steps, "rounds": a.rounds, "results": results}, indent=1))
    return 0


def cpu_model() -> str:
    """lscpu's model name, family and model (what timing figures are labelled with)."""
    try:
        info = dict(l.split(":", 1) for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                    if ":" in l)
    except OSError:
        return "unknown"
    get = lambda k: info.get(k, "?").strip()  # noqa: E731
    return f"{get('Model name')}, family {get('CPU family')} model {get('Model')}"


if __name__ == "__main__":
    sys.exit(main())
