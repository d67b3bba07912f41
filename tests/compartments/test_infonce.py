import math

import numpy as np
import pytest
import torch

from preschool.compartments.infonce import (InfoNCECallback, InfoNCEConfig, SpanPool, base_rows_from_batch,
                                            default_layer, draw_pairs, info_nce, mean_pool, pair_loss, trunk_states)
from preschool.data.shards import ShardWriter
from preschool.compartments.model import attach_compartment_embedding
from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.train.model import ModelConfig, build_model


def test_info_nce_hand_computed():
    a = torch.tensor([[2.0, 0.0], [0.0, 1.0]])  # normalised to [1,0], [0,1]
    b = torch.tensor([[0.6, 0.8], [0.0, 3.0]])  # normalised to [.6,.8], [0,1]
    # sim / tau with tau = 0.5: [[1.2, 0], [1.6, 2]]
    row = 0.5 * (math.log(1 + math.exp(-1.2)) + math.log(1 + math.exp(-0.4)))  # a -> b
    col = 0.5 * (math.log(1 + math.exp(0.4)) + math.log(1 + math.exp(-2.0)))  # b -> a
    assert info_nce(a, b, 0.5).item() == pytest.approx(0.5 * (row + col), abs=1e-6)
    assert 0.5 * (row + col) == pytest.approx(0.45406, abs=1e-4)
    # perfectly aligned, well separated pairs -> near zero
    e = torch.eye(4)
    assert info_nce(e, e, 0.01).item() < 1e-6


def test_mean_pool_mask():
    h = torch.arange(12.0).reshape(1, 4, 3)
    torch.testing.assert_close(mean_pool(h), h.mean(1))
    torch.testing.assert_close(mean_pool(h, torch.tensor([[1, 1, 0, 0]])), h[:, :2].mean(1))


def test_pairs_are_distinct_and_uniform():
    i, j = draw_pairs(4000, 3, np.random.default_rng(0))
    assert (i != j).all()
    counts = np.bincount(i * 3 + j, minlength=9).reshape(3, 3)
    assert counts.diagonal().sum() == 0 and counts[counts > 0].min() > 550


def test_trunk_states_match_full_forward_and_loss_trains():
    V, C = 12, 2
    m = build_model(ModelConfig(preset="micro", tie_embeddings=False), C * V + 1, seed=0)
    attach_compartment_embedding(m, C, V)
    ids = torch.randint(0, C * V, (3, 6), generator=torch.Generator().manual_seed(0))
    full = m(ids, output_hidden_states=True).hidden_states
    torch.testing.assert_close(trunk_states(m, ids, 1), full[1])
    with pytest.raises(ConfigError, match="infonce.layer"):
        trunk_states(m, ids, 3)
    cfg = InfoNCEConfig(temperature=0.1, pair_batch=4)
    base = torch.randint(0, V, (4, 6), generator=torch.Generator().manual_seed(1))
    loss = pair_loss(m, base, C, V, cfg, np.random.default_rng(0))
    loss.backward()
    assert loss.item() > 0 and m.base_model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    assert m.lm_head.weight.grad is None  # the head is not on the contrastive path
    assert m.compartment_embedding.weight.grad is None  # the paper's default: no compartment vectors there
    m.zero_grad(set_to_none=True)
    pair_loss(m, base, C, V, InfoNCEConfig(compartment_embedding=True), np.random.default_rng(0)).backward()
    assert m.compartment_embedding.weight.grad.abs().sum() > 0  # the option: vectors on the path


def test_default_layer_is_the_references_zero_based_middle_block():
    # reference capture_layer = n_layer // 2 counted from 0: the fifth of eight blocks, the second of two
    assert [default_layer(n) for n in (1, 2, 4, 8)] == [1, 2, 3, 5]
    V, C = 12, 2
    m = build_model(ModelConfig(preset="micro", tie_embeddings=False), C * V + 1, seed=0)
    seen = []
    handles = [blk.register_forward_hook(lambda mod, a, o, k=k: seen.append(k)) for k, blk in
               enumerate(m.base_model.layers)]
    pair_loss(m, torch.zeros(2, 4, dtype=torch.long), C, V, InfoNCEConfig(), np.random.default_rng(0))
    for h in handles:
        h.remove()
    assert max(seen) == len(m.base_model.layers) - 1  # micro has 2 blocks: the reference captures block index 1


def _base_shards(path, rows=40, row_len=9, vocab=12):
    with ShardWriter(path, row_len=row_len, vocab_size=vocab) as w:
        w.add_rows(np.arange(rows * row_len).reshape(rows, row_len) % vocab)
    return path


def test_shard_spans_are_the_references_own_batch_with_one_pair_per_call(tmp_path):
    V, C = 12, 4
    pool = SpanPool(_base_shards(tmp_path / "train"), 0)
    spans = pool.sample(64, np.random.default_rng(0))
    assert spans.shape == (64, 8)  # the training context: row_len - 1
    # contiguous pieces of the stream 0, 1, 2, ... (mod V), including spans crossing a row boundary
    assert ((np.diff(spans, axis=1) % V) == 1).all()
    assert len({int(s[0]) for s in spans}) > 5
    m = build_model(ModelConfig(preset="micro", tie_embeddings=False), C * V + 1, seed=0)
    # a micro-batch with one plain row: the old behaviour could not form a pair; the paper's pool can,
    # with pair_batch spans of its own
    batch = {"input_ids": torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8], [C * V] * 8])}
    cb = InfoNCECallback(InfoNCEConfig(pair_batch=16), C, V, train_shards=tmp_path / "train")
    seen = []
    h = m.base_model.embed_tokens.register_forward_hook(lambda mod, a, o: seen.append(a[0].clone()))
    loss = cb.extra_loss(m, batch, None)
    h.remove()
    assert loss is not None and loss.item() > 0
    ids = seen[0]
    assert ids.shape == (32, 8)  # 16 spans, each in two compartments
    comp_i, comp_j = (ids[:16] // V).unique(), (ids[16:] // V).unique()
    assert len(comp_i) == 1 and len(comp_j) == 1 and comp_i.item() != comp_j.item()  # one pair for the call
    assert torch.equal(ids[:16] % V, ids[16:] % V)
    with pytest.raises(ConfigError, match="train_shards"):
        InfoNCECallback(InfoNCEConfig(), C, V)
    assert InfoNCECallback(InfoNCEConfig(spans="batch", pair_batch=16), C, V).extra_loss(m, batch, None) is None


def test_callback_uses_plain_rows_and_is_seeded():
    V, C = 12, 2
    m = build_model(ModelConfig(preset="micro", tie_embeddings=False), C * V + 1, seed=0)
    ids = torch.tensor([[1, 2, 3, 4], [13, 14, 15, 16], [C * V, 1, C * V, 13], [5, 6, 7, 8]])
    base = base_rows_from_batch(ids, C, V, k=8)
    assert base.tolist() == [[1, 2, 3, 4], [1, 2, 3, 4], [5, 6, 7, 8]]
    cb = InfoNCECallback(InfoNCEConfig(weight=0.5, pair_batch=8, spans="batch"), C, V)
    a = cb.extra_loss(m, {"input_ids": ids}, None)
    cb2 = InfoNCECallback(InfoNCEConfig(weight=0.5, pair_batch=8, spans="batch"), C, V)
    cb2.load_state_dict(cb2.state_dict())
    assert cb2.extra_loss(m, {"input_ids": ids}, None).item() == pytest.approx(a.item())
    assert cb.state_dict() == {"calls": 1}
    assert cb.extra_loss(m, {"input_ids": ids[2:3]}, None) is None  # fewer than 2 plain rows
    with pytest.raises(ConfigError, match="pair_batch"):
        from_dict(InfoNCEConfig, {"pair_batch": 1})
