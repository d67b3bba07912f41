"""``preschool prepare``: build an experiment's tokenizer and shard sets without training."""

from __future__ import annotations

HELP = "build the tokenizer and token shards of an experiment YAML (no training)"
DESCRIPTION = """\
Build the data of an experiment: train (or load) the tokenizer, then write
train/val shard sets for every dataset under <out>/data. Datasets already
built with the same spec are skipped; each is written atomically. The output
folder is locked while prepare runs (<out>/.preschool.lock, shared with
`preschool run`): a second prepare or run on it stops with a message naming
this process (pid, host, start time, command). Inside it, an exclusive lock
on <out>/data/.prepare.lock serialises library callers of the prepare step.
A compartments YAML prepares its base data and every arm's compartmented sets.
Worker processes build a run YAML's datasets in work units: the bytes are the
same for any --workers, and an interrupted prepare resumes from its finished units.

example:
  preschool prepare examples/quickstart.yaml
  preschool prepare examples/quickstart.yaml --set data.pt.tokens=5000000
  preschool prepare examples/quickstart.yaml --workers 8
"""


def add_arguments(p) -> None:
    p.add_argument("config", help="experiment YAML (see examples/)")
    p.add_argument("--out", help="output folder (default: the config's `out`, else runs/<name>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value (repeatable)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes (default: the number of CPU cores; the output does not depend on it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> int:
    import os

    from ..config import load_yaml
    from ..launch import load, prepare
    from ..lock import command_line, output_lock
    from ..plan import is_compartments

    overrides = list(args.overrides) + ([f"out={args.out}"] if args.out else [])
    if not is_compartments(load_yaml(args.config)):  # compartments YAMLs build their sets their own way
        overrides.append(f"workers={args.workers or os.cpu_count() or 1}")
    exp = load(args.config, overrides)  # a `preschool run` or a `preschool compartments` YAML
    with output_lock(exp.out_dir, command_line("prepare", args.config, args.overrides, args.out)):
        manifest = prepare(exp, progress=not args.no_progress)  # under <out>/data/.prepare.lock
    cfg = exp.cfg
    if manifest is None:
        print(f"data: {cfg.out_dir} (base data and every arm's compartmented sets)")
        return 0
    for name, d in manifest["datasets"].items():
        splits = ", ".join(f"{s}: {m['n_rows']} rows x {m['row_len']}" for s, m in d["splits"].items())
        print(f"{name}: {splits}")
    print(f"tokenizer: vocab {manifest['tokenizer']['vocab_size']}, sha256 {manifest['tokenizer']['sha256'][:12]}")
    print(f"data: {cfg.out_dir / 'data'}")
    return 0
