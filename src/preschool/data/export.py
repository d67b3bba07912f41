"""Export a prepared dataset to the token formats other trainers read.

``export_dataset(dataset_dir, fmt, out)`` reads the shard sets of a prepared
dataset (``<run>/data/<name>`` with ``train/`` and ``val/``, or one shard set)
and writes, per split, the same rows in another trainer's format:

========== ============================================ =============================================
format     files per split                              read by
========== ============================================ =============================================
hf         ``datasets`` ``save_to_disk`` folder;        ``datasets.load_from_disk`` (HF Trainer,
           columns ``input_ids`` (int32, one row of     torchtitan's HF loaders)
           ``seq_len + 1`` tokens) and ``loss_mask``
           (uint8) when the set has one
megatron   ``text_document.bin/.idx``: Megatron's       ``megatron.core.datasets.indexed_dataset.
           MMapIndexedDataset layout, one sequence      IndexedDataset`` (``--data-path
           (and document) per document of ours,         <split>/text_document``) and its
           each ending with the EOD token;              ``GPTDataset``
           ``loss_mask_document.bin/.idx`` (uint8)
           beside it when the set has a loss mask
nanotron   datatrove's tokenized-file layout:           datatrove ``DatatroveFolderDataset`` (what
           ``NNNNN.ds`` (tokens, little-endian uint16   Nanotron's ``nanoset``-free datatrove loader
           or uint32), ``.ds.index`` (uint64 document   reads), windows of ``seq_len + 1`` tokens
           ends in tokens), ``.ds.loss`` (bool, when
           masked), ``.ds.metadata``
numpy      ``part-NNNNN.npy``: a flat headerless         OLMo-core ``NumpyFSLDataset`` (memory-maps
           uint16/uint32 token array (OLMo's            the files with ``dtype``), instances of
           "npy" convention), ``part-NNNNN.label_       ``sequence_length = seq_len + 1``
           mask.npy`` (bool) when masked
========== ============================================ =============================================

Every format keeps the token stream and its order. The window formats keep
the rows: row ``i`` of the shard set is window ``i`` of the export (HF example
``i``, datatrove window ``i``, OLMo instance ``i`` with ``sequence_length =
row_len``). Megatron's GPT dataset shuffles documents and cuts its own windows,
so its sequences are our documents instead. Document ends (for datatrove's
positions and Megatron's documents) come from the ``segments`` array: a
document ends where the segment number changes and at every row end, which is
where our trainer resets positions too. Megatron's GPTDataset finds documents
by the EOD token alone (it concatenates the shuffled ones and resets positions
after EOD), so a Megatron document that does not end with EOD -- one our rows
cut at a row end, or a padded row -- gets one appended: its ``.bin`` is the
rows' tokens in order plus those EODs (``export.json``: ``eod_id``,
``eod_added``), and nothing else differs.

A loss mask (Dyck, L2T answers) is yielded by the hf and numpy readers
(``load_from_disk``'s ``loss_mask`` column, OLMo-core's ``label_mask_paths``). Megatron's
GPTDataset and datatrove's reader (Nanotron) never read theirs, so a set whose mask masks
tokens (a 0 anywhere) is refused for those formats unless ``allow_unread_loss_mask``
(``Exporter.mask_read``); a mask of all ones (the Dyck sets: loss on every token) changes
nothing there and is exported (``export.json``: ``loss_mask.masks_tokens: false``).
:mod:`preschool.data.datatrove_reader` reads ``.ds.loss``.

The export folder is written atomically and carries ``export.json`` (format,
source dataset and its ``content_sha256``, per-split files, row_len, dtype,
vocab size, how to read it) and a copy of the tokenizer when one is found
beside the dataset (``<dataset>/tokenizer`` or ``<dataset>/../tokenizer``).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .. import layout
from ..errors import ConfigError, DataError
from ..io import atomic_dir, code_version, read_json, sha256_file, write_json, write_text
from ..outdir import claim_output, read_manifest
from ..registry import Registry
from .shards import FORMAT, ShardSet, content_sha256

# formats by name, one per file of data/exporters/ (and a plug-in's `exporters`); the helpers they share
# (iter_blocks, document_ends, write_megatron_index) stay here
EXPORTERS = Registry("export format", packages=("preschool.data.exporters",), plugin_module="exporters")

# Megatron's DType codes (indexed_dataset.DType): the index stores the code of the .bin's dtype.
MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
MEGATRON_DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
                        np.dtype(np.int64): 5, np.dtype(np.float64): 6, np.dtype(np.float32): 7,
                        np.dtype(np.uint16): 8}
BLOCK_ROWS = 4096  # rows read per step: memory stays one block, whatever the set's size


def dataset_splits(dataset_dir: str | Path) -> dict[str, Path]:
    """Split name -> shard-set folder: ``train``/``val`` of a prepared dataset, or the folder itself."""
    d = Path(dataset_dir)
    man = d / layout.MANIFEST
    if man.is_file():
        try:
            if read_json(man).get("format") == FORMAT:
                return {d.name: d}
        except ValueError as e:
            raise DataError(f"{man}: manifest is corrupt ({e})") from None
    # a split the dataset has (its folder, or its entry in dataset.json) but whose manifest is gone is a
    # broken dataset: exporting the other split alone would look like a whole export
    recorded = (read_manifest(layout.dataset_record_path(d)) or {}).get("splits")
    expected = [s for s in ("train", "val") if (d / s).exists() or (isinstance(recorded, dict) and s in recorded)]
    for s in expected:
        if not (d / s / layout.MANIFEST).is_file():
            raise DataError(f"{d / s / layout.MANIFEST}: missing; the dataset's {s} split cannot be read "
                            "(prepare the dataset again)")
    splits = {s: d / s for s in ("train", "val") if (d / s / layout.MANIFEST).is_file()}
    if not splits:
        raise DataError(f"{d}: no shard set here (expected train/manifest.json, val/manifest.json "
                        f"or a shard set's own manifest.json)")
    return splits


def iter_blocks(ss: ShardSet, names: list[str], block_rows: int = BLOCK_ROWS) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """``(shard index, {array name: rows})`` in row order, at most ``block_rows`` rows at a time."""
    per_name = [list(ss.iter_arrays(n)) for n in names]
    for k, arrays in enumerate(zip(*per_name)):
        for s in range(0, len(arrays[0]), block_rows):
            yield k, {n: np.asarray(a[s:s + block_rows]) for n, a in zip(names, arrays)}


def document_ends(segments: np.ndarray | None, n_rows: int, row_len: int, start: int = 0) -> np.ndarray:
    """Token offsets (exclusive ends, counted from ``start``) of the documents in a block of rows.

    A document ends where the segment number changes inside a row and at every row end.
    """
    row_ends = start + (np.arange(n_rows, dtype=np.int64) + 1) * row_len
    if segments is None or segments.size == 0:
        return row_ends
    r, p = np.nonzero(segments[:, 1:] != segments[:, :-1])
    inner = start + r.astype(np.int64) * row_len + p + 1
    return np.sort(np.concatenate([inner, row_ends]))


class Exporter:
    """Writes one split (a shard set) into a folder; ``write`` returns what it wrote (for export.json)."""

    registry_name: str
    read_hint: str = ""
    # whether the format's usual reader (``mask_reader``) yields a set's loss mask; where it does not, a
    # masked set is refused unless the user allows it (training there would count every token's loss)
    mask_read: bool = True
    mask_reader: str = ""

    def write(self, ss: ShardSet, out: Path) -> dict[str, Any]:
        raise NotImplementedError

    def finish(self, out: Path, splits: list[str]) -> None:
        """Top-level files of the export, after every split is written."""


def write_megatron_index(path: Path, lengths: np.ndarray, dtype: np.dtype, doc_indices: np.ndarray | None = None) -> None:
    """Megatron's index: magic, version 1, dtype code, counts, lengths (int32), byte pointers (int64),
    document indices (int64, ``[0, ..., n_sequences]``: sequence ranges per document)."""
    lengths = np.asarray(lengths, np.int32)
    pointers = np.zeros(len(lengths), np.int64)
    np.cumsum(lengths[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
    docs = np.arange(len(lengths) + 1, dtype=np.int64) if doc_indices is None else np.asarray(doc_indices, np.int64)
    with open(path, "wb") as fh:
        fh.write(MEGATRON_MAGIC)
        fh.write(struct.pack("<Q", 1))
        fh.write(struct.pack("<B", MEGATRON_DTYPE_CODES[np.dtype(dtype)]))
        fh.write(struct.pack("<Q", len(lengths)))
        fh.write(struct.pack("<Q", len(docs)))
        fh.write(lengths.tobytes(order="C"))
        fh.write(pointers.tobytes(order="C"))
        fh.write(docs.tobytes(order="C"))


def masks_tokens(split: Path) -> bool:
    """Whether the shard set ``split`` has a ``loss_mask`` with a 0 anywhere (a mask of all ones takes
    no token out of the loss: a reader that ignores it trains on the same tokens). Reads the mask
    files (one byte per token), a block of rows at a time; sizes are checked, checksums are not."""
    if "loss_mask" not in ((read_manifest(split / layout.MANIFEST) or {}).get("arrays") or []):
        return False
    ss = ShardSet(split, verify="size")
    for arr in ss.iter_arrays("loss_mask"):
        for start in range(0, len(arr), 65536):
            if not arr[start:start + 65536].all():
                return True
    return False


def find_tokenizer(dataset_dir: Path) -> Path | None:
    for cand in (layout.tokenizer_dir(dataset_dir), layout.tokenizer_dir(dataset_dir.parent)):
        if (cand / "tokenizer.json").is_file():
            return cand
    return None


def export_entries(folder: Path) -> set[str] | None:
    """What an earlier export in ``folder`` holds (read from its ``export.json``), or None if it is none."""
    info = read_manifest(folder / "export.json")
    if info is None or info.get("format") not in EXPORTERS.names() or not isinstance(info.get("splits"), dict):
        return None
    return {"export.json", "README.md", "dataset_dict.json", layout.TOKENIZER, *info["splits"]}


def export_dataset(dataset_dir: str | Path, fmt: str, out: str | Path, splits: list[str] | None = None,
                   verify: str = "full", command: str | None = None, allow_unread_loss_mask: bool = False,
                   eod_id: int | None = None) -> dict:
    """Write ``dataset_dir``'s splits in format ``fmt`` under ``out/<split>/``; return export.json's content.

    The shard sets are checked (``verify``: "full" = sizes and sha256, or "size") before anything is written;
    ``out`` appears whole or not at all. ``out`` must be missing, empty or an earlier export (nothing
    else in it) and may not overlap the dataset (``outdir.claim_output``, ConfigError on ``--out``);
    it is locked while the export runs (``command``: what a second writer is told is running).
    A split whose loss mask masks tokens (:func:`masks_tokens`) is refused (ConfigError on
    ``allow_unread_loss_mask``) when the format's reader ignores the mask (Megatron, Nanotron), unless
    ``allow_unread_loss_mask``; export.json's ``loss_mask`` says whether and by what the mask is read,
    and whether it masks any token. ``eod_id`` (megatron only): the token every
    Megatron document ends with; default the EOS of the tokenizer found beside the dataset, and without
    one it must be given (ConfigError on ``eod_id``).
    """
    dataset_dir = Path(dataset_dir)
    exporter_cls = EXPORTERS.get(fmt, "format").cls  # an unknown format fails first
    found = dataset_splits(dataset_dir)
    if splits:
        missing = [s for s in splits if s not in found]
        if missing:
            raise DataError(f"{dataset_dir}: no split {', '.join(missing)} (have {', '.join(found)})")
        found = {s: found[s] for s in splits}
    # read from the masks themselves (one byte a token), before the (long) checksum pass and before --out
    # is touched; only where it matters: a format whose reader ignores the mask
    masked = [] if exporter_cls.mask_read else [s for s, p in found.items() if masks_tokens(p)]
    if masked and not allow_unread_loss_mask:
        raise ConfigError("allow_unread_loss_mask",
                          f"{dataset_dir}: split {', '.join(masked)} has a loss mask that is not read by "
                          f"{exporter_cls.mask_reader}, so training would count every token; export as hf or "
                          f"numpy, or pass --allow-unread-loss-mask to export it anyway")
    tok = find_tokenizer(dataset_dir)
    eod_id = _eod_id(fmt, eod_id, tok, dataset_dir, found)
    command = command or f"preschool export {dataset_dir} --format {fmt} --out {out}"
    # the output folder is checked (and locked) before the shards are verified, which reads every byte
    with claim_output(out, command, export_entries, "export", inputs=[dataset_dir, tok]) as out:
        sets = {s: ShardSet(p, verify=verify) for s, p in found.items()}
        return _export(dataset_dir, fmt, out, sets, tok, single=found == {dataset_dir.name: dataset_dir},
                       eod_id=eod_id, masking=None if exporter_cls.mask_read else bool(masked))


def _eod_id(fmt: str, eod_id: int | None, tok: Path | None, dataset_dir: Path, found: dict[str, Path]) -> int | None:
    """The EOD id a Megatron export ends its documents with (None for the other formats), checked
    against the splits' vocabularies before anything is read or written."""
    if fmt != "megatron":
        if eod_id is not None:
            raise ConfigError("eod_id", f"only the megatron format writes EOD tokens (this export is {fmt})")
        return None
    if eod_id is None:
        if tok is None:
            raise ConfigError("eod_id", f"{dataset_dir}: no tokenizer beside the dataset (looked for "
                              f"{layout.tokenizer_dir(dataset_dir)} and {layout.tokenizer_dir(dataset_dir.parent)}) to take "
                              "Megatron's EOD token from; pass --eod-id with the EOS id the data was made with")
        from .tokenizer import load_special_ids

        eod_id = load_special_ids(tok).eos
    vocab = min(int((read_manifest(p / layout.MANIFEST) or {}).get("vocab_size") or 2 ** 31) for p in found.values())
    if not 0 <= eod_id < vocab:
        raise ConfigError("eod_id", f"{eod_id} is not a token id of {dataset_dir} (vocab size {vocab})")
    return eod_id


def _export(dataset_dir: Path, fmt: str, out: Path, sets: dict[str, ShardSet], tok: Path | None,
            single: bool, eod_id: int | None = None, masking: bool | None = None) -> dict:
    """Write the verified shard sets ``sets`` as ``fmt`` into ``out`` (atomically); export.json's content.

    ``masking``: whether a mask the format's reader ignores masks any token (None: not looked at)."""
    entry = EXPORTERS.get(fmt, "format")
    # datatrove's metadata names the tokenizer (Nanotron loads it with AutoTokenizer.from_pretrained): ours
    # travels with the export, so it is named relative to the split folder holding the metadata, which
    # stays right when the export is moved or copied (resolve it against that folder)
    tok_name = f"../{layout.TOKENIZER}" if tok else "unknown"
    options = {"nanotron": {"tokenizer_name": tok_name}, "megatron": {"eod_id": eod_id}}
    exporter = entry.cls(**options.get(fmt, {}))
    info: dict[str, Any] = {
        "format": fmt,
        "source": str(dataset_dir.resolve()),
        "source_content_sha256": None if single else content_sha256(dataset_dir),
        "read": exporter.read_hint,
        "splits": {},
        "code_version": code_version(),
    }
    with atomic_dir(out) as tmp:
        for s, ss in sets.items():
            wrote = exporter.write(ss, tmp / s)
            info["splits"][s] = {"n_rows": ss.n_rows, "row_len": ss.row_len, "seq_len": ss.row_len - 1,
                                 "dtype": ss.dtype.name, "vocab_size": ss.vocab_size,
                                 "has_loss_mask": ss.has_loss_mask, **wrote}
        exporter.finish(tmp, list(sets))
        if any(ss.has_loss_mask for ss in sets.values()):
            info["loss_mask"] = {"read": exporter.mask_read, "by": exporter.mask_reader}
            if masking is not None:
                info["loss_mask"]["masks_tokens"] = masking
        if tok is not None:
            shutil.copytree(tok, layout.tokenizer_dir(tmp))
            from .tokenizer import load_special_ids

            # which ids end documents, start and pad them: the tokenizer's (an HF tokenizer's are not id 0)
            info["tokenizer"] = {"path": layout.TOKENIZER, "sha256": sha256_file(tok / "tokenizer.json"),
                                 "special_ids": load_special_ids(tok).as_dict()}
        write_json(tmp / "export.json", info)
        write_text(tmp / "README.md", _readme(info))
    return info


def _readme(info: dict) -> str:
    lines = [f"# preschool export ({info['format']})", "", f"Source: `{info['source']}`", "",
             f"Read with: `{info['read']}`", ""]
    for s, m in info["splits"].items():
        lines.append(f"- `{s}/`: {m['n_rows']} rows of {m['row_len']} tokens ({m['dtype']}, vocab {m['vocab_size']}"
                     f"{', with loss mask' if m['has_loss_mask'] else ''})")
    if "loss_mask" in info:
        lm = info["loss_mask"]
        lines += ["", f"Loss mask: {'read' if lm['read'] else '**NOT read**'} by {lm['by']}."]
        if lm.get("masks_tokens") is False:
            lines.append("It masks no token (all ones), so every token counts either way.")
    if "tokenizer" in info:
        sp = info["tokenizer"]["special_ids"]
        lines += ["", f"Tokenizer: `tokenizer/` (documents end with EOS id {sp['eos']}; BOS {sp['bos']}, PAD {sp['pad']})"]
    eod = [(s, m["eod_added"]) for s, m in info["splits"].items() if "eod_added" in m]
    if eod:
        eod_id = next(iter(info["splits"].values()))["eod_id"]
        lines += ["", f"Every Megatron document ends with EOD id {eod_id}, added where one did not (cut at a row "
                  "end, or a padded row): " + ", ".join(f"{n} in `{s}/`" for s, n in eod) + "."]
    return "\n".join(lines) + "\n"
