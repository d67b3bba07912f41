"""Presentations: the same base vocabulary shown in c disjoint (or scrambled) id ranges.

Follows Howe & Wingate, "Language models struggle with compartmentalization"
(arXiv 2605.19284; code vinhowe/compartmentalization, ``src/data.py``):

- ``offset`` (the paper's default): base token ``t`` shown in compartment ``i``
  becomes id ``t + i*V``; the model vocabulary is ``c*V + 1`` and the last id,
  ``c*V``, is the TRANSLATION marker. No id is shared between compartments, so
  anything the compartments share must be learned in the trunk.
- ``permute`` (the paper's alternative, off in its configs): compartment ``i``
  relabels the base vocabulary with a seeded permutation; the vocabulary stays
  ``V + 1`` (marker ``V``). Departure: compartment 0 is the identity, so c=1 is
  exactly the unmodified data; compartment ``i > 0`` uses
  ``default_rng([seed, i, salt])``.

Both are exact bijections on ids: :meth:`Presentation.decode` inverts
:meth:`Presentation.encode`. In offset mode the compartment of an id is
recoverable from the id alone (``id // V``), which is what lets the model add a
per-compartment embedding without an extra input channel (``compartments.model``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config import check
from ..errors import DataError
from ..registry import Registry

# the presentations by name, one per file of compartments/presentations/ (offset, permute)
PRESENTATIONS = Registry("presentation", packages=("preschool.compartments.presentations",),
                         plugin_module="presentations")


@dataclass
class PresentationConfig:
    """How c compartments are presented; ``base_vocab`` is V (usually taken from the shard set)."""

    n_compartments: int = 2
    base_vocab: int = 0  # 0 = fill in from the data
    seed: int = 0  # permute mode only

    def validate(self) -> None:
        check(self.n_compartments >= 1, "n_compartments", f"must be >= 1, got {self.n_compartments}")
        check(self.base_vocab >= 0, "base_vocab", f"must be >= 0 (0 = from the data), got {self.base_vocab}")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")


class Presentation:
    """Maps base ids to compartment ids and back. Subclasses: ``presentations/offset.py``, ``permute.py``."""

    registry_name = "?"
    mode: Literal["offset", "permute"]

    def __init__(self, cfg: PresentationConfig):
        check(cfg.base_vocab >= 1, "base_vocab", "must be set (>= 1) before building a presentation")
        self.cfg = cfg
        self.c = cfg.n_compartments
        self.V = cfg.base_vocab

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    @property
    def translation_id(self) -> int:
        """The TRANSLATION marker id (the last id of the vocabulary)."""
        return self.vocab_size - 1

    def _check(self, ids: np.ndarray, compartment: int) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if not 0 <= compartment < self.c:
            raise DataError(f"compartment {compartment} out of range [0, {self.c})")
        if ids.size and (ids.min() < 0 or ids.max() >= self.V):
            raise DataError(f"base token id out of range [0, {self.V}): {ids.min()}..{ids.max()}")
        return ids

    def encode(self, ids: np.ndarray, compartment: int) -> np.ndarray:
        """Base ids (any shape) rendered in ``compartment``."""
        raise NotImplementedError

    def decode(self, ids: np.ndarray, compartment: int | None = None) -> np.ndarray:
        """Inverse of :meth:`encode`. The marker id maps to -1."""
        raise NotImplementedError

    def manifest(self) -> dict:
        return {"mode": self.mode, "n_compartments": self.c, "base_vocab": self.V,
                "vocab_size": self.vocab_size, "translation_id": self.translation_id, "seed": self.cfg.seed}


def build_presentation(mode: str, n_compartments: int, base_vocab: int, seed: int = 0) -> Presentation:
    """Shortcut: ``build_presentation("offset", c, V)``."""
    return PRESENTATIONS.build(mode, {"n_compartments": n_compartments, "base_vocab": base_vocab, "seed": seed},
                               field="presentation")
