"""``preschool generate``: write a synthetic pre-pretraining task to token shards."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import json
import re
import sys
from pathlib import Path

from ..config import check, override_value
from ..data.tokenizer import backend, eos_id, load_saved, tokenizer_size
from ..device import check_row_memory
from ..errors import ConfigError
from ..outdir import claim_output
from ..synthetic import GENERATOR_PRESETS, GENERATORS
from ..synthetic.write import SymbolEncoder, fit_generator, generated_entries, write_generator_shards

HELP = "generate synthetic pre-pretraining data (Dyck, Set, MP-Struct, NCA, Stack, Queue, DEPO, retrieval)"
ORDER = 30  # its place in `preschool --help`
DESCRIPTION = """Generate a synthetic pre-pretraining task into a token shard set.

examples:
  preschool generate --list
  preschool generate stack --preview 2
  preschool generate shuffle_dyck --tokens 10M --out data/dyck --seq-len 1024
  preschool generate --preset dyck_hu2025 --tokens 1M --out data/dyck --tokenizer run/tokenizer.json
  preschool generate depo --tokens 1M --out data/depo --set n_nodes=12 --set max_hops=6

Symbols reach the model as text (--render text: space-separated integers under the
run's --tokenizer) or as reserved ids (--render reserved: symbol s -> id
base_vocab + s, base_vocab = the tokenizer's size, or 0 without a tokenizer).
By default documents are sized so one document (+ EOS) fills one row of
--seq-len + 1 tokens exactly (--no-exact-fill keeps the task's own length and
concatenates documents instead).
"""


def _count(s: str) -> int:
    m = re.fullmatch(r"\s*([0-9_.]+)\s*([kKmMbBgG]?)\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"not a token count: {s!r} (e.g. 5000, 10M, 1.5B)")
    mult = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9}[m.group(2).lower()]
    return int(float(m.group(1).replace("_", "")) * mult)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", help="generator name (see --list); optional with --preset")
    p.add_argument("--tokens", type=_count, help="tokens to write (rounded up to whole rows), e.g. 50M")
    p.add_argument("--out", help="output shard folder (written atomically; missing, empty or an earlier "
                   "generate output, never one holding other files)")
    p.add_argument("--set", dest="params", action="append", default=[], metavar="KEY=VALUE",
                   help="generator parameter (YAML value), repeatable")
    p.add_argument("--preset", help="named parameter set (see --list)")
    p.add_argument("--seed", type=int, help="shorthand for --set seed=N")
    p.add_argument("--seq-len", type=int, default=1024,
                   help="training sequence length; rows hold seq_len+1 tokens (default 1024)")
    p.add_argument("--render", choices=["text", "reserved"],
                   help="how symbols become tokens (default: text with --tokenizer, else reserved)")
    p.add_argument("--tokenizer", help="tokenizer.json (or a folder holding one) of the run")
    p.add_argument("--reserved-offset", type=int,
                   help="reserved render: id of symbol 0 (default: the tokenizer's vocab size, or 0)")
    p.add_argument("--max-digits", type=int, default=3, help="text render digit budget per symbol (default 3)")
    p.add_argument("--no-exact-fill", action="store_true", help="keep the task's length; concatenate documents")
    p.add_argument("--workers", type=int, default=1,
                   help="generator processes (output is identical for any count; default 1)")
    p.add_argument("--list", action="store_true", help="list every task, its parameters and the presets")
    p.add_argument("--preview", type=int, metavar="N", help="print N decoded items with their metadata; write nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


@functools.lru_cache(maxsize=None)
def _class_sources(path: str) -> dict[str, str]:
    """The source of every class defined in the file ``path``, by qualified name. Each file is parsed once
    (``inspect.getsource`` parses a class's whole module on every call, once per class listed)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return {}
    lines = text.splitlines()
    out: dict[str, str] = {}

    def walk(body: list, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):  # whole lines: a last field's comment is past the node's end
                out[prefix + node.name] = "\n".join(lines[node.lineno - 1:node.end_lineno])
                walk(node.body, f"{prefix}{node.name}.")

    walk(ast.parse(text).body, "")
    return out


def _field_docs(cfg_cls) -> dict[str, str]:
    """Inline ``# comments`` of a config dataclass's fields, its bases' too (the parameter docs)."""
    docs: dict[str, str] = {}
    for klass in reversed(cfg_cls.__mro__):
        try:
            path = inspect.getsourcefile(klass)
        except TypeError:  # a built-in class (object)
            continue
        src = _class_sources(path).get(klass.__qualname__, "") if path else ""
        for m in re.finditer(r"^\s+(\w+):\s*[^=\n]+=[^#\n]*#\s*(.+)$", src, re.M):
            if not re.match(r"(type|pragma):|noqa\b", m.group(2)):  # a tool's pragma documents nothing
                docs[m.group(1)] = m.group(2).strip()
    return docs


def list_tasks(out=None) -> None:
    out = out or sys.stdout
    for e in GENERATORS:
        print(f"{e.name}: {e.summary}  [{e.origin}]", file=out)
        docs = _field_docs(e.config)
        for f in dataclasses.fields(e.config):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            tp = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
            doc = f"  # {docs[f.name]}" if f.name in docs else ""
            print(f"    {f.name} = {default!r}  ({tp}){doc}", file=out)
        for p in GENERATOR_PRESETS:
            if p.cls.generator == e.name:
                print(f"    preset {p.name}: {p.cls.description} {dict(p.cls.params)}", file=out)
        print(file=out)


def _params(args) -> tuple[str, dict, set]:
    name = args.task
    params: dict = {}
    if args.preset:
        preset = GENERATOR_PRESETS.get(args.preset, "preset").cls  # unknown: the closest names
        if name and name != preset.generator:
            raise ConfigError("preset", f"preset {args.preset!r} is for {preset.generator!r}, not {name!r}")
        name = preset.generator
        params = dict(preset.params)
    if not name:
        raise ConfigError("task", "give a task name (see preschool generate --list) or --preset")
    GENERATORS.get(name, "task")
    explicit = set()
    for kv in args.params:
        if "=" not in kv:
            raise ConfigError("set", f"expected KEY=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        params[k.strip()] = override_value(v)
        explicit.add(k.strip())
    if args.seed is not None:
        params["seed"] = args.seed
    return name, params, explicit


def _encoder(args):
    tok = load_saved(args.tokenizer) if args.tokenizer else None
    render = args.render or ("text" if tok is not None else "reserved")
    if render == "text":
        if tok is None:
            raise ConfigError("tokenizer", "--render text needs --tokenizer PATH (tokenizer.json); "
                              "without one use --render reserved")
        return SymbolEncoder.text(backend(tok), max_digits=args.max_digits), eos_id(tok), tok
    offset = args.reserved_offset
    if offset is None:
        offset = tokenizer_size(tok) if tok is not None else 0
    return SymbolEncoder("reserved", reserved_offset=offset), (eos_id(tok) if tok is not None else None), tok


def preview(gen, enc, n: int, out=None, max_symbols: int = 96) -> None:
    out = out or sys.stdout
    for i, item in zip(range(n), gen.items(0, n)):
        s = item.symbols
        shown = gen.decode(s[:max_symbols]) + (f" ... (+{len(s) - max_symbols})" if len(s) > max_symbols else "")
        print(f"--- item {i}: {len(s)} symbols", file=out)
        print(f"symbols: {' '.join(map(str, s[:max_symbols].tolist()))}"
              + (" ..." if len(s) > max_symbols else ""), file=out)
        print(f"decoded: {shown}", file=out)
        spans = item.meta.get("answer_spans")
        if spans:
            print("answers: " + " | ".join(gen.decode(s[a:b]) for a, b in spans[:8])
                  + (" ..." if len(spans) > 8 else ""), file=out)
        if item.loss_mask is not None:
            print(f"loss on: {int(item.loss_mask.sum())} of {len(s)} symbols", file=out)
        meta = {k: v for k, v in item.meta.items() if k != "answer_spans"}
        text = json.dumps(meta, default=str)
        print(f"meta: {text[:400]}{' ...' if len(text) > 400 else ''}", file=out)
        if enc is not None:
            doc = enc.encode(item)
            print(f"tokens ({enc.render}): {len(doc.ids)}", file=out)


def run(args) -> int:
    if args.list:
        list_tasks()
        return 0
    # a count below 1 printed nothing and ended 0, as if the task had no items
    check(args.preview is None or args.preview >= 1, "--preview", f"must be >= 1, got {args.preview}")
    name, params, explicit = _params(args)
    if args.preview:
        gen = GENERATORS.build(name, params)
        enc = _encoder(args)[0] if (args.tokenizer or args.render) else None
        preview(gen, enc, args.preview)
        return 0
    if args.tokens is None or args.tokens <= 0:
        raise ConfigError("tokens", "give --tokens N (> 0), e.g. --tokens 10M")
    if not args.out:
        raise ConfigError("out", "give --out DIR")
    if args.seq_len < 1:
        raise ConfigError("seq_len", f"must be >= 1, got {args.seq_len}")
    if args.workers < 1:
        raise ConfigError("workers", f"must be >= 1, got {args.workers}")

    check_row_memory(args.seq_len, args.workers, "--seq-len")

    # --out is replaced whole: refuse a folder holding anything else (or the tokenizer) before any work,
    # and keep a second writer out of it while this one runs
    with claim_output(args.out, f"preschool generate {name} --tokens {args.tokens} --out {args.out}",
                      generated_entries, "generate", inputs=[args.tokenizer]) as out:
        args.out = str(out)  # resolved once: a linked --out is written at its target
        return _write(args, name, params, explicit)


def _write(args, name: str, params: dict, explicit: set) -> int:
    enc, eos, _ = _encoder(args)
    row_len = args.seq_len + 1
    exact = not args.no_exact_fill
    if exact:
        # Exact fill chooses the length; a preset's length gives way, an explicit --set must agree.
        field = GENERATORS.get(name).cls.length_field
        if field in params and field not in explicit:
            params.pop(field)
        gen = fit_generator(name, params, enc, row_len, eos)
    else:
        gen = GENERATORS.build(name, params)
        enc.check_generator(gen)
    n_rows = -(-args.tokens // row_len)
    m = write_generator_shards(gen, enc, args.out, n_rows, row_len, enc.vocab_size(gen), eos,
                               workers=args.workers, progress=not args.quiet, exact_fill=exact,
                               manifest_extra={"requested_tokens": args.tokens})
    print(f"wrote {m['n_rows']} rows x {row_len} tokens = {m['n_tokens']} tokens of {name} "
          f"({gen.length_field}={gen.length}, render={enc.render}, vocab {m['vocab_size']}) to {args.out}")
    return 0
