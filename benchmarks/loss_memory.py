"""Peak memory of a training step at vocab 128k x seq 4096: plain logits loss vs ``fused_loss: chunked``.

    python benchmarks/loss_memory.py [--layers 2] [--steps 2] [--vocab 128256] [--seq-len 4096]

A gpt-1b-shaped model (d=1536, 12 heads / 4 KV, FFN 4096; ``--layers`` of
its 36 layers, default 2, so a CPU run takes minutes) trains ``--steps`` steps
of batch 1 on random tokens with our trainer, once with ``fused_loss: off``
(the [1, 4096, 128256] fp32 logits, 2.1 GB, plus their log-softmax kept for
the backward and the logits gradient) and once with ``chunked``. Each run is a
fresh process; its peak resident set size (``ru_maxrss``) is the figure. The
rest of the step (weights, AdamW state, gradients, activations) is the same in
both, so the difference is what the logits tensor cost.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def worker(a) -> None:
    """One training run in this process; prints its peak RSS in bytes."""
    import train_throughput as tt

    model = {"preset": "gpt-1b", "overrides": {"num_hidden_layers": a.layers}}
    tt.run_ours(model, a.data, a.steps + 1, 0, 1, a.seq_len, a.out, precision="fp32",
                extra={"fused_loss": a.fused_loss, "device": "cpu"})
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)  # Linux reports KiB


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=128_256)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--fused-loss", help=argparse.SUPPRESS)  # internal: run one setting
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.fused_loss:
        worker(a)
        return 0
    import torch
    import train_throughput as tt

    from preschool.train.loss import chunk_size_for

    peaks = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tt.make_data(tmp, rows=a.steps + 1, seq_len=a.seq_len, vocab=a.vocab)
        for mode in ("off", "chunked"):
            cmd = [sys.executable, __file__, "--fused-loss", mode, "--data", str(data), "--out", str(tmp / mode),
                   "--layers", str(a.layers), "--steps", str(a.steps), "--seq-len", str(a.seq_len)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{mode} run failed:\n{done.stderr[-3000:]}")
            peaks[mode] = int(done.stdout.strip().splitlines()[-1])
            print(f"fused_loss: {mode:8s} peak RSS {peaks[mode] / 2**30:6.2f} GiB", flush=True)
    logits = a.seq_len * a.vocab * 4
    saved = peaks["off"] - peaks["chunked"]
    print(f"logits tensor (fp32, batch 1): {logits / 2**30:.2f} GiB; chunked saves {saved / 2**30:.2f} GiB "
          f"({saved / logits:.1f}x the logits), peak ratio off/chunked {peaks['off'] / peaks['chunked']:.2f}x; "
          f"chunk = {chunk_size_for(a.vocab)} positions")
    print(json.dumps({"layers": a.layers, "steps": a.steps, "vocab": a.vocab, "seq_len": a.seq_len,
                      "threads": torch.get_num_threads(), "peak_rss_bytes": peaks, "logits_bytes": logits}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
