"""nanotron: datatrove tokenized files, what Nanotron reads (see data/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..export import EXPORTERS, Exporter, document_ends, iter_blocks
from ..shards import ShardSet


@EXPORTERS.register("nanotron")
class NanotronExporter(Exporter):
    """datatrove tokenized files (``.ds`` + ``.ds.index`` [+ ``.ds.loss``] + ``.ds.metadata``) for Nanotron."""

    read_hint = "datatrove.utils.dataset.DatatroveFolderDataset('OUT/<split>', seq_len=SEQ_LEN, token_size=TOKEN_SIZE)"
    mask_read = False
    mask_reader = ("datatrove's DatatroveFolderDataset, which Nanotron reads (.ds.loss is written; "
                   "preschool.data.datatrove_reader.MaskedDatatroveFolderDataset yields it as loss_mask)")

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

        for k, block in iter_blocks(ss, cols):
            if k != shard:  # one datatrove file per shard file, in order (datatrove lists them sorted)
                close()
                shard, written, ends = k, 0, []
                base = out / f"{shard:05d}.ds"
                names.append(base.name)
                handles = {"tokens": open(base, "wb")}
                if ss.has_loss_mask:
                    handles["loss_mask"] = open(base.with_name(base.name + ".loss"), "wb")
            toks = block["tokens"]
            handles["tokens"].write(toks.astype(f"<u{token_size}").tobytes())
            if ss.has_loss_mask:
                handles["loss_mask"].write(block["loss_mask"].astype(np.bool_).tobytes())
            ends.append(document_ends(block.get("segments"), len(toks), ss.row_len, start=written))
            written += toks.size
        close()
        return {"files": names, "token_size": token_size, "seq_len": ss.row_len - 1}
