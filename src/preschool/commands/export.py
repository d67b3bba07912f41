"""``preschool export``: write a prepared dataset in another trainer's token format."""

from __future__ import annotations

HELP = "export a prepared dataset for Nanotron, Megatron, OLMo-core or HF datasets"
ORDER = 20  # its place in `preschool --help`
DESCRIPTION = """\
Write the train/val shard sets of a prepared dataset (<run>/data/<name>, or one
shard set folder) in another trainer's format, row for row:

  hf        datasets.save_to_disk folder (input_ids, loss_mask)
  megatron  Megatron MMapIndexedDataset <split>/text_document.bin/.idx, one
            document of ours per sequence, each delimited by the separator
            id (--eod-id): at its end (EOS data) or its start (BOS data)
  nanotron  datatrove tokenized files <split>/NNNNN.ds(.index/.loss/.metadata)
  numpy     flat uint16/uint32 token files as OLMo-core memory-maps them,
            <split>/part-NNNNN.npy; masks and document ends in label_mask/
            and doc_ends/ beside them

Whether documents end with EOS or open with BOS is read from the rows;
export.json and the export's README say which, the reader call, what the
reader must be given and which of its settings break it.

A loss mask (Dyck, L2T answers) is read by the hf and numpy readers (datasets,
OLMo-core's label_mask_paths); Megatron's GPTDataset and datatrove's reader
(Nanotron) ignore it, so a masked set is refused for them unless
--allow-unread-loss-mask (preschool.data.datatrove_reader yields .ds.loss).

--out is replaced whole, so it must be missing, an empty folder or an earlier
export holding nothing else, and may not overlap the dataset; it is locked
while the export runs. A temp folder a killed export left beside it is removed.

example:
  preschool export runs/quickstart/data/pt --format nanotron --out exports/pt-nanotron
"""


def add_arguments(p) -> None:
    from ..data.export import EXPORTERS

    p.add_argument("dataset", help="prepared dataset folder (with train/ and val/) or one shard set")
    p.add_argument("--format", required=True, help=f"one of: {', '.join(EXPORTERS.names())}")
    p.add_argument("--out", required=True, help="output folder (written atomically; missing, empty or an "
                   "earlier export, never one holding other files or the dataset)")
    p.add_argument("--split", dest="splits", action="append", default=None, metavar="NAME",
                   help="export only this split (repeatable; default: all)")
    p.add_argument("--verify", choices=["full", "size"], default="full",
                   help="check the shards' checksums (full) or only their sizes (size) before exporting (default full)")
    p.add_argument("--allow-unread-loss-mask", action="store_true",
                   help="export a loss-masked set as megatron or nanotron although their trainers' readers "
                   "ignore the mask (it is written beside the tokens; see export.json's loss_mask)")
    p.add_argument("--eod-id", type=int, default=None, metavar="ID",
                   help="megatron: the id that delimits each document (the rows' separator: added where our "
                   "rows cut one); default the tokenizer's EOS, or its BOS for BOS-separated rows; needed "
                   "when there is no tokenizer beside the dataset")


def run(args) -> int:
    from ..data.export import export_dataset

    info = export_dataset(args.dataset, args.format, args.out, args.splits, verify=args.verify,
                         allow_unread_loss_mask=args.allow_unread_loss_mask, eod_id=args.eod_id)
    for s, m in info["splits"].items():
        print(f"{s}: {m['n_rows']} rows x {m['row_len']} tokens ({m['dtype']})")
    print(f"{info['format']} export: {args.out}  (read with: {info['read']})")
    lm = info.get("loss_mask")
    if lm and not lm["read"]:
        import sys

        print(f"warning: the loss mask is written but NOT read by {lm['by']}", file=sys.stderr)
    return 0
