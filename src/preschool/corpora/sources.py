"""Text sources: plain-text files, JSONL, Parquet, Hugging Face datasets and the built-in storybook.

Each source is a small class registered in ``SOURCES`` under the name used in
``CorpusConfig.source``; it yields raw :class:`Document` s and
:func:`iter_documents` applies what every source shares: chunking
(``split_documents``), empty / ``min_chars`` drops, and the ``max_documents`` /
``target_tokens`` limits. Files are read in sorted order of their path
relative to ``path``, so ids and order are the same on every machine.

Ids: ``text`` -> ``<relative file>`` (``#<chunk>`` when split);
``jsonl`` -> ``<relative file>:<line>``; ``parquet`` -> ``<relative file>:<row>``;
``hf`` -> ``<name>[/<config>]/<split>:<row>``; ``storybook`` -> ``storybook:<index>``.
With ``id_field`` set, jsonl/parquet/hf use that field's value instead.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import itertools
import json
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..errors import ConfigError, DataError
from .base import (SOURCES, CorpusConfig, Document, ReadStats, bad_utf8_message, chunk_lines, chunk_text, clean_text,
                   decode_bytes)


DEFAULT_GLOB = "**/*"


class Source:
    """Base class: ``documents(stats)`` yields raw documents in a deterministic order."""

    extensions: tuple[str, ...] = ()  # kept when ``glob`` is left at its default

    def __init__(self, cfg: CorpusConfig):
        self.cfg = cfg

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        raise NotImplementedError

    def pieces(self, stats: ReadStats) -> Iterator[tuple[str, dict, Iterable[str]]]:
        """(id, meta, texts after ``split_documents``) per raw document; a source may override it to stream."""
        for doc in self.documents(stats):
            yield doc.id, doc.meta, chunk_text(doc.text, self.cfg.split_documents, self.cfg.chunk_chars)

    # -- shared file helpers
    def files(self) -> list[tuple[Path, str]]:
        """(path, id prefix) pairs: the file itself, or the folder's matching files sorted by relative path."""
        root = Path(self.cfg.path).expanduser()
        if not root.exists():
            raise ConfigError("path", f"file or folder not found: {root}")
        if root.is_file():
            return [(root, root.name)]
        out = []
        for f in root.glob(self.cfg.glob):
            rel = f.relative_to(root)
            if not f.is_file() or any(part.startswith(".") for part in rel.parts):
                continue  # hidden files (editor swap files, our own .tmp files)
            if self.cfg.glob == DEFAULT_GLOB and self.extensions:
                name = f.name.lower().removesuffix(".gz")
                if not name.endswith(self.extensions):
                    continue
            out.append((f, rel.as_posix()))
        out.sort(key=lambda x: x[1])
        if not out:
            what = f"glob {self.cfg.glob!r}" + (f" with extension {'/'.join(self.extensions)}"
                                                 if self.cfg.glob == DEFAULT_GLOB and self.extensions else "")
            raise DataError(f"{root}: no files match {what}")
        return out

    @staticmethod
    def open_binary(path: Path):
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")

    @staticmethod
    @contextlib.contextmanager
    def reading(path: Path):
        """Turn I/O failures while reading ``path`` (a truncated .gz, a vanished file) into a DataError naming it."""
        try:
            yield
        except (OSError, EOFError) as e:
            raise DataError(f"{path}: could not be read ({type(e).__name__}: {e})") from None

    def raw_lines(self, path: Path) -> Iterator[tuple[int, int, bytes]]:
        """``(line number, byte offset, bytes)`` of each line, line end kept, a leading BOM dropped.

        The offset counts from the file start (BOM included) so error messages point at the
        right byte; I/O failures become a DataError naming the file.
        """
        offset = 0
        with self.reading(path), self.open_binary(path) as fh:
            for lineno, raw in enumerate(fh, 1):
                start, offset = offset, offset + len(raw)
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw, start = raw[3:], start + 3
                yield lineno, start, raw

    def bad_record(self, stats: ReadStats, reason: str, message: str) -> None:
        if self.cfg.on_bad_record == "error":
            raise DataError(message + "; set on_bad_record: drop to skip such records")
        stats.drop(reason)


@SOURCES.register("text", config=CorpusConfig)
class TextSource(Source):
    """Plain-text files: each file is one document (cut into chunks by ``split_documents``).

    With ``split_documents`` other than ``none`` a file is streamed line by
    line, so memory stays bounded whatever the file's size; with ``none`` it is
    read whole (it is one document).
    """

    extensions = (".txt", ".text", ".md")

    def pieces(self, stats: ReadStats) -> Iterator[tuple[str, dict, Iterable[str]]]:
        c = self.cfg
        if c.split_documents == "none":
            yield from super().pieces(stats)
            return
        for path, rel in self.files():
            stats.files += 1
            if c.on_bad_utf8 == "drop" and not self._valid_utf8(path):
                stats.drop("bad_utf8")  # checked first: chunks already handed out could not be taken back
                continue
            yield rel, {"source": "text", "path": rel}, chunk_lines(self._lines(path, stats), c.split_documents,
                                                                    c.chunk_chars)

    def _valid_utf8(self, path: Path) -> bool:
        dec = codecs.getincrementaldecoder("utf-8")()
        with self.reading(path), self.open_binary(path) as fh:
            try:
                while block := fh.read(1 << 20):
                    dec.decode(block)
                dec.decode(b"", final=True)
            except UnicodeDecodeError:
                return False
        return True

    def _lines(self, path: Path, stats: ReadStats) -> Iterator[str]:
        """The file's lines, cleaned like :func:`clean_text` (no BOM, CRLF and lone CR as line ends)."""
        replaced = False
        for lineno, start, raw in self.raw_lines(path):
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                if self.cfg.on_bad_utf8 == "error":
                    raise DataError(bad_utf8_message(str(path), start + e.start, lineno, raw[e.start:e.start + 4])) from None
                line, replaced = raw.decode("utf-8", errors="replace"), True
            if "\ufeff" in line:
                line = line.replace("\ufeff", "")
            if "\r" in line:
                yield from line.split("\r")
            else:
                yield line
        if replaced:
            stats.replaced_bad_utf8 += 1

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        for path, rel in self.files():
            with self.reading(path), self.open_binary(path) as fh:
                data = fh.read()
            stats.files += 1
            text = decode_bytes(data, str(path), self.cfg.on_bad_utf8, stats, first_line=1)
            if text is None:
                continue
            yield Document(rel, clean_text(text), {"source": "text", "path": rel})


@SOURCES.register("jsonl", config=CorpusConfig)
class JsonlSource(Source):
    """JSON Lines files: one JSON object per line; the text is ``record[text_field]``."""

    extensions = (".jsonl", ".json", ".ndjson")

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        c = self.cfg
        for path, rel in self.files():
            stats.files += 1
            for lineno, start, raw in self.raw_lines(path):
                if lineno == 1 and raw.lstrip().startswith(b"[") and not raw.rstrip().endswith(b"]"):
                    raise DataError(f"{path}: looks like one JSON array, not JSON Lines (one object per line); "
                                    "convert it, or read it with source: hf, hf_name: json")
                raw = raw.rstrip(b"\r\n")
                if not raw.strip():
                    continue  # blank lines (a trailing newline pair) are not records
                where = f"{path}:{lineno}"
                line = decode_bytes(raw, where, c.on_bad_utf8, stats, start)
                if line is None:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    self.bad_record(stats, "bad_json", f"{where}: not valid JSON ({e.msg} at column {e.colno})")
                    continue
                if not isinstance(rec, dict) or not isinstance(rec.get(c.text_field), str):
                    got = type(rec.get(c.text_field)).__name__ if isinstance(rec, dict) else type(rec).__name__
                    self.bad_record(stats, "missing_field",
                                    f"{where}: no string field {c.text_field!r} (text_field) in this record, got {got}")
                    continue
                did = str(rec[c.id_field]) if c.id_field and c.id_field in rec else f"{rel}:{lineno}"
                yield Document(did, clean_text(rec[c.text_field]), {"source": "jsonl", "path": rel, "line": lineno})


@SOURCES.register("parquet", config=CorpusConfig)
class ParquetSource(Source):
    """Parquet files read with pyarrow, column ``text_field``, in row order."""

    extensions = (".parquet",)

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        import pyarrow.parquet as pq

        c = self.cfg
        for path, rel in self.files():
            try:
                pf = pq.ParquetFile(path)
            except Exception as e:  # pyarrow raises several types for a corrupt file
                raise DataError(f"{path}: not a readable Parquet file ({e})") from None
            names = pf.schema_arrow.names
            if c.text_field not in names:
                raise DataError(f"{path}: no column {c.text_field!r} (text_field); columns are {names}")
            cols = [c.text_field] + ([c.id_field] if c.id_field and c.id_field in names else [])
            stats.files += 1
            row = 0
            for batch in pf.iter_batches(batch_size=1024, columns=cols):
                data = batch.to_pydict()
                ids = data.get(c.id_field) if c.id_field else None
                for k, text in enumerate(data[c.text_field]):
                    where = f"{path}: row {row}"
                    if isinstance(text, bytes):
                        text = decode_bytes(text, where, c.on_bad_utf8, stats)
                        if text is None:
                            row += 1
                            continue
                    if not isinstance(text, str):
                        self.bad_record(stats, "missing_field", f"{where}: column {c.text_field!r} is {text!r}, not text")
                        row += 1
                        continue
                    did = str(ids[k]) if ids is not None else f"{rel}:{row}"
                    yield Document(did, clean_text(text), {"source": "parquet", "path": rel, "row": row})
                    row += 1


@SOURCES.register("hf", config=CorpusConfig)
class HFSource(Source):
    """A Hugging Face dataset: by hub name (network), a builder over local files, or a ``save_to_disk`` folder.

    ``hf_name`` + ``hf_config`` + ``hf_split`` go to ``datasets.load_dataset``
    (``streaming`` as configured); with ``path`` they are data files for a
    builder name such as ``parquet``/``json``/``text``. A ``path`` that is a
    ``save_to_disk`` folder is opened with ``datasets.load_from_disk``.
    """

    def _load(self):
        import datasets

        c = self.cfg
        p = Path(c.path).expanduser() if c.path else None
        if p is not None and p.is_dir() and any((p / f).is_file() for f in ("dataset_info.json", "state.json", "dataset_dict.json")):
            try:
                ds = datasets.load_from_disk(str(p))
            except Exception as e:
                raise DataError(f"{p}: could not open saved dataset ({type(e).__name__}: {e})") from None
            if isinstance(ds, datasets.DatasetDict):
                if c.hf_split not in ds:
                    raise ConfigError("hf_split", f"split {c.hf_split!r} not in {p}; it has {sorted(ds)}")
                ds = ds[c.hf_split]
            return (ds.to_iterable_dataset() if c.streaming else ds), f"{p.name}/{c.hf_split}"
        if not c.hf_name:
            raise ConfigError("hf_name", f"{p} is not a save_to_disk folder; give hf_name (e.g. 'parquet') to read it as data files")
        kwargs = {}
        if p is not None:
            if not p.exists():
                raise ConfigError("path", f"file or folder not found: {p}")
            files = [str(f) for f, _ in self.files()] if p.is_dir() else [str(p)]
            kwargs["data_files"] = {c.hf_split: files}
        try:
            ds = datasets.load_dataset(c.hf_name, c.hf_config, split=c.hf_split, streaming=c.streaming, **kwargs)
        except Exception as e:  # offline, unknown name, bad files: all reach the user as one readable error
            raise DataError(f"hf dataset {c.hf_name!r} (config {c.hf_config!r}, split {c.hf_split!r}) could not be "
                            f"loaded: {type(e).__name__}: {e}") from None
        label = "/".join(x for x in (c.hf_name, c.hf_config, c.hf_split) if x)
        return ds, label

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        c = self.cfg
        ds, label = self._load()
        stats.files += 1
        for row, rec in enumerate(ds):
            text = rec.get(c.text_field)
            if not isinstance(text, str):
                if c.text_field not in rec:
                    raise DataError(f"hf dataset {label}: no field {c.text_field!r} (text_field); fields are {sorted(rec)}")
                self.bad_record(stats, "missing_field", f"hf dataset {label}: row {row}: {c.text_field!r} is {text!r}")
                continue
            did = str(rec[c.id_field]) if c.id_field and c.id_field in rec else f"{label}:{row}"
            yield Document(did, clean_text(text), {"source": "hf", "dataset": label, "row": row})


@SOURCES.register("storybook", config=CorpusConfig)
class StorybookSource(Source):
    """The built-in offline corpus: simple English stories from a probabilistic grammar (endless; limit it)."""

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        from .storybook import Storybook

        book = Storybook(self.cfg.storybook, seed=self.cfg.seed)
        for i in itertools.count():
            yield Document(f"storybook:{i}", book.story(i), {"source": "storybook", "index": i, "seed": self.cfg.seed})


def iter_documents(cfg: CorpusConfig | dict, stats: ReadStats | None = None,
                   count_tokens: Callable[[str], int] | None = None) -> Iterator[Document]:
    """Documents of corpus ``cfg`` (a CorpusConfig or its fields as a dict) in a deterministic order, with stable ids.

    ``stats`` (optional) is filled in as documents are read. ``count_tokens``
    (optional) measures ``target_tokens`` in tokenizer tokens instead of
    whitespace words. Documents that are empty after clean-up, or shorter than
    ``min_chars``, are dropped and counted.
    """
    if isinstance(cfg, dict):
        from ..config import from_dict

        cfg = from_dict(CorpusConfig, cfg)
    stats = stats if stats is not None else ReadStats()
    source = SOURCES.get(cfg.source, "source").cls(cfg)
    n_docs = 0
    n_tokens = 0
    for doc_id, meta, pieces in source.pieces(stats):
        any_piece = False
        for k, text in enumerate(pieces):
            any_piece = True
            if not text.strip():
                stats.drop("empty")
                continue
            if len(text) < cfg.min_chars:
                stats.drop("too_short")
                continue
            if cfg.split_documents == "none":
                out = Document(doc_id, text, meta)
            else:
                out = Document(f"{doc_id}#{k}", text, {**meta, "chunk": k})
            words = len(text.split())
            stats.documents += 1
            stats.chars += len(text)
            stats.words += words
            n_docs += 1
            n_tokens += count_tokens(text) if count_tokens is not None else words
            yield out
            if (cfg.max_documents is not None and n_docs >= cfg.max_documents) or \
                    (cfg.target_tokens is not None and n_tokens >= cfg.target_tokens):
                return
        if not any_piece:
            stats.drop("empty")  # nothing left after clean-up (an empty file, a blank record)
