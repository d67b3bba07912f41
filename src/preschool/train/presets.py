"""The model presets: trunk shapes by name (``model.preset``; ``MODEL_PRESETS`` in ``train/model.py``).

A preset fixes the trunk shape; the vocabulary comes from the tokenizer at build
time. Shapes follow:

- ``gpt-500m`` / ``gpt-1b``: the verify-ppt Qwen2 table (Nanotron configs,
  spec synthetic_ppt.md A.4): 1024x32 (16 heads, FFN 2816) and 1536x36
  (12 heads, FFN 4096), 4 KV heads, RoPE theta 50k, tied embeddings.
- ``gpt-3b`` / ``gpt-7b``: the verify-ppt 3B (2560x40, 20 heads, FFN 6912) and
  7B (3584x28, 28 heads, FFN 18944, RMSNorm eps 1e-6) rows, 4 KV heads (spec
  scale.md 1.1).
- ``gpt-125m``: SmolLM-135M (576x30, 9 heads, 3 KV heads, FFN 1536, tied);
  ``smollm-360m``: SmolLM-360M (960x32, 15 heads, 5 KV heads, FFN 2560), the
  Beyond Perplexity sizes (spec scale.md 3.1).
- ``l2t-500m`` / ``l2t-1b``: the L2T code's Qwen2 shapes (spec scale.md 2.1):
  1024x24 with 24 heads of dim 42 (query width 1008, not the hidden size),
  2 KV heads, FFN 4864; 1728x30 with 32 heads of dim 54, 4 KV heads, FFN 4752;
  RoPE theta 1e6, RMSNorm eps 1e-6.
- ``cm-8-32`` ... ``cm-8-512``, ``cm-1b``: the compartmentalization tiers
  (spec scale.md 4.1; layers x width, head dim 32). The paper's trunk is a
  GPT with a 4x GELU MLP (8 d^2 weights per layer); ours is the same family's
  SwiGLU MLP with FFN = round(8d/3), which has the same 8 d^2 weights, so
  parameter counts and FLOPs match the paper's tiers.
- ``tiny-1m`` / ``small-6m`` / ``micro``: our own scaled-down shapes
  (head dim 32, 2:1 query:KV heads, FFN = 3d) sized for CPU experiments:
  ~1M and ~6M parameters in total at vocab 2048, and a 2-layer d=64 model
  for tests.
- ``cpu-2x32`` / ``cpu-4x64`` / ``cpu-3x96`` / ``cpu-3x128`` / ``cpu-5x192``:
  rungs of a CPU scale ladder (docs/ladder.md), named layers x width, the
  same conventions (head dim 32, FFN = 3d; d=32 has 1 head, d=96 has 3 heads
  on 1 KV head). Non-embedding parameters 27k / 198k / 324k / 591k / 2.2M
  (``micro`` 74k, ``tiny-1m`` 789k, ``small-6m`` 5.5M): ``cpu-2x32`` is the
  one below ``micro``, the bottom of a ladder whose top a 2-core CPU can
  afford only at ``cpu-3x96``.
- ``gpt-60m``: the bottom of the GPU ladder 60M / 125M / 360M / 1B
  (``gpt-60m``, ``gpt-125m``, ``smollm-360m``, ``gpt-1b``; examples/paper/
  verify_ppt_ladder.yaml): 12 x 512, 8 heads of 64 (4 KV), FFN 1536, tied;
  ~63M parameters at a 49k vocabulary (38M non-embedding).

A preset is a function returning the HF config fields of the shape, registered with
``@MODEL_PRESETS.register("<name>")``; its docstring's first line is its summary.
"""

from __future__ import annotations

from typing import Any

from .model import MODEL_PRESETS


def _shape(hidden: int, layers: int, heads: int, kv_heads: int, ffn: int, rope_theta: float = 10000.0,
           max_positions: int = 2048, **extra: Any) -> dict[str, Any]:
    return {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": ffn,
        "rope_theta": rope_theta,
        "max_position_embeddings": max_positions,
        **extra,
    }


@MODEL_PRESETS.register("micro")
def _micro() -> dict[str, Any]:
    """2 layers, d=64, 2 heads (1 KV): for tests, trains in seconds on CPU."""
    return _shape(64, 2, 2, 1, 128, max_positions=1024)


@MODEL_PRESETS.register("tiny-1m")
def _tiny_1m() -> dict[str, Any]:
    """4 layers, d=128, 4 heads (2 KV), FFN 384: ~1.05M params at vocab 2048 (tied)."""
    return _shape(128, 4, 4, 2, 384)


@MODEL_PRESETS.register("small-6m")
def _small_6m() -> dict[str, Any]:
    """7 layers, d=256, 8 heads (4 KV), FFN 768: ~6.0M params at vocab 2048 (tied)."""
    return _shape(256, 7, 8, 4, 768)


def _register_cpu_rung(layers: int, width: int, kv_heads: int) -> None:
    """One CPU ladder rung ``cpu-<layers>x<width>``: head dim 32, FFN 3d (the tiny-1m conventions)."""

    def shape() -> dict[str, Any]:
        return _shape(width, layers, width // 32, kv_heads, 3 * width)

    shape.__doc__ = (f"CPU ladder rung: {layers} layers, d={width}, {width // 32} heads ({kv_heads} KV), "
                     f"FFN {3 * width}")
    MODEL_PRESETS.register(f"cpu-{layers}x{width}")(shape)


for _layers, _width, _kv in ((2, 32, 1), (4, 64, 1), (3, 96, 1), (3, 128, 2), (5, 192, 3)):
    _register_cpu_rung(_layers, _width, _kv)


@MODEL_PRESETS.register("gpt-60m")
def _gpt_60m() -> dict[str, Any]:
    """GPU ladder bottom: 12 layers, d=512, 8 heads of 64 (4 KV), FFN 1536 (~63M params at vocab 49k)."""
    return _shape(512, 12, 8, 4, 1536, max_positions=4096)


@MODEL_PRESETS.register("gpt-125m")
def _gpt_125m() -> dict[str, Any]:
    """SmolLM-135M shape: 30 layers, d=576, 9 heads (3 KV), FFN 1536."""
    return _shape(576, 30, 9, 3, 1536, max_positions=4096)


@MODEL_PRESETS.register("gpt-500m")
def _gpt_500m() -> dict[str, Any]:
    """verify-ppt 500M: 32 layers, d=1024, 16 heads (4 KV), FFN 2816, RoPE 50k."""
    return _shape(1024, 32, 16, 4, 2816, rope_theta=50000.0, max_positions=4096)


@MODEL_PRESETS.register("gpt-1b")
def _gpt_1b() -> dict[str, Any]:
    """verify-ppt 1B: 36 layers, d=1536, 12 heads (4 KV), FFN 4096, RoPE 50k."""
    return _shape(1536, 36, 12, 4, 4096, rope_theta=50000.0, max_positions=4096)


@MODEL_PRESETS.register("gpt-3b")
def _gpt_3b() -> dict[str, Any]:
    """verify-ppt 3B: 40 layers, d=2560, 20 heads (4 KV), FFN 6912, RoPE 50k."""
    return _shape(2560, 40, 20, 4, 6912, rope_theta=50000.0, max_positions=4096)


@MODEL_PRESETS.register("gpt-7b")
def _gpt_7b() -> dict[str, Any]:
    """verify-ppt 7B: 28 layers, d=3584, 28 heads (4 KV), FFN 18944, RoPE 50k, RMSNorm eps 1e-6."""
    return _shape(3584, 28, 28, 4, 18944, rope_theta=50000.0, max_positions=4096, rms_norm_eps=1e-6)


@MODEL_PRESETS.register("smollm-360m")
def _smollm_360m() -> dict[str, Any]:
    """SmolLM-360M shape (Beyond Perplexity's larger model): 32 layers, d=960, 15 heads (5 KV), FFN 2560."""
    return _shape(960, 32, 15, 5, 2560)


@MODEL_PRESETS.register("l2t-500m")
def _l2t_500m() -> dict[str, Any]:
    """L2T 500M: 24 layers, d=1024, 24 heads of dim 42 (2 KV), FFN 4864, RoPE 1e6."""
    return _shape(1024, 24, 24, 2, 4864, rope_theta=1e6, head_dim=42, rms_norm_eps=1e-6)


@MODEL_PRESETS.register("l2t-1b")
def _l2t_1b() -> dict[str, Any]:
    """L2T 1B: 30 layers, d=1728, 32 heads of dim 54 (4 KV), FFN 4752, RoPE 1e6."""
    return _shape(1728, 30, 32, 4, 4752, rope_theta=1e6, head_dim=54, rms_norm_eps=1e-6)


def _register_compartments_tier(name: str, layers: int, width: int) -> None:
    """One compartmentalization tier (spec scale.md 4.1): head dim 32 as the paper; the SwiGLU FFN
    round(8d/3) keeps the paper's 8 d^2 MLP weights per layer."""

    def shape() -> dict[str, Any]:
        return _shape(width, layers, width // 32, width // 32, round(8 * width / 3))

    shape.__doc__ = f"compartmentalization tier {layers}x{width} ({width // 32} heads of dim 32)"
    MODEL_PRESETS.register(name)(shape)


for _w in (32, 64, 128, 256, 512):
    _register_compartments_tier(f"cm-8-{_w}", 8, _w)
_register_compartments_tier("cm-1b", 24, 1792)  # the paper's "1B" tier
