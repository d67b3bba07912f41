import numpy as np
import pytest

from preschool.data.shards import ShardSet
from preschool.errors import ConfigError, DataError
from preschool.synthetic import GENERATORS, Item
from preschool.synthetic.write import (SymbolEncoder, exact_fill_length, fit_generator, verify_fill,
                                       write_generator_shards)


def test_reserved_ids_are_offset_symbols():
    g = GENERATORS.build("stack", {"n_symbols": 10, "n_ops": 8, "length": 16})
    enc = SymbolEncoder("reserved", reserved_offset=500)
    it = g.item(0)
    doc = enc.encode(it)
    assert np.array_equal(doc.ids, it.symbols + 500) and np.array_equal(doc.loss_mask, it.loss_mask)
    assert enc.vocab_size(g) == 512


def test_text_mask_follows_symbols_under_a_digit_split_tokenizer(number_tokenizer):
    enc = SymbolEncoder.text(number_tokenizer)
    item = Item(np.array([7, 123, 45, 9]), np.array([0, 1, 1, 0], np.uint8))
    doc = enc.encode(item)
    toks = [number_tokenizer.id_to_token(i) for i in doc.ids]
    assert len(doc.ids) == 8  # one token per integer + one per space
    assert [t for t, m in zip(toks, doc.loss_mask) if m] == ["123", "Ġ", "45", "Ġ"]


def test_text_mask_follows_symbols_under_a_gpt2_style_tokenizer(gpt2_style_tokenizer):
    # " 45" is a single token starting at the space: it must belong to 45, not to 123
    enc = SymbolEncoder.text(gpt2_style_tokenizer)
    item = Item(np.array([7, 123, 45, 9]), np.array([0, 0, 1, 0], np.uint8))
    doc = enc.encode(item)
    toks = [gpt2_style_tokenizer.id_to_token(i) for i in doc.ids]
    assert [t for t, m in zip(toks, doc.loss_mask) if m] == ["Ġ45"]


def test_cost_and_exact_length(number_tokenizer):
    g = GENERATORS.build("shuffle_dyck", {"k": 16})
    enc = SymbolEncoder.text(number_tokenizer)
    assert enc.symbol_cost(g) == (2, 0)
    assert exact_fill_length(g, enc, row_len=4097, eos_id=0) == 2048  # verify-ppt's 2048 ints -> 4097 tokens
    with pytest.raises(ConfigError) as e:
        exact_fill_length(g, enc, row_len=4096, eos_id=0)
    assert e.value.field == "seq_len" and "4096" in str(e.value)
    assert exact_fill_length(g, SymbolEncoder("reserved"), row_len=100, eos_id=None) == 100


def test_uneven_symbol_costs_are_refused(word_tokenizer):
    g = GENERATORS.build("shuffle_dyck", {"k": 64})
    with pytest.raises(ConfigError) as e:
        SymbolEncoder.text(word_tokenizer).symbol_cost(g)
    assert e.value.field == "render"


def test_digit_budget_in_text_mode(number_tokenizer):
    g = GENERATORS.build("shuffle_dyck", {"k": 600, "max_digits": 0, "length": 10})
    with pytest.raises(ConfigError) as e:
        SymbolEncoder.text(number_tokenizer).check_generator(g)
    assert e.value.field == "render"
    SymbolEncoder.text(number_tokenizer, max_digits=4).check_generator(g)


def test_fit_generator_respects_explicit_length(number_tokenizer):
    enc = SymbolEncoder.text(number_tokenizer)
    with pytest.raises(ConfigError) as e:
        fit_generator("set", {"length": 100}, enc, row_len=257, eos_id=0)
    assert e.value.field == "length"
    assert fit_generator("set", {"length": 128}, enc, row_len=257, eos_id=0).length == 128


def test_verify_fill_and_writer_catch_documents_of_the_wrong_size(tmp_path, number_tokenizer):
    enc = SymbolEncoder.text(number_tokenizer)
    g = GENERATORS.build("set", {"length": 64, "vocab": 50})
    with pytest.raises(DataError):
        verify_fill(g, enc, row_len=128, eos_id=0)  # 64 symbols are 128 tokens + EOS = 129
    with pytest.raises(DataError, match="two documents"):
        write_generator_shards(g, enc, tmp_path / "x", 4, 128, enc.vocab_size(g), 0, exact_fill=True)
    assert not (tmp_path / "x").exists()  # nothing half-written


def test_concat_without_exact_fill_packs_across_rows(tmp_path):
    g = GENERATORS.build("set", {"length": 30, "vocab": 50})
    enc = SymbolEncoder("reserved", reserved_offset=1)
    m = write_generator_shards(g, enc, tmp_path / "c", 5, 50, enc.vocab_size(g), 0)
    s = ShardSet(tmp_path / "c")
    stream = s.rows(range(5)).ravel()
    expect = np.concatenate([np.append(it.symbols + 1, 0) for it in g.items(0, 9)])[: 250]
    assert np.array_equal(stream, expect)
    assert m["source"]["name"] == "set" and m["render"] == "reserved"


def test_a_small_split_stops_its_unit_early_with_the_same_bytes(tmp_path, monkeypatch):
    """A 6-row split inside a 2,000-item unit generates about the items it needs, not the whole unit, and
    its rows are the bytes the whole unit starts with (what a capped and an uncapped unit both give)."""
    from preschool.synthetic import write

    g = GENERATORS.build("shuffle_dyck", {"length": 20})
    enc = SymbolEncoder("reserved", reserved_offset=1)
    args = (enc.vocab_size(g), 0)
    m = write_generator_shards(g, enc, tmp_path / "capped", 6, 33, *args, unit_tokens=40_000)
    assert m["documents_generated"] < 20  # not the 2,000 items of the unit

    real = write.GeneratorJob.__init__
    monkeypatch.setattr(write.GeneratorJob, "__init__",
                        lambda self, *a: real(self, *a[:-1], None))  # as before: every unit built whole
    whole = write_generator_shards(g, enc, tmp_path / "whole", 6, 33, *args, unit_tokens=40_000)
    assert whole["documents_generated"] == 2000
    rows = [ShardSet(tmp_path / d).rows(range(6)) for d in ("capped", "whole")]
    assert np.array_equal(*rows) and rows[0].shape == (6, 33)
    sums = [{k: f["sha256"] for k, f in e["files"].items()} for e in m["shards"]]
    assert sums == [{k: f["sha256"] for k, f in e["files"].items()} for e in whole["shards"]]  # same data_sha256
