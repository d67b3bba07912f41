import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATORS
from preschool.synthetic.write import SymbolEncoder

SMALL = {"grid": 8, "warmup": 4, "filter_steps": 6, "length": 4 * 18}


def test_defaults_follow_verify_ppt():
    g = GENERATORS.build("nca", {})
    assert (g.cfg.grid, g.cfg.n_states, g.cfg.temperature, g.cfg.warmup) == (12, 10, 1e-4, 10)
    assert g.frame_len == 38 and g.cfg.length == 37 * 38 and g.vocab_size == 10002


def test_every_document_rule_is_in_the_band_and_frames_follow_it():
    g = GENERATORS.build("nca", SMALL)
    for it in g.items(0, 6):
        g.check(it)  # recomputes the filter ratio and the rule's next-state argmax
        assert 0.5 <= it.meta["ratio"] <= 1.0


def test_band_and_compressor_change_which_rules_pass():
    lo = GENERATORS.build("nca", {**SMALL, "band_lo": 0.0, "band_hi": 0.3})
    hi = GENERATORS.build("nca", {**SMALL, "band_lo": 0.6, "band_hi": 1.0, "compressor": "gzip"})
    for g in (lo, hi):
        for it in g.items(0, 4):
            g.check(it)
    assert max(it.meta["ratio"] for it in lo.items(0, 4)) <= 0.3
    assert min(it.meta["ratio"] for it in hi.items(0, 4)) >= 0.6


def test_impossible_band_fails_with_a_data_error():
    from preschool.errors import DataError

    g = GENERATORS.build("nca", {**SMALL, "band_lo": 5.0, "band_hi": 6.0, "max_attempts": 3})
    with pytest.raises(DataError, match="band"):
        g.item(0)


def test_batch_equals_single_items():
    g = GENERATORS.build("nca", SMALL)
    batch = list(g.items(3, 9))
    for i, it in zip(range(3, 9), batch):
        assert np.array_equal(g.item(i).symbols, it.symbols)


def test_split_encoding_round_trips_and_fits_three_digits():
    p = GENERATORS.build("nca", SMALL)
    s = GENERATORS.build("nca", {**SMALL, "encoding": "split", "max_digits": 3, "length": 4 * 34})
    assert s.vocab_size == 202
    a, b = p.item(0), s.item(0)
    assert np.array_equal(p.decode_frames(a.symbols), s.decode_frames(b.symbols))  # same trajectory
    assert b.symbols.max() <= 201
    s.check(b)


def test_patch_values_follow_the_position_rule():
    g = GENERATORS.build("nca", {**SMALL, "grid": 2, "length": 3})
    state = np.array([[1, 2, 3, 4]])  # one 2x2 grid, row-major cells
    assert g.patch_values(state).tolist() == [[1 + 20 + 300 + 4000]]


def test_text_render_refuses_patch_ids_and_names_the_field(number_tokenizer):
    g = GENERATORS.build("nca", SMALL)
    enc = SymbolEncoder.text(number_tokenizer)
    with pytest.raises(ConfigError) as e:
        enc.check_generator(g)
    assert e.value.field == "render" and "split" in str(e.value)
    with pytest.raises(ConfigError) as e:
        GENERATORS.build("nca", {"max_digits": 3})
    assert e.value.field == "encoding"


def test_marker_loss_off_masks_grid_markers():
    g = GENERATORS.build("nca", {**SMALL, "marker_loss": False})
    it = g.item(0)
    markers = (it.symbols == g.grid_open) | (it.symbols == g.grid_close)
    assert np.array_equal(it.loss_mask == 0, markers)


def test_lee2026_preset_compresses_int32_tokens_as_the_original():
    import gzip

    from preschool.synthetic.base import GENERATOR_PRESETS

    preset = GENERATOR_PRESETS["nca_lee2026"]
    g = GENERATORS.build(preset.generator, {**preset.params, **SMALL})
    assert g.cfg.compress_dtype == "int32" and g.cfg.compressor == "gzip"
    assert GENERATORS.build("nca", SMALL).cfg.compress_dtype == "uint16"  # verify-ppt's default
    it = g.item(0)
    g.check(it)
    assert 0.5 < it.meta["ratio"] < 1.0
    frames = g.decode_frames(it.symbols)[: g.cfg.filter_steps]
    tokens = g.patch_values(frames)
    raw = tokens.astype(np.int32).tobytes()
    assert len(raw) == 4 * tokens.size  # the original's token array: 4 bytes per patch, not 2
    assert g.ratio(frames) == pytest.approx(len(gzip.compress(raw, 9, mtime=0)) / len(raw))
    narrow = tokens.astype(np.uint16).tobytes()
    assert g.ratio(frames) != pytest.approx(len(gzip.compress(narrow, 9, mtime=0)) / len(narrow))
    with pytest.raises(ConfigError, match="compress_dtype"):
        GENERATORS.build("nca", {"compress_dtype": "uint8"})


def test_lee2026_preset_has_the_original_sequence_length():
    """The original trains on 1024-token sequences (nca_prepretraining.sh); 1406 is verify-ppt's 37 frames."""
    from preschool.synthetic.base import GENERATOR_PRESETS

    assert GENERATOR_PRESETS["nca_lee2026"].params["length"] == 1024
    assert GENERATOR_PRESETS["nca_verify_ppt"].params["length"] == 1406
