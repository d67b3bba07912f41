"""offset: compartment i shows base token t as t + i*V (the paper's default; see ``compartments/presentation.py``)."""

from __future__ import annotations

import numpy as np

from ...errors import DataError
from ..presentation import PRESENTATIONS, Presentation, PresentationConfig


@PRESENTATIONS.register("offset", config=PresentationConfig)
class OffsetPresentation(Presentation):
    """Compartment i shows base token t as t + i*V; vocabulary c*V + 1, marker c*V (Howe & Wingate)."""

    mode = "offset"

    @property
    def vocab_size(self) -> int:
        return self.c * self.V + 1

    def encode(self, ids: np.ndarray, compartment: int) -> np.ndarray:
        return self._check(ids, compartment) + compartment * self.V

    def compartment_of(self, ids: np.ndarray) -> np.ndarray:
        """Compartment of each id; the marker gets -1."""
        ids = np.asarray(ids, dtype=np.int64)
        out = ids // self.V
        return np.where(ids == self.translation_id, -1, out)

    def decode(self, ids: np.ndarray, compartment: int | None = None) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise DataError(f"id out of range [0, {self.vocab_size}): {ids.min()}..{ids.max()}")
        comp = self.compartment_of(ids)
        if compartment is not None:
            bad = (comp != compartment) & (comp >= 0)
            if bad.any():
                raise DataError(f"ids {ids[bad][:5].tolist()} are not in compartment {compartment}")
        return np.where(comp < 0, -1, ids % self.V)
