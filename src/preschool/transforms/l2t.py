"""``preschool transform l2t``: a corpus -> L2T (+ raw) train/val shard sets."""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from ..config import check, from_dict, to_dict
from ..corpora import ReadStats
from ..data.tokenizer import TokenizerConfig, backend, iter_sample, load_saved, tokenizer_size, train_bpe
from ..device import check_row_memory
from ..errors import ConfigError
from ..outdir import claim_output
from ..l2t.write import BuildConfig, build_l2t, l2t_entries
from ..l2t.inputs import corpus_config, iter_texts
from ..l2t.text import chars_per_token, corpus_pool
from ..l2t.transform import L2TTransform

HELP = "language-learning-task (L2T) data from a corpus (Yamaguchi et al. 2026)"
DESCRIPTION = """\
Turn documents into L2T training data mixed with raw text, as in Yamaguchi, Mi &
Aletras (ACL 2026): one of 14 tasks per document, applied to every ~chunk of it,
formatted as "prompt\\n\\n<prefix> completion", packed into rows, mixed with raw
text (disjoint or shared) and written as train/ and val/ shard sets.

examples:
  preschool transform l2t --input ../shared/data/novels --out data/l2t --preview 2
  preschool transform l2t --input corpus.jsonl --out data/l2t --scenario shared --workers 2
  preschool transform l2t --input corpus/ --out data/one --tasks half --raw-ratio 0
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help=".txt file (one document), .jsonl (text field), .parquet, a folder "
                   "of them (each file read by its kind), a corpus .yaml (preschool.corpora CorpusConfig) or 'storybook'")
    p.add_argument("--out", help="output folder (train/, val/, tokenizer/, manifest.json, stats.json); replaced "
                   "whole, so missing, empty or an earlier transform l2t output, never one holding other files "
                   "or the input")
    p.add_argument("--tasks", nargs="+", help="tasks to draw from (default: all 14); comma or space separated")
    p.add_argument("--scenario", choices=["disjoint", "shared"], default="disjoint",
                   help="disjoint: each document becomes raw text or L2T samples, never both; shared: every "
                   "document is used twice, as raw text and as L2T samples (default disjoint)")
    p.add_argument("--raw-ratio", type=float, default=0.5,
                   help="disjoint: raw share (0 = L2T only, 1 = raw only; default 0.5)")
    p.add_argument("--ratio-by", choices=["documents", "tokens"], default="documents",
                   help="disjoint: what --raw-ratio is a share of: documents (each drawn independently, the "
                   "paper's rule) or output tokens (default documents)")
    p.add_argument("--curriculum", nargs=2, type=float, metavar=("START", "END"),
                   help="order rows so the L2T share goes linearly from START to END (default: rows shuffled)")
    p.add_argument("--packer", choices=["greedy", "concat"], default="greedy",
                   help="how L2T samples fill rows: greedy (the reference's: longest first into the least-filled "
                   "row, padded, none split) or concat (in order, cut every row); raw text is always concat "
                   "(default greedy)")
    p.add_argument("--loss", choices=["all", "answer"], default="all",
                   help="loss on all tokens (the reference) or on the answers only (default all)")
    p.add_argument("--no-loss-on-padding", action="store_true", help="reference trains on padding; this turns it off")
    p.add_argument("--seq-len", type=int, default=2048,
                   help="training sequence length; rows hold seq_len+1 tokens (default 2048)")
    p.add_argument("--chunk-tokens", type=int, help="chunk target (default seq_len // 4: 512 at 2048, as the reference)")
    p.add_argument("--count-tokens", choices=["chars", "estimate", "tokenizer"], default="chars",
                   help="how chunk sizes are counted: chars / (chars per token of the run's tokenizer, measured on "
                        "the input), 4/3 x words (a GPT-2-class count), or the run's tokenizer itself "
                        "(default chars)")
    p.add_argument("--splitter", choices=["blingfire", "rules"], default="blingfire",
                   help="sentence splitter: Bling Fire (the reference's) or preschool's rule-based one, which "
                   "needs no extra package (default blingfire)")
    p.add_argument("--word-pool", choices=["gcide", "web2", "corpus"], default="gcide",
                   help="words the tasks draw replacements from: GCIDE or web2 headwords (the english-words "
                   "package) or the input's own vocabulary (default gcide)")
    p.add_argument("--min-words", type=int, default=20,
                   help="chunks with fewer words are skipped (default 20)")
    p.add_argument("--val-fraction", type=float, default=0.01,
                   help="share of documents held out for val/, picked by a hash of each document's id and "
                   "--seed (default 0.01; a small input may get none: its val/ is then empty, and said so)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of each document's task and its draws, its val/train split, its raw/L2T routing "
                   "and the greedy packer's row shuffle (the mixed rows keep the reference's order seed, 21; "
                   "default 0)")
    p.add_argument("--workers", type=int, default=1,
                   help="processes transforming documents (the output is identical for any count; default 1)")
    p.add_argument("--train-tokens", type=int, default=0,
                   help="cap on train tokens (rows x row_len; default 0 = all)")
    p.add_argument("--val-tokens", type=int, default=0, help="cap on val tokens (default 0 = all)")
    p.add_argument("--max-documents", type=int, default=0,
                   help="stop after this many documents (default 0 = all)")
    p.add_argument("--tokenizer", help="tokenizer.json (or folder) to use; default: train a BPE on the input")
    p.add_argument("--vocab-size", type=int, default=2048,
                   help="vocabulary of the trained tokenizer (default 2048)")
    p.add_argument("--tokenizer-documents", type=int, default=20000,
                   help="documents read to train the tokenizer (default 20,000)")
    p.add_argument("--text-field", default="text", help="JSONL field holding the text (default text)")
    p.add_argument("--preview", type=int, metavar="N", help="print N formatted samples per task and exit")


def _tasks(raw: list[str] | None) -> list[str] | None:
    if not raw:
        return None
    return [t for item in raw for t in item.split(",") if t]


def build_config(args: argparse.Namespace, chars_per_token: float = 4.0):
    l2t = {"seed": args.seed, "min_num_words": args.min_words, "splitter": args.splitter,
           "word_pool": args.word_pool, "count_tokens": args.count_tokens, "chars_per_token": chars_per_token,
           "chunk_tokens": args.chunk_tokens or max(1, args.seq_len // 4)}
    if _tasks(args.tasks):
        l2t["tasks"] = _tasks(args.tasks)
    return from_dict(BuildConfig, {
        "l2t": l2t, "scenario": args.scenario, "raw_ratio": args.raw_ratio, "ratio_by": args.ratio_by,
        "curriculum": list(args.curriculum or []), "packer": args.packer, "seq_len": args.seq_len,
        "loss": args.loss, "loss_on_padding": not args.no_loss_on_padding, "val_fraction": args.val_fraction,
        "train_tokens": args.train_tokens, "val_tokens": args.val_tokens,
    })


def _texts(args):
    return (t for _, t in iter_texts(args.input, args.text_field, args.max_documents or None))


def _docs(args, stats):
    return iter_texts(args.input, args.text_field, args.max_documents or None, stats)


def preview(cfg, args, out=None) -> int:
    """Print ``args.preview`` samples per task (each task forced on the first documents)."""
    out = out or sys.stdout

    docs = list(itertools.islice(_texts(args), 200))
    pool = corpus_pool(docs) if cfg.l2t.word_pool == "corpus" else None
    for name in cfg.l2t.tasks:
        tf = L2TTransform({**_plain(cfg.l2t), "tasks": [name]}, pool=pool)
        got, prev = [], None
        for i, text in enumerate(docs):
            got += tf(i, text, prev).samples
            prev = text
            if len(got) >= args.preview:
                break
        print(f"===== {name} ({len(got[:args.preview])} samples) =====", file=out)
        for s in got[:args.preview]:
            print(s.text, file=out)
            print("-----", file=out)
    return 0


def _plain(cfg):
    return to_dict(cfg)


def run(args: argparse.Namespace) -> int:
    check(args.preview is None or args.preview >= 1, "--preview", f"must be >= 1, got {args.preview}")
    cfg = build_config(args)  # validates before any slow work
    if args.preview:
        return preview(cfg, args)
    if not args.out:
        raise ConfigError("out", "--out is required (unless --preview)")
    if args.workers < 1:
        raise ConfigError("workers", f"must be >= 1, got {args.workers}")
    if not args.tokenizer:  # the BPE trained here: TokenizerConfig's bounds (a byte-level BPE holds 256 bytes + EOS)
        try:
            from_dict(TokenizerConfig, {"kind": "train", "vocab_size": args.vocab_size})
        except ConfigError as e:
            raise ConfigError("--vocab-size", e.message) from None

    check_row_memory(args.seq_len, args.workers, "--seq-len")

    # what is read: --input, the files a corpus YAML names, the tokenizer
    read = [args.input, getattr(corpus_config(args.input, args.text_field, args.max_documents or None), "path", None),
            args.tokenizer]
    # --out is replaced whole: refuse a folder that holds anything else (or an input) before any slow work,
    # and keep a second transform out of it while this one runs
    with claim_output(args.out, f"preschool transform l2t --input {args.input} --out {args.out}", l2t_entries,
                      "transform l2t", inputs=read) as out:
        args.out = str(out)  # resolved once: a linked --out is written at its target
        return _build(args, cfg)


def _build(args: argparse.Namespace, cfg) -> int:
    pool = None
    if args.tokenizer:
        tok = load_saved(args.tokenizer)  # a folder with HF files: its own BOS/PAD
        source_tok = {"kind": "load", "path": str(args.tokenizer)}
    else:
        tok = train_bpe(iter_sample(_texts(args), args.tokenizer_documents), args.vocab_size)
        # "vocab_size" as asked; "size" what the BPE reached (fewer when the sample has too few merges)
        source_tok = {"kind": "train", "vocab_size": args.vocab_size, "size": tokenizer_size(tok),
                      "documents": args.tokenizer_documents}
    cpt = chars_per_token(backend(tok), _texts(args))
    cfg = build_config(args, cpt)
    if cfg.l2t.word_pool == "corpus":
        pool = corpus_pool(iter_sample(_texts(args), args.tokenizer_documents))
    read = ReadStats()
    m = build_l2t(_docs(args, read), args.out, cfg, tok, workers=args.workers, pool=pool,
                  source={"input": str(Path(args.input)), "tokenizer": source_tok}, progress=sys.stderr.isatty(),
                  read_stats=read)
    for split, s in m["splits"].items():
        print(f"{split}: {s['n_rows']} rows ({s['l2t_rows']} L2T, {s['raw_rows']} raw)")
    print(f"read {read.files} files; reader drops: {read.summary()}")
    print(f"wrote {args.out} from {m['documents']} documents; drop reasons in {Path(args.out) / 'stats.json'}")
    return 0
