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

A preset is a function returning the HF config fields of the shape (:func:`trunk` spells them),
registered with ``@MODEL_PRESETS.register("<name>")``; its docstring's first line is its summary.
Each family is one module of this package (``cpu.py``: micro, tiny-1m, small-6m and the CPU ladder
rungs; ``gpt.py``: the GPT / SmolLM shapes; ``l2t.py``; ``compartments.py``), found by the registry's
discovery: a new family is a new file here (or in a plug-in), nothing else to edit.
"""

from __future__ import annotations

from typing import Any


def trunk(hidden: int, layers: int, heads: int, kv_heads: int, ffn: int, rope_theta: float = 10000.0,
          max_positions: int = 2048, **extra: Any) -> dict[str, Any]:
    """The HF config fields of a trunk shape (``extra``: any other field, e.g. ``head_dim``)."""
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
