"""The scale-ladder presets (train/presets.py): CPU rungs from below micro to small-6m, gpt-60m under the GPU ladder."""

import pytest

from preschool.train.model import MODEL_PRESETS, ModelConfig, describe


def _non_embedding(preset: str) -> int:
    return describe(ModelConfig(preset=preset), 2048)["params_non_embedding"]


@pytest.mark.parametrize("preset, layers, d, kv, expect", [
    # per Qwen2 layer: q (d x d + d), k and v (d x kv*32 + kv*32 each), o (d x d), SwiGLU 3 x d x 3d, two norms
    # (2d); then the final norm (d). cpu-4x64: 4 x (4,160 + 2 x 2,080 + 4,096 + 36,864 + 128) + 64
    ("cpu-2x32", 2, 32, 1, 26_976),
    ("cpu-4x64", 4, 64, 1, 197_696),
    ("cpu-3x96", 3, 96, 1, 323_712),
    ("cpu-3x128", 3, 128, 2, 591_488),
    ("cpu-5x192", 5, 192, 3, 2_215_872),
])
def test_cpu_rungs_have_their_hand_counted_size(preset, layers, d, kv, expect):
    per_layer = (d * d + d) + 2 * (d * kv * 32 + kv * 32) + d * d + 3 * d * 3 * d + 2 * d
    assert layers * per_layer + d == expect == _non_embedding(preset)


def test_the_ladder_presets_sit_between_micro_and_small_6m_and_under_the_gpu_ladder():
    """cpu-2x32 is the one CPU rung below micro (a ladder's smallest, where micro is too costly to be the
    second-largest); the others sit between micro and small-6m."""
    sizes = [_non_embedding(p) for p in ("cpu-2x32", "micro", "cpu-4x64", "cpu-3x96", "cpu-3x128", "tiny-1m", "cpu-5x192",
                                         "small-6m")]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    gpu = [describe(ModelConfig(preset=p), 49152)["params_total"] for p in ("gpt-60m", "gpt-125m", "smollm-360m",
                                                                            "gpt-1b")]
    assert gpu == sorted(gpu) and 60e6 < gpu[0] < 66e6
    assert {"cpu-4x64", "cpu-3x96", "cpu-3x128", "cpu-5x192", "gpt-60m"} <= set(MODEL_PRESETS.names())
