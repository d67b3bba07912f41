"""numpy: flat token files as OLMo-core memory-maps them (see data/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..export import EXPORTERS, Exporter, document_ends, shard_blocks
from ..shards import ShardSet

# Per split: the token files at the top, side files in folders of their own with their own prefix, so
# that no glob for the token files (OLMo-core's ``*`` stops at a ``/``) can take a mask for tokens.
TOKENS = "part-{k:05d}.npy"
SIDE = {"label_mask": "label_mask/label_mask-{k:05d}.npy", "doc_ends": "doc_ends/doc_ends-{k:05d}.npy"}
TOKEN_GLOB = "part-*.npy"


@EXPORTERS.register("numpy")
class NumpyExporter(Exporter):
    """Flat headerless uint16/uint32 token files as OLMo-core memory-maps them, ``part-NNNNN.npy``, with
    per token file ``label_mask/label_mask-NNNNN.npy`` (bool, when masked) and
    ``doc_ends/doc_ends-NNNNN.npy`` (uint64: the token offsets in the file where each of our documents
    ends, as datatrove's ``.ds.index``; :class:`preschool.data.olmo_reader.DocumentNumpyFSLDataset`
    reads them)."""

    read_hint = "olmo_core.data.NumpyFSLDataset(*files, sequence_length=ROW_LEN, dtype=DTYPE, ...)"
    mask_reader = "OLMo-core's NumpyFSLDataset(label_mask_paths=<the label_mask files>), as label_mask"

    def write(self, ss: ShardSet, out: Path) -> dict[str, Any]:
        for folder in {Path(f).parent for f in SIDE.values()}:
            (out / folder).mkdir(parents=True, exist_ok=True)
        cols = ["tokens"] + (["loss_mask"] if ss.has_loss_mask else []) + \
            (["segments"] if "segments" in ss.array_names else [])
        kinds = ["tokens", "doc_ends"] + (["label_mask"] if ss.has_loss_mask else [])
        files: dict[str, list[str]] = {kind: [] for kind in kinds}
        handles: dict[str, Any] = {}
        shard = -1
        try:
            for k, offset, block in shard_blocks(ss, cols):
                if k != shard:
                    for fh in handles.values():
                        fh.close()
                    shard = k
                    for kind in kinds:
                        files[kind].append((TOKENS if kind == "tokens" else SIDE[kind]).format(k=k))
                    handles = {kind: open(out / files[kind][-1], "wb") for kind in kinds}
                toks = block["tokens"]
                handles["tokens"].write(toks.astype(ss.dtype.newbyteorder("<")).tobytes())
                if ss.has_loss_mask:
                    handles["label_mask"].write(block["loss_mask"].astype(np.bool_).tobytes())
                ends = document_ends(block.get("segments"), len(toks), ss.row_len, start=offset)
                handles["doc_ends"].write(ends.astype("<u8").tobytes())
        finally:
            for fh in handles.values():
                fh.close()
        return {"files": files, "dtype": ss.dtype.name, "sequence_length": ss.row_len}

    def reader(self, info: dict[str, Any]) -> dict[str, Any]:
        first = next(iter(info["splits"].values()))
        special = (info.get("tokenizer") or {}).get("special_ids") or {}
        sep = self.documents["separator"]
        masked = any(m["has_loss_mask"] for m in info["splits"].values())
        settings = {"glob": TOKEN_GLOB, "label_mask_glob": SIDE["label_mask"].replace("{k:05d}", "*"),
                    "doc_ends_glob": SIDE["doc_ends"].replace("{k:05d}", "*"),
                    "sequence_length": first["sequence_length"], "dtype": first["dtype"],
                    "vocab_size": max(m["vocab_size"] for m in info["splits"].values()),
                    "eos_token_id": self.documents["separator_id"] if sep else special.get("eos"),
                    "pad_token_id": special.get("pad"), "bos_token_id": None}
        never = {"bos_token_id": (
            "OLMo-core then ends a document only where an EOS is followed by a BOS; these rows have no such "
            "pair, so it sees one document per row (leave it unset, whatever the tokenizer's BOS)")}
        if sep == "bos":
            dataset = "preschool.data.olmo_reader.DocumentNumpyFSLDataset"
            call = f"{dataset}.from_export('OUT/<split>', generate_doc_lengths=True)"
            boundaries = (
                "OLMo-core's own NumpyFSLDataset gives every row as its instance, but its doc_lens end a document "
                "after each eos_token_id: here each document opens with that id, so it would put every BOS at the "
                "end of the document before it. DocumentNumpyFSLDataset is that dataset with doc_lens read from "
                "the doc_ends files: our documents exactly. OLMo-core's NumpyFSLDatasetConfig.glob with the "
                "settings below still gives rows and label masks exactly.")
        else:
            dataset = "olmo_core.data.NumpyFSLDataset"
            masks = (f", label_mask_paths=['OUT/<split>/{settings['label_mask_glob']}']" if masked else "")
            call = (f"olmo_core.data.NumpyFSLDatasetConfig.glob('OUT/<split>/{TOKEN_GLOB}', "
                    f"sequence_length={settings['sequence_length']}, dtype=NumpyDatasetDType.{settings['dtype']}, "
                    f"tokenizer=TokenizerConfig(vocab_size={settings['vocab_size']}, "
                    f"eos_token_id={settings['eos_token_id']}, pad_token_id={settings['pad_token_id']}), "
                    f"generate_doc_lengths=True{masks}).build()")
            boundaries = ("Instance i is row i, and OLMo-core's doc_lens, which end a document after each "
                          "eos_token_id, are our documents exactly. (preschool.data.olmo_reader."
                          "DocumentNumpyFSLDataset, doc_lens from the doc_ends files, gives the same.)")
        boundaries += (f" Token files: `OUT/<split>/{TOKEN_GLOB}`; label masks, in the same order: "
                       f"`OUT/<split>/{settings['label_mask_glob']}`; document ends: "
                       f"`OUT/<split>/{settings['doc_ends_glob']}`. A `**` glob would reach the side folders.")
        return {"call": call, "dataset": dataset, "settings": settings, "never": never, "boundaries": boundaries}
