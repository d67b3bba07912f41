"""How far FSDP, DDP and one process drift apart in fp32: the spread behind tests/train/test_fsdp.py's tolerances.

The three modes train on the same rows with the same learning rates; what differs is the order of
floating-point sums: under FSDP gradients are reduce-scattered after every micro-batch and summed
into the shard, under DDP each rank sums its micro-batches and the ranks' sums are all-reduced once
per step, one process sums every micro-batch in turn; the gradient norm is summed per shard and then
over ranks under FSDP. Each such sum differs in its last bits, and most of the time the runs agree
to about one fp32 epsilon of the loss per step. But AdamW divides every update by the gradient's
RMS, so an element whose gradient is a cancellation (mathematically zero or nearly so, such as the
bias of a key projection: softmax ignores a shift shared by every key) takes a step of up to the
learning rate in a direction set by rounding, and the runs part by a jump, not a drift.

This trains each slow-run configuration of tests/train/test_fsdp.py under 2-rank FSDP, 2-rank DDP
(one torchrun job) and one process, for ``--seeds`` seeds (the model's initialisation and the data
order), and prints, per configuration and pair of modes, over all seeds and steps: the largest
difference of the train loss (absolute, and relative to the loss), the largest relative difference
of the first step's loss (same weights: only the forward's sums differ), the largest relative loss
difference of a later step per unit of the learning rate summed over the updates before it, and the
largest difference of the final weights, absolute and per unit of the run's summed learning rate:
what tests/train/conftest.py's ``RoundingTolerance`` is built on. InfoNCE draws its pairs per rank, so
its 2-rank runs optimise another objective than one process: those pairs are not rounding and are
not printed.

    PYTHONPATH=src python benchmarks/parallel_spread.py               # seeds 0..5
    PYTHONPATH=src python benchmarks/parallel_spread.py --seeds 12
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "train"))

from conftest import _micro_cfg, _torchrun, _write_dataset  # noqa: E402  the tests' own data and configs
from test_fsdp import _compartment_data, final_weights, run_jobs, slow_configs, train_rows  # noqa: E402

PAIRS = (("fsdp", "ddp"), ("fsdp", "single"), ("ddp", "single"))
MODES_PER_CONFIG = (PAIRS, PAIRS[:1], PAIRS[:1])  # InfoNCE: one process is another objective


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=6, help="seeds 0..N-1 per configuration (default 6)")
    args = ap.parse_args()
    from preschool.train.trainer import train

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ds = {"text": str(_write_dataset(tmp / "data", "text", stride=1, seed=1)),
              "synth": str(_write_dataset(tmp / "data", "synth", stride=3, seed=2, mask=True, segments=True))}
        cds = _compartment_data(tmp / "cdata")
        cfg, ccfg, batch_spans, shard_spans = slow_configs(_micro_cfg, tmp / "cdata")
        configs = {"stages (lr 3e-3, 12 steps)": (cfg, ds, None),
                   "infonce batch spans (lr 1e-2, 10 steps)": (ccfg, cds, batch_spans),
                   "infonce shard spans (lr 1e-2, 10 steps)": (ccfg, cds, shard_spans)}
        jobs = []
        for i, (cfg_, data, comp) in enumerate(configs.values()):
            for seed in range(args.seeds):
                for mode in ("fsdp", "ddp"):
                    jobs.append({"cfg": {**cfg_, "seed": seed, "parallel": mode},
                                 "out": str(tmp / f"{i}-{seed}-{mode}"), "datasets": data,
                                 **({"compartments": comp} if comp else {})})
        proc = run_jobs(_torchrun, tmp, "jobs", jobs)
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        for i, (name, (cfg_, data, comp)) in enumerate(configs.items()):
            pairs = MODES_PER_CONFIG[i]
            # |d loss|, relative, relative at step 1, relative / lr summed before, |d weight|, |d weight| / lr sum
            worst = {p: [0.0] * 6 for p in pairs}
            for seed in range(args.seeds):
                run = lambda mode: tmp / f"{i}-{seed}-{mode}"  # noqa: E731
                if len(pairs) > 1:
                    train({**cfg_, "seed": seed}, run("single"), data)
                for a, b in pairs:
                    w = worst[(a, b)]
                    lr_sum = 0.0  # over the updates before the step whose loss is compared
                    for x, y in zip(train_rows(run(a)), train_rows(run(b))):
                        rel = abs(x["loss"] - y["loss"]) / y["loss"]
                        w[0], w[1] = max(w[0], abs(x["loss"] - y["loss"])), max(w[1], rel)
                        if lr_sum == 0:
                            w[2] = max(w[2], rel)
                        else:
                            w[3] = max(w[3], rel / lr_sum)
                        lr_sum += y["lr"]
                    wa, wb = final_weights(run(a)), final_weights(run(b))
                    dw = max(float((wa[k] - wb[k]).abs().max()) for k in wa)
                    w[4], w[5] = max(w[4], dw), max(w[5], dw / lr_sum)
            for (a, b), (dl, rl, r1, rpl, dw, dwpl) in worst.items():
                print(f"{name}, {a} vs {b}, {args.seeds} seeds: loss: max |d| {dl:.3g}, relative {rl:.3g}, "
                      f"relative at step 1 {r1:.3g}, relative per unit summed lr {rpl:.3g}; weights: max |d| "
                      f"{dw:.3g}, per unit summed lr {dwpl:.3g}", flush=True)


if __name__ == "__main__":
    main()
