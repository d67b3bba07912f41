"""numpy: flat token files as OLMo-core memory-maps them (see data/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..export import EXPORTERS, Exporter, iter_blocks
from ..shards import ShardSet


@EXPORTERS.register("numpy")
class NumpyExporter(Exporter):
    """Flat headerless uint16/uint32 token files as OLMo-core memory-maps them (+ bool label masks)."""

    read_hint = "olmo_core.data.NumpyFSLDataset(*files, sequence_length=ROW_LEN, dtype=DTYPE, ...)"
    mask_reader = "OLMo-core's NumpyFSLDataset(label_mask_paths=<the label_mask files>), as label_mask"

    def write(self, ss: ShardSet, out: Path) -> dict[str, Any]:
        out.mkdir(parents=True, exist_ok=True)
        cols = ["tokens"] + (["loss_mask"] if ss.has_loss_mask else [])
        files: dict[str, list[str]] = {"tokens": [], "label_mask": []}
        handles: dict[str, Any] = {}
        shard = -1
        for k, block in iter_blocks(ss, cols):
            if k != shard:
                for fh in handles.values():
                    fh.close()
                shard = k
                handles = {"tokens": open(out / f"part-{k:05d}.npy", "wb")}
                files["tokens"].append(f"part-{k:05d}.npy")
                if ss.has_loss_mask:
                    handles["loss_mask"] = open(out / f"part-{k:05d}.label_mask.npy", "wb")
                    files["label_mask"].append(f"part-{k:05d}.label_mask.npy")
            handles["tokens"].write(block["tokens"].astype(ss.dtype.newbyteorder("<")).tobytes())
            if ss.has_loss_mask:
                handles["loss_mask"].write(block["loss_mask"].astype(np.bool_).tobytes())
        for fh in handles.values():
            fh.close()
        if not files["label_mask"]:
            del files["label_mask"]
        return {"files": files, "dtype": ss.dtype.name, "sequence_length": ss.row_len}
