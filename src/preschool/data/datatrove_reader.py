"""datatrove's folder reader plus the loss mask: what a Nanotron export's ``.ds.loss`` files hold.

datatrove's ``DatatroveFolderDataset`` (the reader Nanotron's datatrove loader uses) yields
``input_ids`` (and ``positions``) for windows of ``seq_len + 1`` tokens, and never opens the
``.ds.loss`` file beside each ``.ds``. :class:`MaskedDatatroveFolderDataset` is that reader
with one more key, ``loss_mask`` (bool, one per token of the window): a training loop that
builds its datasets with it (in place of ``DatatroveFolderDataset``) can weight the loss by
the mask. Nanotron itself does not, so ``preschool export --format nanotron`` refuses a masked
set unless ``--allow-unread-loss-mask``.

Needs the ``datatrove`` extra (``pip install 'preschool[datatrove]'``) and torch.
"""

from __future__ import annotations

import numpy as np
import torch
from datatrove.utils.dataset import DatatroveFolderDataset

from ..errors import DataError


class MaskedDatatroveFolderDataset(DatatroveFolderDataset):
    """``DatatroveFolderDataset`` whose items also carry ``loss_mask`` from each file's ``.ds.loss``.

    Same arguments, same windows and order as datatrove's reader; a ``.ds`` without its
    ``.ds.loss`` raises DataError naming the missing file when one of its windows is read.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._loss_files: dict[int, object] = {}  # open .ds.loss handles, by file index

    def __getitem__(self, item):
        data = super().__getitem__(item)  # also points self.current_file at the file holding `item`
        k = self.current_file
        f = self.files[k]
        window = f.seq_len + 1
        fh = self._loss_files.get(k)
        if fh is None:
            path = f.file_path + ".loss"
            if not f.fs.exists(path):
                raise DataError(f"{path}: missing; the export has no loss mask for {f.file_path}")
            fh = self._loss_files[k] = f.fs.open(path, "rb")
        fh.seek((item - self.lens[k]) * window)  # .ds.loss: one byte (bool) per token, in token order
        raw = fh.read(window)
        if len(raw) != window:
            raise DataError(f"{f.file_path}.loss: {len(raw)} bytes for window {item - self.lens[k]}, "
                            f"expected {window} (one per token of {f.file_path})")
        data["loss_mask"] = torch.from_numpy(np.frombuffer(raw, np.bool_).copy())
        return data

    def __del__(self):
        for fh in getattr(self, "_loss_files", {}).values():
            fh.close()
