"""``preschool train CONFIG.yaml --out DIR [--set key=value ...]``: train (or resume) one run."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

HELP = "train a model through its stages (PPT -> PT, mixtures, inserted stages); resumes if interrupted"
ORDER = 50  # its place in `preschool --help`
DESCRIPTION = """\
Train a decoder LM through the stages of a YAML config and write a run folder
(config.yaml, metrics.jsonl, checkpoints/step-XXXXXXXX/, DONE).

The YAML holds three keys:

  train:       TrainConfig fields (model, stages, batch_size, lr, ...; see docs/training.md)
  datasets:    name -> folder holding train/ (and val/) shard sets
  tokenizer:   folder with tokenizer.json (copied into every checkpoint; optional)

Relative paths (datasets, tokenizer, init_from.path) resolve against the folder the command runs in, as in an experiment
(so a run's own config.yaml, which records them so, drives a rerun from there).

Example:

  train:
    model: {preset: tiny-1m}
    batch_size: 32
    stages:
      - {name: ppt, data: dyck, tokens: 2_000_000, schedule: {name: wsd, warmup: 0.1}}
      - {name: pt, data: {novels: 0.9, dyck: 0.1}, tokens: 20_000_000, schedule: {warmup: 0.05}}
  datasets: {dyck: data/dyck, novels: data/novels}
  tokenizer: data/tokenizer

--set overrides any value: --set train.lr=3e-4 --set train.stages.1.tokens=1e7
(a key not starting with train./datasets./tokenizer is taken as under train.).
Running the same command again resumes from the last checkpoint (the config
must match); a finished run (DONE present) returns at once. The run folder is
locked while training (<out>/.preschool.lock): a second train of the same config
waits for the first and then resumes; one of another config stops, naming it. Under torchrun
(torchrun --nproc_per_node N -m preschool.cli train ...) it trains with DDP.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="YAML file with train:, datasets: and tokenizer:")
    p.add_argument("--out", required=True, help="run folder (created; resumed if it holds a run)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value (repeatable), e.g. train.lr=1e-3")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (same as --set train.progress=false)")


def load_run_config(path: str | Path, overrides: list[str] = ()) -> tuple:
    """(TrainConfig, datasets {name: Path}, tokenizer Path|None) from a train YAML plus overrides."""
    from ..config import apply_overrides, from_dict, load_yaml
    from ..errors import ConfigError
    from ..train.trainer import TrainConfig

    path = Path(path)
    data = load_yaml(path)
    ovs = [o if o.split("=", 1)[0].split(".")[0] in ("train", "datasets", "tokenizer") else f"train.{o}"
           for o in overrides]
    data = apply_overrides(data, ovs)
    data.pop("data_sha256", None)  # recorded in a run's config.yaml (what it trained on), not an input
    data.pop("callbacks", None)  # the same: an experiment arm's callbacks, which `train` does not build
    unknown = [k for k in data if k not in ("train", "datasets", "tokenizer")]
    if unknown:
        raise ConfigError(unknown[0], "unknown top-level key (expected train, datasets, tokenizer)")
    if "train" not in data:
        raise ConfigError("train", "missing: the TrainConfig fields go under train:")
    cfg = from_dict(TrainConfig, data["train"], "train")

    def resolve(p: str) -> Path:  # relative: the working folder's, as every path a command is given
        return Path(os.path.expanduser(str(p))).resolve()

    datasets = data.get("datasets") or {}
    if not isinstance(datasets, dict):
        raise ConfigError("datasets", "must map dataset name -> folder")
    ds = {str(k): resolve(v) for k, v in datasets.items()}
    tok = resolve(data["tokenizer"]) if data.get("tokenizer") else None
    return with_start_paths(cfg, resolve), ds, tok


def with_start_paths(cfg, resolve):
    """``cfg`` with every ``init_from.path`` (the run's, the stages') passed through ``resolve``."""
    from dataclasses import replace

    def fix(init):
        return init if init is None or init.path is None else replace(init, path=str(resolve(init.path)))

    return replace(cfg, init_from=fix(cfg.init_from), stages=[replace(s, init_from=fix(s.init_from))
                                                               for s in cfg.stages])


def run(args: argparse.Namespace) -> int:
    from ..train.trainer import train

    ovs = list(args.overrides) + (["train.progress=false"] if args.no_progress else [])
    cfg, ds, tok = load_run_config(args.config, ovs)
    if int(os.environ.get("RANK", "0")) == 0:
        from ..lock import config_key, output_lock

        # one trainer per run folder: a second `train` of the same config waits, then resumes (or finds the run
        # done); one of another config stops, naming this one. Under torchrun rank 0 holds it for the job.
        key = config_key({"train": cfg, "datasets": {k: str(v) for k, v in ds.items()}, "tokenizer": str(tok)})
        with output_lock(args.out, f"preschool train {args.config} --out {args.out}", key=key):
            summary = train(cfg, args.out, ds, tok)
    else:
        summary = train(cfg, args.out, ds, tok)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(summary, indent=2))
    return 0
