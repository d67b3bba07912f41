"""Contract tests run over every registered generator (new generators are picked up automatically)."""

import dataclasses

import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATOR_PRESETS, GENERATORS
from preschool.synthetic.base import spans_mask
from preschool.synthetic.write import SymbolEncoder, fit_generator, write_generator_shards
from preschool.data.shards import ShardSet
from preschool.data.tokenizer import eos_id

# Small but non-trivial settings so the whole file runs in seconds; a generator
# without an entry runs with its defaults.
SMALL = {
    "shuffle_dyck": {"k": 8, "length": 96, "max_depth": 6},
    "mp_struct_core": {"length": 128},
    "nca": {"length": 128, "grid": 8, "warmup": 4, "filter_steps": 4},
    "set": {"length": 96, "vocab": 40},
    "stack": {"n_symbols": 20, "n_ops": 24, "length": 64},
    "queue": {"n_symbols": 20, "n_ops": 24, "length": 64},
    "depo": {"n_nodes": 6, "max_hops": 3, "n_queries": 3, "length": 96},
    "retrieval": {"n_tracked": 2, "n_distractors": 3, "gap_max": 6, "length": 96},
}
NAMES = GENERATORS.names()


def build(name, **over):
    return GENERATORS.build(name, {**SMALL.get(name, {}), **over})


def test_registry_has_every_task():
    assert {"shuffle_dyck", "mp_struct_core", "nca", "set", "stack", "queue", "depo", "retrieval"} <= set(NAMES)
    for preset in GENERATOR_PRESETS:  # every preset builds
        GENERATORS.build(preset.cls.generator, dict(preset.cls.params))


@pytest.mark.parametrize("name", NAMES)
def test_items_deterministic_exact_length_and_valid(name):
    gen = build(name)
    again = build(name)
    other_seed = build(name, seed=1)
    n = 12
    items = list(gen.items(0, n))
    differs = 0
    for i, it in enumerate(items):
        assert it.symbols.dtype == np.int64
        assert len(it.symbols) == gen.length, "documents must be exactly `length` symbols"
        assert 0 <= it.symbols.min() and it.symbols.max() < gen.vocab_size
        gen.check(it)
        twin = again.item(i)  # a fresh instance, single item: same bytes as the batch
        assert twin.symbols.tobytes() == it.symbols.tobytes()
        assert (twin.loss_mask is None) == (it.loss_mask is None)
        if it.loss_mask is not None:
            assert twin.loss_mask.tobytes() == it.loss_mask.tobytes()
        differs += other_seed.item(i).symbols.tobytes() != it.symbols.tobytes()
    assert differs >= n - 1, "another seed must give other items"
    assert items[0].symbols.tobytes() != items[1].symbols.tobytes()


@pytest.mark.parametrize("name", NAMES)
def test_loss_mask_covers_exactly_the_answer(name):
    gen = build(name)
    for it in gen.items(0, 8):
        spans = it.meta.get("answer_spans")
        if it.loss_mask is None:
            continue  # loss on every symbol (the task's reference setting)
        assert it.loss_mask.dtype == np.uint8 and len(it.loss_mask) == len(it.symbols)
        if spans is not None:
            assert np.array_equal(it.loss_mask, spans_mask(len(it.symbols), spans))
            assert it.loss_mask.sum() > 0


@pytest.mark.parametrize("name", NAMES)
def test_check_catches_a_corrupted_item(name):
    gen = build(name)
    it = gen.item(3)
    s = it.symbols.copy()
    spans = it.meta.get("answer_spans")
    if spans and it.loss_mask is not None:
        a = spans[0][0]  # change the first answer symbol to another valid symbol
        s[a] = (s[a] + 1) % gen.vocab_size if s[a] + 1 != s[a + 1 if a + 1 < len(s) else a] else (s[a] + 2) % gen.vocab_size
    else:
        s[5:15] = s[5:15][::-1] if not np.array_equal(s[5:15], s[5:15][::-1]) else s[5:15] + 1
        s[len(s) // 2] = (s[len(s) // 2] + 1) % gen.vocab_size
    bad = dataclasses.replace(it, symbols=s)
    with pytest.raises(AssertionError):
        gen.check(bad)


@pytest.mark.parametrize("name", NAMES)
def test_shards_identical_for_one_and_two_workers(name, tmp_path):
    gen = build(name)
    enc = SymbolEncoder("reserved", reserved_offset=3)
    row_len = 65
    kw = dict(n_rows=40, row_len=row_len, vocab_size=enc.vocab_size(gen), eos_id=0)
    m1 = write_generator_shards(gen, enc, tmp_path / "w1", workers=1, **kw)
    m2 = write_generator_shards(gen, enc, tmp_path / "w2", workers=2, **kw)
    f1 = [{k: v["sha256"] for k, v in e["files"].items()} for e in m1["shards"]]
    f2 = [{k: v["sha256"] for k, v in e["files"].items()} for e in m2["shards"]]
    assert f1 == f2
    rows = ShardSet(tmp_path / "w1")
    assert len(rows) == 40
    first = gen.item(0)
    assert np.array_equal(rows.row(0)[: min(row_len, gen.length)], first.symbols[:row_len] + 3)


@pytest.mark.parametrize("name", NAMES)
def test_exact_fill_reserved_and_text(name, tmp_path, number_tokenizer):
    # reserved ids, EOS: one document + EOS is exactly one row
    extra = {"encoding": "split", "max_digits": 3} if name == "nca" else {}
    params = {k: v for k, v in SMALL.get(name, {}).items() if k != "length"} | extra
    enc = SymbolEncoder("reserved", reserved_offset=number_tokenizer.get_vocab_size())
    gen = fit_generator(name, params, enc, row_len=201, eos_id=0)
    assert gen.length == 200
    m = write_generator_shards(gen, enc, tmp_path / "r", 12, 201, enc.vocab_size(gen), 0, exact_fill=True)
    s = ShardSet(tmp_path / "r")
    assert m["exact_fill"] and np.all(s.rows(range(12))[:, -1] == 0)  # every row ends with its EOS
    if gen.item(0).loss_mask is not None:  # the mask travels with the symbols
        it = gen.item(0)
        assert np.array_equal(s.row(0, "loss_mask")[:-1], it.loss_mask)
    # text render under a tokenizer where each integer is one token (+ one space token)
    tenc = SymbolEncoder.text(number_tokenizer)
    eos = eos_id(number_tokenizer)
    gen = fit_generator(name, params, tenc, row_len=257, eos_id=eos)
    assert gen.length == 128
    write_generator_shards(gen, tenc, tmp_path / "t", 6, 257, tenc.vocab_size(gen), eos, exact_fill=True)
    rows = ShardSet(tmp_path / "t").rows(range(6))
    assert np.all(rows[:, -1] == eos)
    text = number_tokenizer.decode(rows[0, :-1].tolist())
    assert [int(x) for x in text.split()] == gen.item(0).symbols.tolist()


@pytest.mark.parametrize("name", NAMES)
def test_length_too_small_for_one_instance_names_the_field(name):
    with pytest.raises(ConfigError) as e:
        GENERATORS.build(name, {**SMALL.get(name, {}), "length": 0})
    assert e.value.field == "length"


@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameter_names_the_field(name):
    with pytest.raises(ConfigError) as e:
        GENERATORS.build(name, {"lenght": 10})
    assert e.value.field == "lenght" and "length" in str(e.value)


def test_an_unknown_preset_is_named_with_the_closest_ones():
    """Issue #46: generator presets were a dict that a plug-in overwrote silently; now a registry (a clash is
    refused: tests/test_plugins.py) whose unknown names get the closest ones."""
    from preschool.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown generator preset 'dyck_verify_pp'; did you mean 'dyck_verify_ppt'"):
        GENERATOR_PRESETS.get("dyck_verify_pp", "preset")
