"""``python -m preschool.corpora``: look at a corpus, print storybook stories, write storybook minimal pairs.

Shaped like the other subcommands (HELP, DESCRIPTION, add_arguments, run), so
it is also ``preschool corpus`` (``commands/corpus.py``).
"""

from __future__ import annotations

import argparse
import json

from ..config import apply_overrides, check, from_dict, load_yaml
from ..seeds import check_seed
from ..corpora.base import CorpusConfig, ReadStats
from ..corpora.sources import iter_documents
from ..corpora.storybook import Storybook, write_minimal_pairs

HELP = "inspect a text corpus, print storybook stories, write storybook minimal pairs"
ORDER = 90  # its place in `preschool --help`
DESCRIPTION = """\
Examples:
  python -m preschool.corpora read --set source=text --set path=../shared/data/novels \\
      --set split_documents=paragraphs --show 2
  python -m preschool.corpora stories --seed 0 --n 3
  python -m preschool.corpora pairs out/minimal_pairs --seed 0 --per-paradigm 1000

`read` streams the whole corpus (or up to max_documents) and prints its ReadStats
as JSON; --set takes any CorpusConfig field (values parsed as YAML), or --config a
YAML file holding them.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    r = sub.add_parser("read", help="read a corpus and print its statistics (and the first documents)")
    r.add_argument("--config", help="YAML file with CorpusConfig fields")
    r.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a CorpusConfig field (repeatable)")
    r.add_argument("--show", type=int, default=0,
                   help="print the first N documents (id and first 300 characters; default 0)")
    s = sub.add_parser("stories", help="print storybook stories")
    s.add_argument("--seed", type=int, default=0,
                   help="storybook seed: the same seed tells the same stories (default 0)")
    s.add_argument("--start", type=int, default=0, help="index of the first story printed (default 0)")
    s.add_argument("--n", type=int, default=5, help="number of stories printed (default 5)")
    m = sub.add_parser("pairs", help="write storybook minimal pairs (BLiMP JSONL, one file per paradigm)")
    m.add_argument("out", help="output folder")
    m.add_argument("--seed", type=int, default=0, help="storybook seed the pairs are drawn with (default 0)")
    m.add_argument("--per-paradigm", type=int, default=1000, help="pairs written per paradigm (default 1000)")

def run(args: argparse.Namespace) -> int:
    if args.action in ("stories", "pairs"):  # numpy refuses a negative seed with a traceback
        check_seed(args.seed, "--seed")
    for option in ("n", "start", "per_paradigm"):  # a negative count printed or wrote nothing and ended 0
        value = getattr(args, option, 0)
        check(value >= 0, f"--{option.replace('_', '-')}", f"must be >= 0, got {value}")
    if args.action == "stories":
        book = Storybook(seed=args.seed)
        for i in range(args.start, args.start + args.n):
            print(f"[storybook:{i}] {book.story(i)}")
        return 0
    if args.action == "pairs":
        for path in write_minimal_pairs(args.out, seed=args.seed, n_per_paradigm=args.per_paradigm,
                                        field="--per-paradigm"):
            print(path)
        return 0

    data = load_yaml(args.config) if args.config else {}
    cfg = from_dict(CorpusConfig, apply_overrides(data, args.set))
    stats = ReadStats()
    for k, doc in enumerate(iter_documents(cfg, stats)):
        if k < args.show:
            print(f"--- {doc.id} {json.dumps(doc.meta)}\n{doc.text[:300]}")
    print(json.dumps(stats.as_dict(), indent=2))
    return 0
