"""``preschool plan``: what an experiment costs before anything runs (the planner: preschool/plan.py), or,
with ``--seeds``, how many seeds a pilot's comparisons need."""

from __future__ import annotations

from ..config import load_yaml
from ..errors import ConfigError
from ..plan import (config_targets, cpu_hardware, data_repeats, format_ladder_plan, format_plan, gpu_hardware,
                    ladder_targets, plan_arm)
from ..train.flops import GPUS

HELP = "estimate an experiment's parameters, FLOPs, memory per GPU, wall-time and GPU-hours"
ORDER = 100  # its place in `preschool --help`
DESCRIPTION = """\
Plan an experiment before running it: per arm and stage, parameters, tokens,
training FLOPs (6 N + attention), memory per device for DDP and FSDP with and
without activation checkpointing, the largest micro-batch that fits, and
wall-time / GPU-hours at an assumed MFU. Arithmetic only (no model is built).
Formulas: docs/scale.md.

example:
  preschool plan examples/paper/verify_ppt_1b.yaml --gpus 16 --gpu a100-40gb
  preschool plan examples/quickstart.yaml --cpu
  preschool plan examples/ladder_dyck.yaml --cpu --mfu 0.1        # a ladder: cost per rung and in total
  preschool plan --seeds docs/results/ppt_retrieval/results.json  # how many seeds would settle each comparison
"""


def add_arguments(p) -> None:
    p.add_argument("config", nargs="?", help="experiment YAML (see examples/); not with --seeds")
    p.add_argument("--seeds", metavar="RESULTS_JSON",
                   help="instead of a cost plan: from a pilot's results.json, per comparison and rung the seed SD, "
                        "the effect and the seeds its 95 %% interval needs to exclude 0 (or to show equivalence) "
                        "with 80 %% probability (docs/statistics.md; default: off)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value (repeatable)")
    p.add_argument("--gpus", type=int, default=8, help="number of GPUs (default 8)")
    # no argparse choices: a plug-in named by --plugins or the YAML's `plugins:` (loaded after parsing) may
    # add a row; an unknown name is a one-line error when the plan is made
    p.add_argument("--gpu", default="a100-80gb", metavar="NAME",
                   help=f"GPU model: a row of train/gpus/ or a plug-in's (built in: {', '.join(GPUS.names())}; "
                   "default a100-80gb)")
    p.add_argument("--mfu", type=float, default=0.35,
                   help="assumed model-FLOPs utilisation (default 0.35: the paper's 3B run, which recomputed "
                        "activations)")
    p.add_argument("--mfu-without-recompute", action="store_true",
                   help="the --mfu was measured on a run without activation recompute (default: with it)")
    p.add_argument("--cpu", action="store_true", help="plan for this machine: RAM and a matmul rate measured now")
    p.add_argument("--rung", help="a ladder's rung: plan it alone, with memory per mode (same as --set rung=NAME)")


def run(args) -> int:
    if getattr(args, "seeds", None):
        if args.config or args.overrides:
            raise ConfigError("--seeds", "plans from the stored config of RESULTS_JSON alone: give no CONFIG or --set")
        from ..rerender import stored_seed_plan

        print("\n".join(stored_seed_plan(args.seeds)))
        return 0
    if not args.config:
        raise ConfigError("config", "give the experiment YAML (or --seeds RESULTS_JSON)")
    if not 0 < args.mfu <= 1:
        raise ConfigError("--mfu", f"must be in (0, 1], got {args.mfu}")
    if args.gpus < 1:
        raise ConfigError("--gpus", f"must be >= 1, got {args.gpus}")
    from ..experiment import load_experiment

    overrides = list(args.overrides) + ([f"rung={args.rung}"] if getattr(args, "rung", None) else [])
    exp = load_experiment(args.config, overrides)
    cfg = exp.cfg
    tokenizer = load_yaml(args.config).get("tokenizer") or {}
    hw = cpu_hardware() if args.cpu else gpu_hardware(args.gpu, args.gpus)
    recomputed = not args.mfu_without_recompute
    if cfg.ladder is not None and cfg.rung is None:
        rungs = ladder_targets(exp, tokenizer)
        plans = [[plan_arm(a, hw, args.mfu, recomputed) for a in arms] for _, arms in rungs]
        notes = {rung: n for rung in exp.rungs if (n := data_repeats(exp, rung))}
        print(format_ladder_plan(cfg.name, rungs, plans, hw, args.mfu, notes))
        return 0
    arms = config_targets(exp, cfg.rung, tokenizer)
    plans = [plan_arm(a, hw, args.mfu, recomputed) for a in arms]
    print(format_plan(cfg.name + (f" (rung {cfg.rung})" if cfg.rung else ""), arms, plans, hw, args.mfu, recomputed))
    return 0
