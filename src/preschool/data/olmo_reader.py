"""OLMo-core's NumpyFSLDataset with our document boundaries: what a numpy export's ``doc_ends`` files hold.

OLMo-core (3.0) finds documents in the tokens alone: with ``generate_doc_lengths`` its
``doc_lens`` end a document after every ``eos_token_id`` (with ``bos_token_id`` set, only where
an EOS is followed by a BOS). That is exact for EOS-separated data. BOS-separated data
(``separator: bos``, what every experiment with an L2T set gets) has no token that ends its
documents, so OLMo-core would put each BOS at the end of the document before it.
:class:`DocumentNumpyFSLDataset` is OLMo-core's dataset, same instances and label masks, with
``doc_lens`` read from the export's ``doc_ends`` files instead: our documents exactly, whatever
the separator. ``from_export`` builds it from an export's ``export.json``.

Needs ai2-olmo-core (the ``olmo`` extra; it has an environment of its own: ``make test-olmo``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from olmo_core.data import NumpyFSLDataset

from ..errors import DataError
from ..io import read_json


class DocumentNumpyFSLDataset(NumpyFSLDataset):
    """``NumpyFSLDataset`` whose ``doc_lens`` come from ``doc_ends_paths`` (one per token file, in the
    same order: uint64 token offsets in that file where each document ends, the last one its length).

    Every other argument and every other key of an item is OLMo-core's. Local files only. A missing
    ``doc_ends`` file raises DataError naming it at once, a malformed one when one of its instances is read."""

    def __init__(self, *paths: Any, doc_ends_paths: list[str | Path], **kwargs: Any):
        super().__init__(*paths, **kwargs)
        if len(doc_ends_paths) != len(self.paths):
            raise DataError(f"{len(doc_ends_paths)} doc_ends files for {len(self.paths)} token files; "
                            "give one per token file, in the same order")
        self._doc_ends_paths = [Path(p) for p in doc_ends_paths]
        for path, tokens in zip(self._doc_ends_paths, self.paths):
            if not path.is_file():
                raise DataError(f"{path}: missing; no document ends for {tokens} (export the dataset again)")
        self._doc_ends: dict[int, np.ndarray] = {}

    def __getitem__(self, index: int) -> dict[str, Any]:
        out = super().__getitem__(index)
        if "doc_lens" in out:
            out["doc_lens"] = self._doc_lens(int(index))
        return out

    def _doc_lens(self, index: int) -> torch.Tensor:
        pos = index if index >= 0 else len(self) + index
        k, first = next((k, start) for k, (start, end) in enumerate(self.offsets) if start <= pos < end)
        lo = (pos - first) * self.sequence_length
        hi = lo + self.sequence_length
        ends = self._ends(k)
        inside = ends[np.searchsorted(ends, lo, side="right"):np.searchsorted(ends, hi, side="left")]
        return torch.from_numpy(np.diff(np.r_[lo, inside, hi]).astype(np.int32))

    def _ends(self, k: int) -> np.ndarray:
        if k not in self._doc_ends:
            path = self._doc_ends_paths[k]
            ends = np.fromfile(path, "<u8").astype(np.int64)
            size = self.file_sizes[k] // np.dtype(self.dtype).itemsize  # tokens in the file
            if not ends.size or (np.diff(ends) <= 0).any() or ends[0] <= 0 or ends[-1] != size:
                raise DataError(f"{path}: not the document ends of {self.paths[k]} (increasing token offsets "
                                f"ending at its length, {size})")
            self._doc_ends[k] = ends
        return self._doc_ends[k]

    @classmethod
    def from_export(cls, split: str | Path, **kwargs: Any) -> "DocumentNumpyFSLDataset":
        """The dataset of one split folder of a ``preschool export --format numpy`` folder, its files,
        sequence length, dtype, vocabulary size and EOS/PAD ids taken from the export's ``export.json``
        (label masks too, when the split has them). ``kwargs`` (``generate_doc_lengths=True`` for
        ``doc_lens``, ``work_dir``, or any id to override) go to the dataset."""
        split = Path(split)
        where = split.parent / "export.json"
        try:
            info = read_json(where)
        except (OSError, ValueError) as e:
            raise DataError(f"{where}: cannot read the export's record ({e})") from None
        m = (info.get("splits") or {}).get(split.name)
        if info.get("format") != "numpy" or m is None:
            raise DataError(f"{where}: no numpy export of a split {split.name!r}")
        files = m.get("files") or {}
        if "doc_ends" not in files:
            raise DataError(f"{where}: split {split.name} has no doc_ends files (made before the export wrote "
                            "document ends); export it again")
        settings = (info.get("reader") or {}).get("settings") or {}
        for key in ("eos_token_id", "pad_token_id"):
            if kwargs.get(key, settings.get(key)) is None:
                raise DataError(f"{where}: no {key} (no tokenizer beside the exported dataset); pass {key}=")
            kwargs.setdefault(key, settings[key])
        if m.get("has_loss_mask"):
            kwargs.setdefault("label_mask_paths", [split / f for f in files["label_mask"]])
        work_dir = kwargs.pop("work_dir", None)
        ds = cls(*[split / f for f in files["tokens"]], doc_ends_paths=[split / f for f in files["doc_ends"]],
                 sequence_length=m["sequence_length"], vocab_size=m["vocab_size"], dtype=getattr(np, m["dtype"]),
                 **kwargs)
        if work_dir is not None:
            ds.work_dir = Path(work_dir)
        return ds
