"""nanotron: datatrove tokenized files, what Nanotron reads (see data/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..export import EXPORTERS, Exporter, document_ends, shard_blocks
from ..shards import ShardSet


@EXPORTERS.register("nanotron")
class NanotronExporter(Exporter):
    """datatrove tokenized files (``.ds`` + ``.ds.index`` [+ ``.ds.loss``] + ``.ds.metadata``) for
    datatrove's reader (and Nanotron's Nanoset, see docs/corpora.md for the versions that meet)."""

    read_hint = "datatrove.utils.dataset.DatatroveFolderDataset('OUT/<split>', seq_len=SEQ_LEN, token_size=TOKEN_SIZE)"
    mask_read = False
    mask_reader = ("datatrove's DatatroveFolderDataset, the reader Nanotron's Nanoset is written for "
                   "(.ds.loss is written; preschool.data.datatrove_reader.MaskedDatatroveFolderDataset "
                   "yields it as loss_mask)")

    def __init__(self, tokenizer_name: str = "unknown"):
        self.tokenizer_name = tokenizer_name

    def write(self, ss: ShardSet, out: Path) -> dict[str, Any]:
        out.mkdir(parents=True, exist_ok=True)
        token_size = ss.dtype.itemsize  # 2 (uint16) or 4 (uint32), datatrove's two token sizes
        cols = ["tokens"] + [a for a in ("loss_mask", "segments") if a in ss.array_names]
        names, handles, written, ends = [], {}, 0, []
        shard = -1

        def close() -> None:
            if shard < 0:
                return
            for fh in handles.values():
                fh.close()
            base = out / f"{shard:05d}.ds"
            base.with_name(base.name + ".index").write_bytes(np.concatenate(ends).astype("<u8").tobytes()
                                                             if ends else b"")
            base.with_name(base.name + ".metadata").write_text(
                f"{self.tokenizer_name}|{token_size}\n{written}\n{written} tokens", encoding="utf-8")

        for k, offset, block in shard_blocks(ss, cols):
            if k != shard:  # one datatrove file per shard file, in order (datatrove lists them sorted)
                close()
                shard, ends = k, []
                base = out / f"{shard:05d}.ds"
                names.append(base.name)
                handles = {"tokens": open(base, "wb")}
                if ss.has_loss_mask:
                    handles["loss_mask"] = open(base.with_name(base.name + ".loss"), "wb")
            toks = block["tokens"]
            handles["tokens"].write(toks.astype(f"<u{token_size}").tobytes())
            if ss.has_loss_mask:
                handles["loss_mask"].write(block["loss_mask"].astype(np.bool_).tobytes())
            ends.append(document_ends(block.get("segments"), len(toks), ss.row_len, start=offset))
            written = offset + toks.size
        close()
        return {"files": names, "token_size": token_size, "seq_len": ss.row_len - 1}

    def reader(self, info: dict[str, Any]) -> dict[str, Any]:
        first = next(iter(info["splits"].values()))
        sep = self.documents["separator_id"]
        why = ("restarts positions after every occurrence of that id instead of reading .ds.index"
               + (f": every document here opens with id {sep}, so its first token would restart, not the BOS"
                  if self.documents["separator"] == "bos" else
                  ", which is right only while every document ends with the id and no padding is made of it"))
        return {
            "call": f"datatrove.utils.dataset.DatatroveFolderDataset('OUT/<split>', seq_len={first['seq_len']}, "
                    f"token_size={first['token_size']}, return_positions=True)",
            "settings": {"seq_len": first["seq_len"], "token_size": first["token_size"], "return_positions": True},
            "never": {"positions_from_eos_token_id": why},
            "boundaries": ("Positions come from .ds.index, which holds our document ends: they restart exactly where "
                           "our documents start, whatever the separator (checked with datatrove 0.10.1). Nanotron's "
                           "own Nanoset cannot build this reader with a released datatrove (see docs/corpora.md)."),
        }
