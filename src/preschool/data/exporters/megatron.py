"""megatron: Megatron MMapIndexedDataset ``.bin/.idx``, one sequence per document (see data/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..export import EXPORTERS, Exporter, document_ends, iter_blocks, write_megatron_index
from ..shards import ShardSet


@EXPORTERS.register("megatron")
class MegatronExporter(Exporter):
    """Megatron MMapIndexedDataset ``.bin/.idx``: one sequence (and document) per document of ours,
    each ending with the EOD token ``eod_id``.

    Megatron's GPT dataset treats each *sequence* of the index as a document
    (``GPTDataset.numel_low_level_dataset`` counts sequences): it shuffles them
    and cuts its own windows across them. So a sequence here is one of our
    documents, a run of one segment number inside a row (:func:`document_ends`),
    not a whole row. Inside a window it tells documents apart only by EOD, so a
    document whose last token is not ``eod_id`` (cut at a row end, or a padded
    row) is written with ``eod_id`` appended (its loss mask repeats the
    document's last value, as our packer's EOS does); the ``.bin`` is otherwise
    the rows' token stream unchanged.
    """

    read_hint = "megatron.core.datasets.indexed_dataset.IndexedDataset('OUT/<split>/text_document')"
    mask_read = False
    mask_reader = ("Megatron-core's GPTDataset (its loss_mask marks EOD/pad tokens only; loss_mask_document "
                   "is written for a dataset class of your own)")

    def __init__(self, eod_id: int):
        self.eod_id = eod_id

    def write(self, ss: ShardSet, out: Path) -> dict[str, Any]:
        out.mkdir(parents=True, exist_ok=True)
        # Megatron has no uint32 code: larger vocabularies go to int32 (ids < 2^31).
        tok_dtype = np.dtype(np.uint16) if ss.dtype == np.uint16 else np.dtype(np.int32)
        kinds = {"tokens": ("text_document", tok_dtype)}
        if ss.has_loss_mask:
            kinds["loss_mask"] = ("loss_mask_document", np.dtype(np.uint8))
        names = list(kinds) + (["segments"] if "segments" in ss.array_names else [])
        lengths, added = [], 0
        handles = {n: open(out / f"{prefix}.bin", "wb") for n, (prefix, _) in kinds.items()}
        try:
            for _, block in iter_blocks(ss, names):
                toks = block["tokens"].ravel()
                # blocks hold whole rows and every row end ends a document, so documents never straddle blocks
                ends = document_ends(block.get("segments"), len(block["tokens"]), ss.row_len)
                is_open = toks[ends - 1] != self.eod_id  # documents without their EOD
                open_ends = ends[is_open]
                handles["tokens"].write(np.insert(toks, open_ends, self.eod_id).astype(tok_dtype).tobytes())
                if ss.has_loss_mask:
                    m = block["loss_mask"].ravel()
                    handles["loss_mask"].write(np.insert(m, open_ends, m[open_ends - 1]).astype(np.uint8).tobytes())
                lengths.append(np.diff(ends, prepend=0) + is_open)
                added += len(open_ends)
        finally:
            for fh in handles.values():
                fh.close()
        lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        for prefix, dtype in kinds.values():
            write_megatron_index(out / f"{prefix}.idx", lengths, dtype)
        return {"prefixes": {n: prefix for n, (prefix, _) in kinds.items()}, "dtype": tok_dtype.name,
                "sequences": len(lengths), "documents": len(lengths), "eod_id": self.eod_id, "eod_added": added}
