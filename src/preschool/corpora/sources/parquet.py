"""``parquet``: Parquet files, one row per document (pyarrow, read a row group at a time)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ...errors import DataError
from ..base import SOURCES, CorpusConfig, Document, ReadStats, clean_text, decode_bytes
from .source import FileSource, PARQUET_MAGIC


@SOURCES.register("parquet", config=CorpusConfig)
class ParquetSource(FileSource):
    """Parquet files read with pyarrow, column ``text_field``, in row order."""

    extensions = (".parquet",)
    auto_order = 2  # `auto` reads these files with this source

    def accepts(self, path: Path) -> bool:
        return super().accepts(path) or self.head(path, 4) == PARQUET_MAGIC

    def file_documents(self, path: Path, rel: str, stats: ReadStats,
                       at: dict | None = None) -> Iterator[tuple[Document, dict]]:
        import pyarrow.parquet as pq

        c = self.cfg
        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # pyarrow raises several types for a corrupt file
            raise DataError(f"{path}: not a readable Parquet file ({e})") from None
        names = pf.schema_arrow.names
        if c.text_field not in names:
            raise DataError(f"{path}: no column {c.text_field!r} (text_field); columns are {names}")
        cols = [c.text_field] + ([c.id_field] if c.id_field and c.id_field in names else [])
        # A resumed read starts at the row group holding row ``at["row"]`` (the file's footer says how many
        # rows each holds), so only the rows of that one group before it are read again.
        row, group, skip = 0, 0, int(at["row"]) if at else 0
        while skip and group < pf.num_row_groups and skip >= pf.metadata.row_group(group).num_rows:
            n = pf.metadata.row_group(group).num_rows
            row, group, skip = row + n, group + 1, skip - n
        groups = range(group, pf.num_row_groups) if group else None
        replaced = 0  # see FileSource._deferred_replaced
        for batch in pf.iter_batches(batch_size=1024, columns=cols, row_groups=groups):
            if skip:
                n = min(skip, batch.num_rows)
                batch, row, skip = batch.slice(n), row + n, skip - n
            data = batch.to_pydict()
            ids = data.get(c.id_field) if c.id_field else None
            for k, text in enumerate(data[c.text_field]):
                stats.replaced_bad_utf8, replaced = stats.replaced_bad_utf8 + replaced, 0
                where = f"{path}: row {row}"
                if isinstance(text, bytes):
                    text, replaced = self._deferred_replaced(stats, decode_bytes, text, where, c.on_bad_utf8, stats)
                    if text is None:
                        row += 1
                        continue
                if not isinstance(text, str):
                    self.bad_record(stats, "missing_field", f"{where}: column {c.text_field!r} is {text!r}, not text")
                    row += 1
                    continue
                did = str(ids[k]) if ids is not None else f"{rel}:{row}"
                yield Document(did, clean_text(text), {"source": "parquet", "path": rel, "row": row}), {"row": row}
                row += 1
        stats.replaced_bad_utf8 += replaced
