"""The compartmentalization tiers ``cm-8-32`` ... ``cm-8-512`` and ``cm-1b`` (spec scale.md 4.1)."""

from __future__ import annotations

from typing import Any

from ..model import MODEL_PRESETS
from . import trunk


def _register_compartments_tier(name: str, layers: int, width: int) -> None:
    """One compartmentalization tier (spec scale.md 4.1): head dim 32 as the paper; the SwiGLU FFN
    round(8d/3) keeps the paper's 8 d^2 MLP weights per layer."""

    def shape() -> dict[str, Any]:
        return trunk(width, layers, width // 32, width // 32, round(8 * width / 3))

    shape.__doc__ = f"compartmentalization tier {layers}x{width} ({width // 32} heads of dim 32)"
    MODEL_PRESETS.register(name)(shape)


for _w in (32, 64, 128, 256, 512):
    _register_compartments_tier(f"cm-8-{_w}", 8, _w)
_register_compartments_tier("cm-1b", 24, 1792)  # the paper's "1B" tier
