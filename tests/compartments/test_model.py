import pytest
import torch

from preschool.compartments.model import (attach_compartment_embedding, compartment_embedding_disabled,
                                          compartment_ids, copy_compartment_init, expand_to_compartments, is_tied,
                                          load_compartment_model, untie_embeddings)
from preschool.errors import ConfigError
from preschool.train.model import ModelConfig, build_model

V, C = 10, 3


def _model(vocab, tie=False, seed=0):
    return build_model(ModelConfig(preset="micro", tie_embeddings=tie), vocab, seed=seed)


def test_compartment_ids_markers_take_next_compartment():
    M = C * V
    ids = torch.tensor([[M, 1, 2, M, 21, 22, M, M], [5, 15, 25, 9, 19, 29, 0, M], [M, M, M, M, M, M, M, M]])
    got = compartment_ids(ids, C, V)
    assert got.tolist() == [[0, 0, 0, 2, 2, 2, 2, 2], [0, 1, 2, 0, 1, 2, 0, 0], [0] * 8]


def test_embedding_changes_output_and_survives_save_load(tmp_path):
    torch.manual_seed(0)
    m = _model(C * V + 1)
    attach_compartment_embedding(m, C, V, init_std=0.5)
    ids = torch.tensor([[1, 2, 3, 11, 12, 13, 21, 22]])
    with torch.no_grad():
        a = m(ids).logits
        with compartment_embedding_disabled(m):
            b = m(ids).logits
    assert (a - b).abs().max() > 1e-3
    # gradients reach the compartment vectors of the compartments present
    m(ids, labels=ids).loss.backward()
    assert m.compartment_embedding.weight.grad.abs().sum(1).gt(0).all()
    m.save_pretrained(tmp_path / "ck")
    m2 = load_compartment_model(tmp_path / "ck")
    with torch.no_grad():
        torch.testing.assert_close(m2(ids).logits, a)
    # the evaluators' loader gets the embedding back through the plug-in's checkpoint hook
    from preschool.data.tokenizer import save_tokenizer, train_bpe
    from preschool.evals.runner import load_checkpoint

    save_tokenizer(train_bpe(["a b c a b c"] * 4, vocab_size=40), tmp_path / "ck")
    m3, _ = load_checkpoint(tmp_path / "ck")
    with torch.no_grad():
        torch.testing.assert_close(m3(ids).logits, a)
    with pytest.raises(ConfigError, match="offset presentation"):
        attach_compartment_embedding(_model(V + 1), C, V)


def test_untie_and_copy_init():
    m = _model(C * V + 1, tie=True)
    assert is_tied(m)
    untie_embeddings(m)
    assert not is_tied(m) and m.config.tie_word_embeddings is False
    attach_compartment_embedding(m, C, V)
    copy_compartment_init(m, C, V)
    e, h = m.get_input_embeddings().weight, m.get_output_embeddings().weight
    for i in range(1, C):
        torch.testing.assert_close(e[i * V:(i + 1) * V], e[:V])
        torch.testing.assert_close(h[i * V:(i + 1) * V], h[:V])
    torch.testing.assert_close(m.compartment_embedding.weight[2], m.compartment_embedding.weight[0])
    # same base text in any compartment now gives the same logits over its block
    base = torch.tensor([[1, 4, 2, 7]])
    with torch.no_grad():
        l0 = m(base).logits[..., :V]
        l2 = m(base + 2 * V).logits[..., 2 * V:3 * V]
    torch.testing.assert_close(l0, l2)


@pytest.mark.parametrize("tie,old_vocab", [(False, V), (True, V + 1)])
def test_expand_c1_model_preserves_function(tie, old_vocab):
    m = _model(old_vocab, tie=tie, seed=3)
    base = torch.tensor([[1, 4, 2, 7, 9]])
    with torch.no_grad():
        ref = m(base).logits[..., :V]
    expand_to_compartments(m, C, V)
    assert m.get_input_embeddings().weight.shape[0] == C * V + 1 and m.config.vocab_size == C * V + 1
    assert is_tied(m) == tie
    with torch.no_grad():
        for i in range(C):
            out = m(base + i * V).logits
            # compartment vectors are copies of compartment 0's, so every compartment scores alike
            torch.testing.assert_close(out[..., i * V:(i + 1) * V], m(base).logits[..., :V])
        if True:  # with the compartment vector removed the function is exactly the old model's
            with compartment_embedding_disabled(m):
                torch.testing.assert_close(m(base).logits[..., :V], ref)
