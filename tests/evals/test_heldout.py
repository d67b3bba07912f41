import numpy as np
import pytest
import torch

from preschool.data.shards import ShardWriter
from preschool.errors import ConfigError, DataError
from preschool.evals import EVALUATORS
from preschool.train.scoring import scored_rows

VOCAB = 50
ROW_LEN = 17


def micro_model(vocab_size=VOCAB, seed=0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(cfg).eval()


def make_set(path, n_rows, seed, mask=True, vocab=VOCAB):
    rng = np.random.default_rng([seed, 0])
    toks = rng.integers(0, vocab, size=(n_rows, ROW_LEN))
    lm = (rng.random((n_rows, ROW_LEN)) < 0.5).astype(np.uint8)
    with ShardWriter(path, ROW_LEN, vocab, arrays=["loss_mask"] if mask else [], rows_per_shard=7) as w:
        w.add_rows(toks, **({"loss_mask": lm} if mask else {}))
    return toks, lm


def hf_loss(model, toks, lm=None):
    ids = torch.as_tensor(toks, dtype=torch.long)
    labels = ids.clone()
    if lm is not None:
        labels[torch.as_tensor(lm) == 0] = -100  # HF shifts labels itself: label j is the target of position j-1
    with torch.no_grad():
        return float(model(input_ids=ids, labels=labels).loss)


def test_matches_hf_loss_and_honours_mask(tmp_path):
    model = micro_model()
    toks, lm = make_set(tmp_path / "masked", 20, seed=1)
    (tmp_path / "ds" ).mkdir()
    toks2, _ = make_set(tmp_path / "ds" / "val", 9, seed=2, mask=False)  # a dataset folder: val/ inside
    ev = EVALUATORS.build("heldout", {"sources": {"a": str(tmp_path / "masked"), "b": str(tmp_path / "ds")},
                                      "max_rows": None, "batch_size": 3})
    m = ev.evaluate(model, None).metrics
    assert m["loss/a"] == pytest.approx(hf_loss(model, toks, lm), abs=1e-4)
    assert m["loss/b"] == pytest.approx(hf_loss(model, toks2), abs=1e-4)
    assert m["tokens/a"] == lm[:, 1:].sum() and m["tokens/b"] == 9 * (ROW_LEN - 1)
    assert m["ppl/a"] == pytest.approx(np.exp(m["loss/a"]))
    assert m["loss"] == pytest.approx((m["loss/a"] + m["loss/b"]) / 2)
    # the mask matters: scoring every token gives a different number
    assert abs(m["loss/a"] - hf_loss(model, toks)) > 1e-3
    # batch size does not
    m1 = EVALUATORS.build("heldout", {"sources": {"a": str(tmp_path / "masked")}, "max_rows": None,
                                      "batch_size": 1}).evaluate(model, None).metrics
    assert m1["loss/a"] == pytest.approx(m["loss/a"], abs=1e-5)


def test_fixed_rows_and_subset(tmp_path):
    assert scored_rows(5, None).tolist() == [0, 1, 2, 3, 4]
    assert scored_rows(5, 10).tolist() == [0, 1, 2, 3, 4]
    assert scored_rows(101, 5).tolist() == [0, 1, 2, 3, 4]  # the first rows, as the trainer's val_rows
    model = micro_model()
    toks, lm = make_set(tmp_path / "s", 30, seed=3)
    res = EVALUATORS.build("heldout", {"sources": {"s": str(tmp_path / "s")}, "max_rows": 4}).evaluate(model, None)
    idx = scored_rows(30, 4)
    assert res.extra["sources"]["s"]["rows"] == 4
    assert res.metrics["loss/s"] == pytest.approx(hf_loss(model, toks[idx], lm[idx]), abs=1e-4)


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="sources"):
        EVALUATORS.build("heldout", {"sources": {}})
    with pytest.raises(ConfigError, match=r"sources\.x"):
        EVALUATORS.build("heldout", {"sources": {"x": str(tmp_path / "nope")}})
    make_set(tmp_path / "big", 4, seed=4, vocab=500)
    ev = EVALUATORS.build("heldout", {"sources": {"big": str(tmp_path / "big")}})
    with pytest.raises(DataError, match="vocab_size"):
        ev.evaluate(micro_model(vocab_size=10), None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no manifest"):
        EVALUATORS.build("heldout", {"sources": {"e": str(tmp_path / "empty")}}).evaluate(micro_model(), None)


def test_attention_reset_between_docs(tmp_path):
    model = micro_model(seed=5)
    rng = np.random.default_rng([9, 0])
    toks = rng.integers(0, VOCAB, size=(3, ROW_LEN))
    k = 6  # every row: document 0 = tokens[:k], document 1 = tokens[k:]
    segs = np.zeros((3, ROW_LEN), np.uint16)
    segs[:, k:] = 1
    with ShardWriter(tmp_path / "s", ROW_LEN, VOCAB, arrays=["segments"]) as w:
        w.add_rows(toks, segments=segs)

    def nll(ids, targets):
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.as_tensor(ids)[None]).logits[0].double(), -1)
        return -float(lp[torch.arange(len(targets)), torch.as_tensor(targets)].sum())

    # by hand: document 0 alone predicts its own tokens and the first token of document 1;
    # document 1 alone (positions from 0) predicts the rest
    want = sum(nll(r[:k], r[1:k + 1]) + nll(r[k:-1], r[k + 1:]) for r in toks) / (3 * (ROW_LEN - 1))
    cfg = {"sources": {"s": str(tmp_path / "s")}, "batch_size": 2}
    reset = EVALUATORS.build("heldout", {**cfg, "attention_reset_between_docs": True}).evaluate(model, None)
    plain = EVALUATORS.build("heldout", cfg).evaluate(model, None)
    assert reset.metrics["loss/s"] == pytest.approx(want, abs=1e-4)
    assert reset.extra["sources"]["s"]["attention_reset"] and not plain.extra["sources"]["s"]["attention_reset"]
    assert abs(plain.metrics["loss/s"] - want) > 1e-4
    assert plain.metrics["loss/s"] == pytest.approx(hf_loss(model, toks), abs=1e-4)
