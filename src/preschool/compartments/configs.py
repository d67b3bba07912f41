"""The compartments extension package's config dataclasses, torch-free.

``preschool plan`` and config validation read them without importing torch (seconds on a
laptop); the code that uses them (``model.py``, ``infonce.py``) re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..config import check

COPY_PARTS = ("embeddings", "lm_head", "compartment_embeddings")


@dataclass
class CompartmentModelConfig:
    """Model-side options of a compartment arm."""

    compartment_embedding: bool = True
    copy_init: list[str] = field(default_factory=list)  # subset of COPY_PARTS applied after init
    init_std: float = 0.02

    def validate(self) -> None:
        for i, p in enumerate(self.copy_init or []):
            check(p in COPY_PARTS, f"copy_init[{i}]", f"must be one of {list(COPY_PARTS)}, got {p!r}")
        check(self.init_std > 0, "init_std", f"must be > 0, got {self.init_std}")


@dataclass
class InfoNCEConfig:
    """The contrastive auxiliary loss; every default is the paper's (tau 0.1, lambda 1, n 32, its layer)."""

    weight: float = 1.0
    temperature: float = 0.1
    pair_batch: int = 32
    layer: int = 0  # 1-based block index; 0 = the reference's 0-based n_layer // 2, i.e. block n_layer // 2 + 1
    span_len: int = 0  # tokens per span; 0 = the training context
    compartment_embedding: bool = False  # True = compartment vectors on the contrastive path too (ours before)
    spans: Literal["shards", "batch"] = "shards"  # shards = own spans, one pair per call (paper); batch = ours before
    seed: int = 0

    def validate(self) -> None:
        check(self.weight >= 0, "weight", f"must be >= 0, got {self.weight}")
        check(self.temperature > 0, "temperature", f"must be > 0, got {self.temperature}")
        check(self.pair_batch >= 2, "pair_batch", f"needs >= 2 pairs for negatives, got {self.pair_batch}")
        check(self.layer >= 0, "layer", f"must be >= 0 (0 = middle), got {self.layer}")
        check(self.span_len >= 0, "span_len", f"must be >= 0, got {self.span_len}")
        check(self.spans in ("shards", "batch"), "spans", f"must be 'shards' or 'batch', got {self.spans!r}")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
