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
    each delimited by the id ``eod_id``, the one GPTDataset must be told is its EOD.

    Megatron's GPT dataset treats each *sequence* of the index as a document
    (``GPTDataset.numel_low_level_dataset`` counts sequences): it shuffles them
    and cuts its own windows across them. So a sequence here is one of our
    documents, a run of one segment number inside a row (:func:`document_ends`),
    not a whole row. Inside a window it tells documents apart only by the EOD
    id, restarting position ids (and attention) right after each one. So each
    sequence must carry the id once, where the data's own separator stands:
    EOS-separated data (``opens`` False) ends each document with it, and a
    document whose last token is not ``eod_id`` (cut at a row end, or a padded
    row) is written with it appended; BOS-separated data (``opens``) opens each
    document with it and gets nothing appended (the next document already opens
    with it), and a document that does not open with it (the rest of one a row
    end cut) is written with it put before. An added id's loss mask repeats its
    document's nearest value (as our packer's EOS does); the ``.bin`` is
    otherwise the rows' token stream unchanged.
    """

    read_hint = "megatron.core.datasets.indexed_dataset.IndexedDataset('OUT/<split>/text_document')"
    mask_read = False
    mask_reader = ("Megatron-core's GPTDataset (its loss_mask marks EOD/pad tokens only; loss_mask_document "
                   "is written for a dataset class of your own)")

    def __init__(self, eod_id: int, opens: bool = False):
        self.eod_id = eod_id
        self.opens = opens

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
                starts = np.r_[0, ends[:-1]]
                # documents without their id, and where it goes in: before the first token, or after the last
                missing = toks[starts] != self.eod_id if self.opens else toks[ends - 1] != self.eod_id
                at = (starts if self.opens else ends)[missing]
                handles["tokens"].write(np.insert(toks, at, self.eod_id).astype(tok_dtype).tobytes())
                if ss.has_loss_mask:
                    m = block["loss_mask"].ravel()
                    nearest = m[at] if self.opens else m[at - 1]
                    handles["loss_mask"].write(np.insert(m, at, nearest).astype(np.uint8).tobytes())
                lengths.append(np.diff(ends, prepend=0) + missing)
                added += len(at)
        finally:
            for fh in handles.values():
                fh.close()
        lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        for prefix, dtype in kinds.values():
            write_megatron_index(out / f"{prefix}.idx", lengths, dtype)
        return {"prefixes": {n: prefix for n, (prefix, _) in kinds.items()}, "dtype": tok_dtype.name,
                "sequences": len(lengths), "documents": len(lengths), "eod_id": self.eod_id,
                "eod_at": "start" if self.opens else "end", "eod_added": added}

    def reader(self, info: dict[str, Any]) -> dict[str, Any]:
        settings = {"eod": self.eod_id, "eod_at": "start" if self.opens else "end",
                    "reset_position_ids": True, "reset_attention_mask": True}
        never = {}
        eos = (info.get("tokenizer") or {}).get("special_ids", {}).get("eos")
        if eos is not None and eos != self.eod_id:
            never["--tokenizer-type HuggingFaceTokenizer"] = (
                f"as the source of GPTDataset's eod: it reports the tokenizer's EOS, id {eos}, which does "
                f"not delimit these documents; give GPTDataset eod = {self.eod_id}")
        if self.opens:
            boundaries = (
                "GPTDataset (megatron-core 0.16) restarts position ids, and attention with reset_attention_mask, "
                "only right after an eod token, never before one. Here each document opens with it, so Megatron "
                "counts every document's opening separator as the last token of the span before it: every span "
                "between restarts is as long as one of our documents, but its position ids are ours one token "
                "later, and each document's first token is predicted with the document before it in view "
                "instead of from the separator alone. No Megatron setting restarts before a token; for exact "
                "document boundaries with BOS-separated data use the nanotron or numpy export.")
        else:
            boundaries = ("GPTDataset restarts position ids (and attention, with reset_attention_mask) right after "
                          "every eod token, which ends each of our documents: exactly where ours start.")
        return {"call": self.read_hint, "settings": settings, "never": never, "boundaries": boundaries}
