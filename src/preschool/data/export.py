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
           each delimited by the separator id;          ``GPTDataset``
           ``loss_mask_document.bin/.idx`` (uint8)
           beside it when the set has a loss mask
nanotron   datatrove's tokenized-file layout:           datatrove ``DatatroveFolderDataset``
           ``NNNNN.ds`` (tokens, little-endian uint16   (``return_positions``: positions from
           or uint32), ``.ds.index`` (uint64 document   ``.ds.index``), windows of ``seq_len + 1``
           ends in tokens), ``.ds.loss`` (bool, when    tokens
           masked), ``.ds.metadata``
numpy      ``part-NNNNN.npy``: a flat headerless         OLMo-core ``NumpyFSLDataset`` (memory-maps
           uint16/uint32 token array (OLMo's            the files with ``dtype``), instances of
           "npy" convention); ``label_mask/label_       ``sequence_length = seq_len + 1``;
           mask-NNNNN.npy`` (bool) when masked and      ``data/olmo_reader.py``'s subclass takes
           ``doc_ends/doc_ends-NNNNN.npy`` (uint64      ``doc_lens`` from ``doc_ends``
           document ends), in folders of their own
========== ============================================ =============================================

Every format keeps the token stream and its order. The window formats keep
the rows: row ``i`` of the shard set is window ``i`` of the export (HF example
``i``, datatrove window ``i``, OLMo instance ``i`` with ``sequence_length =
row_len``). Megatron's GPT dataset shuffles documents and cuts its own windows,
so its sequences are our documents instead. Document ends (for datatrove's
positions, OLMo's ``doc_ends`` and Megatron's documents) come from the
``segments`` array: a document ends where the segment number changes and at
every row end, which is where our trainer resets positions too.

How the documents are separated in their tokens is read from the rows
(:func:`document_separator`): ended by EOS (``separator: eos``) or opened by BOS
with no EOS (``separator: bos``, every experiment with an L2T set); export.json
records it (``documents``), and ``reader`` says what the format's reader must be
told and which of its settings break it (also in the export's README). Megatron's
GPTDataset finds documents by one id alone, restarting positions right after it:
each Megatron document carries the separator once, at its end (EOS data) or its
start (BOS data), and a document that lacks it (cut at a row end, or a padded row)
gets it added there (``export.json``: ``eod_id``, ``eod_at``, ``eod_added``); for BOS
data GPTDataset therefore counts each separator to the span before it, which no
Megatron setting changes. OLMo-core ends a document after each EOS id, so for BOS
data its ``doc_lens`` are right only from
:class:`preschool.data.olmo_reader.DocumentNumpyFSLDataset`.

A loss mask (Dyck, L2T answers) is yielded by the hf and numpy readers
(``load_from_disk``'s ``loss_mask`` column, OLMo-core's ``label_mask_paths``). Megatron's
GPTDataset and datatrove's reader never read theirs, so a set whose mask masks
tokens (a 0 anywhere) is refused for those formats unless ``allow_unread_loss_mask``
(``Exporter.mask_read``); a mask of all ones (the Dyck sets: loss on every token) changes
nothing there and is exported (``export.json``: ``loss_mask.masks_tokens: false``).
:mod:`preschool.data.datatrove_reader` reads ``.ds.loss``.

The export folder is written atomically and carries ``export.json`` (format,
source dataset and its ``content_sha256``, the separator, per-split files, row_len,
dtype, vocab size, how to read it) and a copy of the tokenizer when one is found
beside the dataset (``<dataset>/tokenizer`` or ``<dataset>/../tokenizer``).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from .. import layout
from ..errors import ConfigError, DataError
from ..io import atomic_dir, code_version, read_json, sha256_file, write_json, write_text
from ..outdir import claim_output, read_manifest
from ..registry import Registry
from .shards import FORMAT, ShardSet, content_sha256
from .tokenizer import SpecialIds, load_special_ids

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


def shard_blocks(ss: ShardSet, names: list[str]) -> Iterator[tuple[int, int, dict[str, np.ndarray]]]:
    """:func:`iter_blocks` with, for each block, the offset of its first token in its shard's file:
    ``(shard index, token offset, block)`` (exporters that write one file per shard count from there)."""
    shard, offset = -1, 0
    for k, block in iter_blocks(ss, names):
        if k != shard:
            shard, offset = k, 0
        yield k, offset, block
        offset += block[names[0]].size


def document_separator(sets: Iterable[ShardSet], ids: SpecialIds | None) -> dict[str, Any]:
    """How the documents of ``sets`` are told apart in their tokens, read from the rows themselves:
    ``{"separator": "eos" | "bos" | None, "separator_id": id or None}``.

    Where the segment number changes inside a row, one document ends and the next starts: the
    documents end with the separator (``eos``, id ``ids.eos``) when the token before every such change
    is it, and open with it (``bos``, id ``ids.prefix``) when the token at every change is it; padding
    after a row's last document (a run of ``ids.pad`` to the row end, the L2T packer's) is not a
    document that must open with BOS. Both (documents between BOS and EOS) count as ``eos``; neither,
    or ``ids`` None (no tokenizer to take them from), gives None. Sets without any change inside a row
    are ``bos`` when each opens with BOS, else ``eos``. Reads tokens and segments a block at a time.
    """
    none = {"separator": None, "separator_id": None}
    if ids is None:
        return none
    eos, bos, pad = ids.eos, ids.prefix, ids.pad
    ends_eos = opens_bos = first_bos = True
    changes = 0
    for ss in sets:
        names = ["tokens"] + (["segments"] if "segments" in ss.array_names else [])
        first = True
        for _, block in iter_blocks(ss, names):
            toks = block["tokens"]
            if first:
                first_bos, first = first_bos and bool(toks[0, 0] == bos), False
            if "segments" not in block:
                break  # no document ends inside its rows: only its first token tells
            seg = block["segments"]
            r, p = np.nonzero(seg[:, 1:] != seg[:, :-1])
            p = p + 1  # the first token of the document that starts there
            if not r.size:
                continue
            changes += r.size
            ends_eos = ends_eos and bool((toks[r, p - 1] == eos).all())
            opened = toks[r, p] == bos
            if opens_bos and not opened.all():
                not_pad = toks != pad
                pad_from = np.where(not_pad.any(1), toks.shape[1] - np.argmax(not_pad[:, ::-1], axis=1), 0)
                opened |= p >= pad_from[r]
            opens_bos = opens_bos and bool(opened.all())
            if not ends_eos and not opens_bos:
                return none
    if changes:
        kind = "eos" if ends_eos else "bos"
    else:
        kind = "bos" if first_bos else "eos"
    return {"separator": kind, "separator_id": int(eos if kind == "eos" else bos)}


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
    """Writes one split (a shard set) into a folder; ``write`` returns what it wrote (for export.json).

    ``documents`` (set before the first ``write``) is :func:`document_separator`'s answer for the
    export's splits; ``reader`` says, for export.json and the README, how the format's reader is called
    and told about those documents."""

    registry_name: str
    read_hint: str = ""
    # whether the format's usual reader (``mask_reader``) yields a set's loss mask; where it does not, a
    # masked set is refused unless the user allows it (training there would count every token's loss)
    mask_read: bool = True
    mask_reader: str = ""
    documents: dict[str, Any] = {"separator": None, "separator_id": None}

    def write(self, ss: ShardSet, out: Path) -> dict[str, Any]:
        raise NotImplementedError

    def finish(self, out: Path, splits: list[str]) -> None:
        """Top-level files of the export, after every split is written."""

    def reader(self, info: dict[str, Any]) -> dict[str, Any]:
        """How to read the export ``info`` describes (export.json's content so far): ``call`` (the reader
        call, ``OUT`` the export folder), ``settings`` (what the reader must be given), ``never``
        (settings that break it: name -> why) and ``boundaries`` (what the reader makes of our documents)."""
        return {"call": self.read_hint, "settings": {}, "never": {}, "boundaries": ""}


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
    and whether it masks any token. ``eod_id`` (megatron only): the id that delimits Megatron's
    documents, looked for as the rows' separator; default the separator the tokenizer found beside the
    dataset names (its EOS, or BOS for BOS-separated rows), and without one it must be given (ConfigError
    on ``eod_id``). export.json's ``documents`` and ``reader`` say how documents are separated and how
    the format's reader must be called.
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
    _check_eod_id(fmt, eod_id, tok, dataset_dir, found)
    command = command or f"preschool export {dataset_dir} --format {fmt} --out {out}"
    # the output folder is checked (and locked) before the shards are verified, which reads every byte
    with claim_output(out, command, export_entries, "export", inputs=[dataset_dir, tok]) as out:
        sets = {s: ShardSet(p, verify=verify) for s, p in found.items()}
        return _export(dataset_dir, fmt, out, sets, tok, single=found == {dataset_dir.name: dataset_dir},
                       eod_id=eod_id, masking=None if exporter_cls.mask_read else bool(masked))


def _check_eod_id(fmt: str, eod_id: int | None, tok: Path | None, dataset_dir: Path, found: dict[str, Path]) -> None:
    """Refuse, before anything is read or written, an ``eod_id`` for a format that writes none, one
    outside the splits' vocabularies, and a Megatron export with neither it nor a tokenizer to read the
    separator's id from."""
    if fmt != "megatron":
        if eod_id is not None:
            raise ConfigError("eod_id", f"only the megatron format writes EOD tokens (this export is {fmt})")
        return
    if eod_id is None:
        if tok is None:
            raise ConfigError("eod_id", f"{dataset_dir}: no tokenizer beside the dataset (looked for "
                              f"{layout.tokenizer_dir(dataset_dir)} and {layout.tokenizer_dir(dataset_dir.parent)}) to take "
                              "Megatron's EOD token from; pass --eod-id with the id that separates its documents (the EOS "
                              "it was made with, or its BOS for BOS-separated data)")
        return
    vocab = min(int((read_manifest(p / layout.MANIFEST) or {}).get("vocab_size") or 2 ** 31) for p in found.values())
    if not 0 <= eod_id < vocab:
        raise ConfigError("eod_id", f"{eod_id} is not a token id of {dataset_dir} (vocab size {vocab})")


def _export(dataset_dir: Path, fmt: str, out: Path, sets: dict[str, ShardSet], tok: Path | None,
            single: bool, eod_id: int | None = None, masking: bool | None = None) -> dict:
    """Write the verified shard sets ``sets`` as ``fmt`` into ``out`` (atomically); export.json's content.

    ``masking``: whether a mask the format's reader ignores masks any token (None: not looked at).
    ``eod_id``: the id the user named for Megatron's EOD; it is then the separator looked for."""
    entry = EXPORTERS.get(fmt, "format")
    special = load_special_ids(tok) if tok is not None else None
    ids = SpecialIds(eos=eod_id, bos=None, pad=eod_id) if eod_id is not None else special
    documents = document_separator(sets.values(), ids)
    # datatrove's metadata names the tokenizer (Nanotron loads it with AutoTokenizer.from_pretrained): ours
    # travels with the export, so it is named relative to the split folder holding the metadata, which
    # stays right when the export is moved or copied (resolve it against that folder)
    tok_name = f"../{layout.TOKENIZER}" if tok else "unknown"
    # Megatron tells documents apart by one id: the separator where the rows show one, else the EOS
    megatron = {"eod_id": documents["separator_id"] if documents["separator"] else (ids.eos if ids else None),
                "opens": documents["separator"] == "bos"}
    options = {"nanotron": {"tokenizer_name": tok_name}, "megatron": megatron}
    exporter = entry.cls(**options.get(fmt, {}))
    exporter.documents = documents
    info: dict[str, Any] = {
        "format": fmt,
        "source": str(dataset_dir.resolve()),
        "source_content_sha256": None if single else content_sha256(dataset_dir),
        "documents": documents,
        "splits": {},
        "code_version": code_version(),
    }
    if special is not None:
        # which ids end documents, start and pad them: the tokenizer's (an HF tokenizer's are not id 0)
        info["tokenizer"] = {"path": layout.TOKENIZER, "sha256": sha256_file(tok / "tokenizer.json"),
                             "special_ids": special.as_dict()}
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
        info["reader"] = exporter.reader(info)
        info["read"] = info["reader"]["call"]  # the one-line form earlier exports had
        if tok is not None:
            shutil.copytree(tok, layout.tokenizer_dir(tmp))
        write_json(tmp / "export.json", info)
        write_text(tmp / "README.md", _readme(info))
    return info


def _separator_phrase(documents: dict[str, Any]) -> str:
    """How the documents are separated, in words (the README's line)."""
    sep, i = documents["separator"], documents["separator_id"]
    if sep == "eos":
        return f"documents end with EOS id {i} (separator: eos)"
    if sep == "bos":
        return f"documents open with BOS id {i} and no EOS closes them (separator: bos)"
    return "no separator id was found in the rows (no tokenizer to name one, or documents not marked by one)"


def _readme(info: dict) -> str:
    reader = info["reader"]
    lines = [f"# preschool export ({info['format']})", "", f"Source: `{info['source']}`", "",
             f"Read with: `{reader['call']}`", ""]
    for s, m in info["splits"].items():
        lines.append(f"- `{s}/`: {m['n_rows']} rows of {m['row_len']} tokens ({m['dtype']}, vocab {m['vocab_size']}"
                     f"{', with loss mask' if m['has_loss_mask'] else ''})")
    lines += ["", f"Separator: {_separator_phrase(info['documents'])}."]
    if reader["boundaries"]:
        lines += ["", reader["boundaries"]]
    if reader["settings"]:
        lines += ["", "Give the reader: " + ", ".join(f"`{k}={v!r}`" for k, v in reader["settings"].items()) + "."]
    if reader["never"]:
        lines += ["", "Never set:"] + [f"- `{k}`: {why}" for k, why in reader["never"].items()]
    if "loss_mask" in info:
        lm = info["loss_mask"]
        lines += ["", f"Loss mask: {'read' if lm['read'] else '**NOT read**'} by {lm['by']}."]
        if lm.get("masks_tokens") is False:
            lines.append("It masks no token (all ones), so every token counts either way.")
    if "tokenizer" in info:
        sp = info["tokenizer"]["special_ids"]
        lines += ["", f"Tokenizer: `tokenizer/` (special ids: BOS {sp['bos']}, EOS {sp['eos']}, PAD {sp['pad']})"]
    eod = [(s, m["eod_added"]) for s, m in info["splits"].items() if "eod_added" in m]
    if eod:
        m = next(iter(info["splits"].values()))
        where = ("opens with the separator id {i}, put before each document a row end cut (its rest opens a row)"
                 if m.get("eod_at") == "start" else
                 "ends with EOD id {i}, added where one did not (cut at a row end, or a padded row)")
        lines += ["", "Every Megatron document " + where.format(i=m["eod_id"]) + ": "
                  + ", ".join(f"{n} in `{s}/`" for s, n in eod) + "."]
    return "\n".join(lines) + "\n"
