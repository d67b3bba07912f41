"""``hf``: a Hugging Face dataset (``datasets``), loaded or streamed."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ...errors import ConfigError, DataError
from ..base import SOURCES, CorpusConfig, Document, ReadStats, clean_text
from .source import Source, walk_files


@SOURCES.register("hf", config=CorpusConfig)
class HFSource(Source):
    """A Hugging Face dataset: by hub name (network), a builder over local files, or a ``save_to_disk`` folder.

    ``hf_name`` + ``hf_config`` + ``hf_split`` go to ``datasets.load_dataset``
    (``streaming`` as configured); with ``path`` they are data files for a
    builder name such as ``parquet``/``json``/``text``. A ``path`` that is a
    ``save_to_disk`` folder is opened with ``datasets.load_from_disk``.
    """

    def _load(self, stats: ReadStats):
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
            files = [str(f) for f, _ in walk_files(p, c.glob, stats)] if p.is_dir() else [str(p)]
            kwargs["data_files"] = {c.hf_split: files}
        try:
            ds = datasets.load_dataset(c.hf_name, c.hf_config, split=c.hf_split, streaming=c.streaming, **kwargs)
        except Exception as e:  # offline, unknown name, bad files: all reach the user as one readable error
            raise DataError(f"hf dataset {c.hf_name!r} (config {c.hf_config!r}, split {c.hf_split!r}) could not be "
                            f"loaded: {type(e).__name__}: {e}") from None
        label = "/".join(x for x in (c.hf_name, c.hf_config, c.hf_split) if x)
        return ds, label

    positions = True  # when streamed (``streaming: true``)

    def documents(self, stats: ReadStats) -> Iterator[Document]:
        c = self.cfg
        ds, label = self._load(stats if self.start is None else ReadStats())  # a resumed read has these counts
        # A streamed dataset reports its position (``state_dict``: shard and example within it) before each
        # record, so a reader can later continue there instead of streaming the prefix again.
        stream = hasattr(ds, "state_dict") and hasattr(ds, "load_state_dict")
        first = 0
        if self.start is not None:
            if not stream:
                raise DataError(f"hf dataset {label}: a stream position is only kept for streaming datasets "
                                "(streaming: true)")
            ds.load_state_dict(self.start["state"])
            first = int(self.start["row"])
        else:
            stats.files += 1
        state = ds.state_dict() if stream else None
        for row, rec in enumerate(ds, start=first):
            before, state = state, (ds.state_dict() if stream else None)
            text = rec.get(c.text_field)
            if not isinstance(text, str):
                if c.text_field not in rec:
                    raise DataError(f"hf dataset {label}: no field {c.text_field!r} (text_field); fields are {sorted(rec)}")
                self.bad_record(stats, "missing_field", f"hf dataset {label}: row {row}: {c.text_field!r} is {text!r}")
                continue
            did = str(rec[c.id_field]) if c.id_field and c.id_field in rec else f"{label}:{row}"
            meta = {"source": "hf", "dataset": label, "row": row}
            if stream:
                meta["stream"] = {"state": before, "row": row}
            yield Document(did, clean_text(text), meta)
