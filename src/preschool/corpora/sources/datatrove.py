"""``datatrove_jsonl`` / ``_parquet`` / ``_csv`` / ``_warc``: datatrove readers as corpus sources (an extra)."""

from __future__ import annotations

import hashlib
import re
from typing import Iterator

from ...errors import ConfigError, DataError, MissingDependency
from ..base import SOURCES, CorpusConfig, Document, ReadStats, clean_text
from .source import Source, check_same, listed_at


class DatatroveSource(Source):
    """A datatrove reader as a corpus source (the optional ``datatrove`` extra).

    ``path`` is the reader's ``data_folder`` (a local folder or any fsspec URL datatrove
    reads: ``s3://...``, ``hf://datasets/...``); ``text_field``/``id_field`` are its
    ``text_key``/``id_key`` (ids: that field, else datatrove's ``<file>/<index>``);
    ``glob`` its ``glob_pattern`` (left at ``**/*``: every file, recursively). All files
    are read, one by one with the reader's ``read_file``, in datatrove's sorted file order
    (task 0 of 1), so the documents are the same wherever the corpus is read; cleaning,
    cutting and limits are ours.

    Positions: the file's index and path in that listing, its size and version as the
    filesystem reports them (``mtime``, or ``LastModified``/``ETag`` on object stores),
    a sha256 of the paths before it, and the document's index in the file. A read resumed
    there lists the folder, opens no file before it, and reads that one file from its
    start, passing over its documents before the position (datatrove's readers cannot
    seek); a changed listing or file is refused with a DataError naming it.
    """

    reader = ""  # datatrove.pipeline.readers class name, set per registered source
    positions = True
    VERSION_KEYS = ("mtime", "LastModified", "last_modified", "ETag", "etag", "blob_id", "last_commit")

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        c = self.cfg
        if not c.path:
            raise ConfigError("path", f"source {self.registry_name!r} needs path (the reader's data_folder)")

        try:
            from datatrove.pipeline import readers
        except ImportError:
            raise MissingDependency("datatrove", "datatrove", f"source {self.registry_name!r}") from None
        kwargs = {"text_key": c.text_field, "id_key": c.id_field or "id",
                  "glob_pattern": None if c.glob == "**/*" else c.glob}
        try:
            reader = getattr(readers, self.reader)(c.path, **kwargs)
        except ImportError as e:  # a reader's own dependency (orjson for JSON Lines, warcio for WARC)
            need = re.search(r"pip install ([\w.\-\[\]]+)", str(e))
            raise MissingDependency(need.group(1) if need else str(e), None,
                                    f"source {self.registry_name!r} (datatrove's {self.reader})") from None
        folder = reader.data_folder
        files = folder.get_shard(0, 1, recursive=reader.recursive, glob_pattern=reader.glob_pattern)
        if not files:
            raise DataError(f"{c.path}: no files found (glob {c.glob!r})")
        first, skip = 0, 0
        if self.start is not None:
            first = listed_at(str(c.path), files, self.start)
            check_same(str(c.path), f"the files before {files[first]!r}", self.start,
                       {"before": hashlib.sha256("\n".join(files[:first]).encode()).hexdigest()})
            check_same(f"{c.path}/{files[first]}", "the file", self.start, self.identity(folder, files[first]))
            skip = int(self.start["at"]["doc"])
        for i in range(first, len(files)):
            where = {"file": i, "path": files[i], **self.identity(folder, files[i]),
                     "before": hashlib.sha256("\n".join(files[:i]).encode()).hexdigest()}
            if i > first or self.start is None:
                stats.files += 1  # the file a resumed read starts in was counted before the position
            for n, doc in enumerate(reader.read_file(files[i])):
                if i == first and n < skip:
                    continue  # read before the position (datatrove's readers cannot seek)
                yield Document(str(doc.id), clean_text(doc.text), {
                    "source": self.registry_name, "file": doc.metadata.get("file_path"),
                    "stream": {**where, "at": {"doc": n}}})

    @classmethod
    def identity(cls, folder, path: str) -> dict:
        """``{"size", "version"}`` of ``path`` in datatrove ``folder`` (fsspec ``info``), JSON-able."""
        try:
            info = folder.info(path)
        except (OSError, ValueError) as e:
            raise DataError(f"{folder.path}/{path}: could not be read ({type(e).__name__}: {e})") from None
        version = next((info[k] for k in cls.VERSION_KEYS if info.get(k) is not None), None)
        return {"size": info.get("size"), "version": None if version is None else str(version)}


for _name, _cls in (("jsonl", "JsonlReader"), ("parquet", "ParquetReader"), ("csv", "CSVReader"),
                    ("warc", "WarcReader")):
    SOURCES.register(f"datatrove_{_name}", config=CorpusConfig)(
        type(f"Datatrove{_cls}Source", (DatatroveSource,), {"reader": _cls, "__doc__": f"datatrove's {_cls}."}))
