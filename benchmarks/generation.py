"""Synthetic data generation speed vs training speed, measured in one run on this machine.

For every registered generator (default parameters, reserved-id render, one
process): tokens generated and encoded per second, divided by the training
tokens per second of the ``small-6m`` preset (a ~6M-parameter Qwen2 decoder,
AdamW, fp32, plain torch loop) on the same machine. Generation must not be
the bottleneck of pre-pretraining: every ratio should be >= 100. Training
speed is measured before and after the generators and averaged, because the
machine may be shared.

``--stream N`` also writes N tokens (e.g. 50M) of one generator to a
temporary shard set in a fresh process and prints that process's peak RSS,
showing generation streams to disk in bounded memory.

    python benchmarks/generation.py                      # ratios
    python benchmarks/generation.py --stream 50M         # + bounded-memory streaming check
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time


def train_tokens_per_s(seq_len: int, batch: int, steps: int, vocab: int = 2048, threads: int | None = None) -> float:
    import torch

    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)

    from preschool.train.model import ModelConfig, build_model, count_params

    model = build_model(ModelConfig(preset="small-6m"), vocab, seed=0).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, seq_len + 1), generator=g)
    times = []
    for i in range(steps + 1):
        t = time.perf_counter()
        out = model(input_ids=x[:, :-1])
        loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:  # the first step pays one-off allocation costs
            times.append(time.perf_counter() - t)
    torch.set_num_threads(old_threads)
    times.sort()
    tps = batch * seq_len / times[len(times) // 2]
    print(f"train small-6m ({count_params(model) / 1e6:.2f}M params, batch {batch} x {seq_len}, "
          f"{threads or old_threads} torch threads): {tps:,.0f} tokens/s (median of {steps} steps)")
    return tps


def gen_tokens_per_s(name: str, seconds: float) -> tuple[float, int]:
    from preschool.synthetic import GENERATORS
    from preschool.synthetic.write import SymbolEncoder

    gen = GENERATORS.build(name, {})
    enc = SymbolEncoder("reserved", reserved_offset=1)
    n = 0
    t = time.perf_counter()
    i = 0
    while time.perf_counter() - t < seconds:
        for item in gen.items(i, i + 16):
            n += len(enc.encode(item).ids) + 1  # + the EOS the packer adds
        i += 16
    return n / (time.perf_counter() - t), n


STREAM_CHILD = """
import resource, sys, time
from preschool.synthetic import GENERATORS
from preschool.synthetic.write import SymbolEncoder, write_generator_shards
name, tokens, row_len, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
gen = GENERATORS.build(name, {"length": row_len - 1})
enc = SymbolEncoder("reserved", reserved_offset=1)
t = time.perf_counter()
m = write_generator_shards(gen, enc, out, -(-tokens // row_len), row_len, enc.vocab_size(gen), 0, exact_fill=True)
dt = time.perf_counter() - t
# VmHWM: this process image's own peak RSS (getrusage would also count the parent
# image it was forked from before exec)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(f"{m['n_tokens']} {dt:.3f} {int(hwm) / 1024:.1f}")
"""


def _count(s: str) -> int:
    mult = {"k": 10**3, "m": 10**6, "b": 10**9}.get(s[-1].lower(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="generation time per generator")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--generators", nargs="*", help="default: every registered generator")
    ap.add_argument("--stream", type=_count, default=0, help="also stream this many tokens to disk (e.g. 50M)")
    ap.add_argument("--stream-generator", default="shuffle_dyck")
    ap.add_argument("--stream-only", action="store_true", help="skip the ratio table")
    args = ap.parse_args()

    from preschool.synthetic import GENERATORS

    ok = True
    if not args.stream_only:
        ok = ratios(args, args.generators or GENERATORS.names())
    if args.stream:
        stream(args)
    return 0 if ok else 1


def ratios(args, names: list[str]) -> bool:
    # Training at the default thread count and single-threaded (faster on a busy
    # machine); the faster one is the baseline, so ratios are conservative.
    train1 = max(train_tokens_per_s(args.seq_len, args.batch, args.steps),
                 train_tokens_per_s(args.seq_len, args.batch, args.steps, threads=1))
    gen = {name: gen_tokens_per_s(name, args.seconds) for name in names}
    train2 = max(train_tokens_per_s(args.seq_len, args.batch, args.steps),
                 train_tokens_per_s(args.seq_len, args.batch, args.steps, threads=1))
    train = (train1 + train2) / 2
    print(f"\ntraining tokens/s (best thread count, mean of before/after): {train:,.0f}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'generator':<16}{'tokens/s':>14}{'ratio':>10}  (>= 100 required)")
    ok = True
    for name, (tps, n) in gen.items():
        r = tps / train
        ok &= r >= 100
        print(f"{name:<16}{tps:>14,.0f}{r:>10.0f}  {'ok' if r >= 100 else 'TOO SLOW'}")
    return ok


def stream(args) -> None:
    """Write ``args.stream`` tokens in a fresh process; print its speed and peak RSS."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "shards")
        t = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", STREAM_CHILD, args.stream_generator, str(args.stream),
                              str(args.seq_len + 1), out], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
        n_tokens, gen_s, rss = res.stdout.split()
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)) / 2**20
        print(f"\nstreamed {int(n_tokens):,} tokens of {args.stream_generator} to disk ({size:,.0f} MiB) in "
              f"{float(gen_s):.1f} s ({int(n_tokens) / float(gen_s):,.0f} tokens/s, wall {wall:.1f} s incl. "
              f"start-up); peak RSS of that process: {float(rss):,.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
