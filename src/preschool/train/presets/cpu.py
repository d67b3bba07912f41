"""CPU-sized presets: ``micro`` (tests), ``tiny-1m``, ``small-6m`` and the CPU ladder rungs ``cpu-<layers>x<width>``
(head dim 32, FFN 3d; the package docstring gives their sizes)."""

from __future__ import annotations

from typing import Any

from ..model import MODEL_PRESETS
from . import trunk


@MODEL_PRESETS.register("micro")
def _micro() -> dict[str, Any]:
    """2 layers, d=64, 2 heads (1 KV): for tests, trains in seconds on CPU."""
    return trunk(64, 2, 2, 1, 128, max_positions=1024)


@MODEL_PRESETS.register("tiny-1m")
def _tiny_1m() -> dict[str, Any]:
    """4 layers, d=128, 4 heads (2 KV), FFN 384: ~1.05M params at vocab 2048 (tied)."""
    return trunk(128, 4, 4, 2, 384)


@MODEL_PRESETS.register("small-6m")
def _small_6m() -> dict[str, Any]:
    """7 layers, d=256, 8 heads (4 KV), FFN 768: ~6.0M params at vocab 2048 (tied)."""
    return trunk(256, 7, 8, 4, 768)


def _register_cpu_rung(layers: int, width: int, kv_heads: int) -> None:
    """One CPU ladder rung ``cpu-<layers>x<width>``: head dim 32, FFN 3d (the tiny-1m conventions)."""

    def shape() -> dict[str, Any]:
        return trunk(width, layers, width // 32, kv_heads, 3 * width)

    shape.__doc__ = (f"CPU ladder rung: {layers} layers, d={width}, {width // 32} heads ({kv_heads} KV), "
                     f"FFN {3 * width}")
    MODEL_PRESETS.register(f"cpu-{layers}x{width}")(shape)


for _layers, _width, _kv in ((2, 32, 1), (4, 64, 1), (3, 96, 1), (3, 128, 2), (5, 192, 3)):
    _register_cpu_rung(_layers, _width, _kv)
