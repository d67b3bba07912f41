"""permute: compartment i relabels the base vocabulary with a seeded permutation (see ``compartments/presentation.py``)."""

from __future__ import annotations

import numpy as np

from ...errors import DataError
from ...seeds import COMPARTMENT_PERMUTATION
from ..presentation import PRESENTATIONS, Presentation, PresentationConfig


@PRESENTATIONS.register("permute", config=PresentationConfig)
class PermutedPresentation(Presentation):
    """Compartment i relabels the base vocabulary with a seeded permutation; vocabulary V + 1, marker V."""

    mode = "permute"

    def __init__(self, cfg: PresentationConfig):
        super().__init__(cfg)
        self._fwd = np.empty((self.c, self.V), np.int64)
        self._inv = np.empty((self.c, self.V), np.int64)
        for i in range(self.c):
            perm = np.arange(self.V) if i == 0 else np.random.default_rng([cfg.seed, i, COMPARTMENT_PERMUTATION]).permutation(self.V)
            self._fwd[i] = perm
            self._inv[i][perm] = np.arange(self.V)

    @property
    def vocab_size(self) -> int:
        return self.V + 1

    def permutation(self, compartment: int) -> np.ndarray:
        return self._fwd[compartment].copy()

    def encode(self, ids: np.ndarray, compartment: int) -> np.ndarray:
        return self._fwd[compartment][self._check(ids, compartment)]

    def decode(self, ids: np.ndarray, compartment: int | None = None) -> np.ndarray:
        if compartment is None:
            raise DataError("permute presentation: ids do not reveal their compartment; pass compartment=")
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise DataError(f"id out of range [0, {self.vocab_size}): {ids.min()}..{ids.max()}")
        marker = ids == self.translation_id
        return np.where(marker, -1, self._inv[compartment][np.where(marker, 0, ids)])
