"""hf: a Hugging Face ``datasets`` folder (``load_from_disk``), one split per folder (see data/export.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ...io import write_json
from ..export import EXPORTERS, Exporter, iter_blocks
from ..shards import ShardSet


@EXPORTERS.register("hf")
class HFExporter(Exporter):
    """Hugging Face ``datasets`` folder (``load_from_disk``): input_ids (+ loss_mask)."""

    read_hint = "datasets.load_from_disk(OUT)[split]"
    mask_reader = "datasets.load_from_disk (its loss_mask column; your collator turns it into labels)"

    def write(self, ss: ShardSet, out: Path) -> dict[str, Any]:
        import pyarrow as pa
        from datasets import Dataset

        cols = ["tokens"] + (["loss_mask"] if ss.has_loss_mask else [])
        work = out.parent / f".{out.name}.arrow"
        work.mkdir(parents=True, exist_ok=True)
        raw = work / "rows.arrow"
        fields = [pa.field("input_ids", pa.list_(pa.int32(), ss.row_len))]
        if ss.has_loss_mask:
            fields.append(pa.field("loss_mask", pa.list_(pa.uint8(), ss.row_len)))
        schema = pa.schema(fields)
        # An Arrow stream file is what `datasets` memory-maps; writing it block by block keeps memory flat.
        with pa.OSFile(str(raw), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
            for _, block in iter_blocks(ss, cols):
                arrays = [pa.FixedSizeListArray.from_arrays(pa.array(block["tokens"].astype(np.int32).ravel()),
                                                            ss.row_len)]
                if ss.has_loss_mask:
                    arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(block["loss_mask"].ravel()),
                                                                    ss.row_len))
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
        import datasets

        bars = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()
        try:
            Dataset.from_file(str(raw)).save_to_disk(str(out))
        finally:
            if bars:
                datasets.enable_progress_bars()
        shutil.rmtree(work)
        return {"columns": [f.name for f in fields], "rows": ss.n_rows}

    def reader(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"call": self.read_hint, "settings": {}, "never": {},
                "boundaries": ("Example i is row i. A datasets folder marks no documents: the separator tokens in "
                               "input_ids, as in our rows, are the only marks.")}

    def finish(self, out: Path, splits: list[str]) -> None:
        # what DatasetDict.save_to_disk writes: load_from_disk(out) then returns every split
        write_json(out / "dataset_dict.json", {"splits": splits})
