"""How close is ``preschool plan``'s CPU memory estimate to a real CPU training run's peak?

Each case trains a few steps with our trainer in a fresh process and reads the
process's peak resident set size (``VmHWM``) after resetting it
(``/proc/self/clear_refs``, Linux) once everything is imported and the data is
written. Measured = peak RSS during training - RSS before training: weights,
gradients, AdamW moments, activations, the loss's working set, plus whatever
the allocator keeps (the trainer's retained heap included) and the modules the
trainer imports late (a warm-up step of a toy model runs before the baseline, so one-time
library buffers are not counted). Each case runs with ``cpu_heap: system`` and glibc's
``MALLOC_MMAP_THRESHOLD_=65536`` (every buffer of 64 KiB or more is mapped on its own and
unmapped when freed, so RSS follows the live tensors the estimate counts) and with ``retain`` (the CPU default: freed memory stays
in the heap, so RSS is the heap's high-water mark). The planner's estimate for the same shape is
:func:`preschool.plan.memory` in single-process mode on CPU. Prints one line per
case and the ratio estimate / measured; ``--json`` prints the rows as JSON.

    python benchmarks/plan_memory.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# (name, preset, vocab, seq_len, batch = micro-batch): one body-dominated and one head-dominated shape
CASES = [
    ("tiny-1m body", "tiny-1m", 2048, 256, 16),
    ("micro wide-vocab head", "micro", 16384, 256, 8),
]


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _warm_up() -> None:
    """One step of a 2-layer toy model through the same code paths, so that lazily imported modules
    and the math libraries' one-time buffers are in the baseline, not in the measurement."""
    import torch

    from preschool.train.model import ModelConfig, build_model

    m = build_model(ModelConfig(preset="micro", overrides={"hidden_size": 32, "intermediate_size": 64}), 64)
    opt = torch.optim.AdamW(m.parameters(), fused=True)
    ids = torch.randint(0, 64, (2, 9))
    out = m(input_ids=ids[:, :-1], use_cache=False)
    torch.nn.functional.cross_entropy(out.logits.reshape(-1, 64), ids[:, 1:].reshape(-1)).backward()
    opt.step()


def child(cases: list, steps: int, heap: str) -> list[int]:
    """Runs in the fresh process: per case, write random rows, reset the peak, train; returns the
    peak RSS growth of each case. With ``cpu_heap: system`` a finished case gives its memory back,
    so cases can share the process (and its one-time import cost)."""
    import numpy as np
    import safetensors.torch  # noqa: F401  (imported by checkpoints; loaded before the baseline)
    import torch  # noqa: F401
    import tqdm  # noqa: F401

    from preschool.data.shards import ShardWriter
    from preschool.train.trainer import train

    _warm_up()
    out = []
    for _name, preset, vocab, seq_len, batch in cases:
        root = Path(tempfile.mkdtemp(prefix="plan_memory_"))
        rng = np.random.default_rng(0)
        for split, n in (("train", batch * steps), ("val", batch)):
            with ShardWriter(root / "rand" / split, seq_len + 1, vocab) as w:
                w.add_rows(rng.integers(0, vocab, (n, seq_len + 1)))
        cfg = {"model": {"preset": preset}, "batch_size": batch, "micro_batch_size": batch, "lr": 1e-3,
               "log_every": steps, "eval_every": 0, "checkpoint_every": 10**6, "progress": False, "val_rows": 1,
               "device": "cpu", "cpu_heap": heap,
               "stages": [{"name": "pt", "data": "rand", "tokens": batch * seq_len * steps}]}
        before = _rss("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current RSS
        train(cfg, root / "run", {"rand": root / "rand"})
        out.append(_rss("VmHWM") - before)
    return out


def measure(cases: list = CASES, heap: str = "system", steps: int = 2) -> list[dict]:
    """Measured vs estimated peak for ``cases`` (step 2 is the first with AdamW moments: the
    steady-state peak). ``system``: all cases in one fresh process; ``retain``: one process per
    case (a retained heap would hand the next case its memory)."""
    from preschool.plan import memory
    from preschool.train.model import ModelConfig, describe

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if heap == "system":
        # every buffer >= 64 KiB mapped on its own and unmapped when freed, so RSS follows live tensors
        # (glibc's default threshold adapts upwards and then keeps freed tensors in a fragmented heap)
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    groups = [list(cases)] if heap == "system" else [[c] for c in cases]
    measured = []
    for group in groups:
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import plan_memory as b; "
                f"print(json.dumps(b.child({group!r}, {steps}, {heap!r})))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        measured += json.loads(out.stdout.strip().splitlines()[-1])
    rows = []
    for (name, preset, vocab, seq_len, batch), m in zip(cases, measured):
        est = memory(describe(ModelConfig(preset=preset), vocab), batch, seq_len, 1, "ddp", "none", "cpu")
        rows.append({"case": name, "cpu_heap": heap, "preset": preset, "vocab": vocab, "seq_len": seq_len,
                     "micro_batch": batch, "estimate": est.total, "measured": m, "ratio": est.total / m,
                     "estimate_parts": {k: getattr(est, k) for k in ("weights", "grads", "optimizer", "activations")}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = measure(heap="system") + measure(heap="retain")
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    import platform

    import torch

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    for r in rows:
        print(f"{r['case']:<22} cpu_heap {r['cpu_heap']:<7} {r['preset']} vocab {r['vocab']} {r['micro_batch']} x {r['seq_len']}: "
              f"estimate {r['estimate'] / 2**20:7.1f} MiB  measured peak {r['measured'] / 2**20:7.1f} MiB  "
              f"ratio {r['ratio']:.2f}")


if __name__ == "__main__":
    main()
