"""``preschool eval``: score one checkpoint or every checkpoint of a run, resumably."""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path

from ..config import apply_overrides
from ..errors import ConfigError
from ..layout import CHECKPOINTS, evals_dir
from ..lock import output_lock
from ..evals import EVALUATORS
from ..evals.runner import checkpoint_step, evaluate_checkpoint, evaluate_run, require_checkpoint_dir

HELP = "evaluate checkpoints (BLiMP minimal pairs, held-out loss, ...), cached and resumable"
ORDER = 60  # its place in `preschool --help`
DESCRIPTION = """\
Evaluate one checkpoint or the checkpoints of a run folder with one or more
registered evaluators, then print a summary table.

Results go to <run>/evals/step-XXXXXXXX/<evaluator>/summary.json (+ items.jsonl).
A (checkpoint, evaluator, version, config) already evaluated is skipped, so an
interrupted sweep resumes by rerunning the same command; --force recomputes.

Each --evaluator NAME starts an evaluator; the --set key=value and --label
options after it configure that evaluator (values are YAML; dotted keys reach
into mappings, e.g. --set sources.books=data/books/val).

examples:
  preschool eval --checkpoints runs/arm0 --blimp ../shared/data/blimp --set max_pairs_per_paradigm=100
  preschool eval --checkpoints runs/arm0 --every 1000 \\
      --evaluator minimal_pairs --set path=blimp/ --set bos=none --label blimp_nobos \\
      --evaluator heldout --set sources.books=out/data/books
  preschool eval --checkpoint runs/arm0/checkpoints/step-00002000 --blimp blimp/
  preschool eval --list
"""


class _StartEvaluator(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        evs = list(getattr(ns, "evaluators", None) or [])
        if option_string == "--blimp":
            evs.append({"name": "blimp", "sets": [f"path={json.dumps(value)}"], "label": None})
        else:
            evs.append({"name": value, "sets": [], "label": None})
        ns.evaluators = evs


class _Configure(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        evs = getattr(ns, "evaluators", None)
        if not evs:
            parser.error(f"{option_string} must follow an --evaluator (or --blimp) it applies to")
        if option_string == "--set":
            if "=" not in value:
                parser.error(f"--set expects key=value, got {value!r}")
            evs[-1]["sets"].append(value)
        else:
            evs[-1]["label"] = value


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument("--checkpoints", metavar="RUN_DIR", help="a run folder: evaluate its checkpoints/step-* folders")
    what.add_argument("--checkpoint", metavar="DIR", help="one checkpoint folder (HF save_pretrained + tokenizer)")
    what.add_argument("--list", action="store_true", help="list the registered evaluators and exit")
    p.add_argument("--every", type=int, metavar="N", help="only steps that are multiples of N (plus the last)")
    p.add_argument("--steps", metavar="S1,S2", help="only these steps (comma-separated)")
    p.add_argument("--evaluator", action=_StartEvaluator, metavar="NAME", dest="evaluators",
                   help="add an evaluator by registry name (repeatable)")
    p.add_argument("--blimp", action=_StartEvaluator, metavar="PATH", dest="evaluators",
                   help="shortcut for --evaluator blimp --set path=PATH (BLiMP .jsonl file or folder)")
    p.add_argument("--set", action=_Configure, metavar="KEY=VALUE", dest="_set",
                   help="config value for the preceding evaluator (repeatable)")
    p.add_argument("--label", action=_Configure, metavar="LABEL", dest="_label",
                   help="result folder name for the preceding evaluator (default: its name)")
    p.add_argument("--out", metavar="DIR", help="with --checkpoint: where results go "
                   "(default <run>/evals/<step-dir> inside a run folder, else <checkpoint>/evals)")
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:1, ... or auto: cuda if available, else cpu (default auto)")
    p.add_argument("--force", action="store_true", help="recompute even when cached results match")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")


def _evaluator_specs(raw: list[dict]) -> list[tuple]:
    specs = []
    for ev in raw:
        values = apply_overrides({}, ev["sets"])
        specs.append((ev["name"], values, ev["label"]) if ev["label"] else (ev["name"], values))
    return specs


def _headline(name: str, metrics: dict) -> list[tuple[str, float]]:
    patterns = getattr(EVALUATORS.get(name).cls, "headline_metrics", None) or ("*",)
    keys = []
    for pat in patterns:
        keys += [k for k in metrics if fnmatch.fnmatchcase(k, pat) and k not in keys]
    return [(k, metrics[k]) for k in keys[:8]]


def format_table(results: list[dict]) -> str:
    """One line per (checkpoint, evaluator): step, label, headline metrics, and whether it was cached."""
    lines = [f"{'step':>10}  {'evaluator':<20} {'':6}  metrics"]
    for r in results:
        step = "-" if r["step"] is None else str(r["step"])
        for label, summary in r["results"].items():
            shown = "  ".join(f"{k}={v:.4g}" for k, v in _headline(summary["evaluator"], summary["metrics"]))
            lines.append(f"{step:>10}  {label:<20} {'cached' if label in r['cached'] else '':6}  {shown}")
    return "\n".join(lines)


def _check_out(out: Path, ckpt: Path) -> None:
    """Refuse an ``--out`` that is a file system's root (``/``: results would land at ``/<label>``) or the
    checkpoint ``ckpt`` or a folder inside it other than its ``evals/`` (the default for a checkpoint outside
    a run): files added to a checkpoint are files its ``checksums.json`` does not list, so a resume from
    it refuses it."""
    o, c = out.resolve(), ckpt.resolve()
    if o.parent == o:
        raise ConfigError("--out", f"{out} is the root of the file system; give a folder for the results")
    if o == c or (o.is_relative_to(c) and not o.is_relative_to(c / "evals")):
        where = "is the checkpoint" if o == c else "is inside the checkpoint"
        raise ConfigError("--out", f"{out} {where} {ckpt}; results written there would become files of the "
                          "checkpoint that its checksums.json does not list: give a folder outside it (or leave "
                          "--out out: <run>/evals/<step>)")


def run(args: argparse.Namespace) -> int:
    if args.list:
        for e in EVALUATORS:
            print(f"{e.name:<16} v{e.cls.version:<3} {e.summary}  [{e.origin}]")
        return 0
    if not (args.checkpoints or args.checkpoint):
        raise ConfigError("--checkpoints", "give --checkpoints RUN_DIR or --checkpoint DIR (see --help)")
    if not getattr(args, "evaluators", None):
        raise ConfigError("--evaluator", "give at least one --evaluator NAME (or --blimp PATH); --list shows names")
    specs = _evaluator_specs(args.evaluators)
    if args.checkpoints:
        steps = None
        if args.steps:
            try:
                steps = [int(s) for s in args.steps.split(",") if s.strip()]
            except ValueError:
                raise ConfigError("--steps", f"expected comma-separated integers, got {args.steps!r}") from None
        results = evaluate_run(args.checkpoints, specs, every=args.every, steps=steps, device=args.device,
                               force=args.force)
    else:
        if args.every or args.steps:
            raise ConfigError("--every", "--every/--steps apply to --checkpoints RUN_DIR, not --checkpoint")
        ckpt = Path(args.checkpoint)
        if args.out:
            out = Path(args.out)
            _check_out(out, ckpt)
        elif ckpt.resolve().parent.name == CHECKPOINTS:
            step = checkpoint_step(ckpt)
            run = ckpt.resolve().parent.parent
            out = evals_dir(run, step) if step is not None else evals_dir(run) / ckpt.name
        else:
            out = ckpt / "evals"
        require_checkpoint_dir(ckpt)  # before the lock, which creates the folder it sits in
        # one writer per --out: of two evaluations writing one summary, the last would silently win
        with output_lock(out, f"preschool eval --checkpoint {ckpt} --out {out}", beside=True):
            results = [evaluate_checkpoint(ckpt, specs, out, device=args.device, force=args.force,
                                           log=lambda m: print(m, flush=True))]
    if args.json:
        print(json.dumps([{"step": r["step"], "checkpoint": r["checkpoint"], "cached": r["cached"],
                           "metrics": {k: v["metrics"] for k, v in r["results"].items()}} for r in results], indent=2))
    else:
        print(format_table(results))
    return 0
