import random

import numpy as np
import pytest
import torch

from preschool.errors import ConfigError
from preschool.evals import EVALUATORS
from preschool.evals.minimal_pairs import score_sentences, score_token_ids
from preschool.evals.prefix_tree import build_rows, score_token_ids_tree, supports_prefix_tree

from .test_minimal_pairs import BigramLM, micro_model, word_tokenizer


def llama_micro(vocab_size, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(cfg).eval()


def templated_seqs(seed=0, n=120, vocab=50):
    """Token sequences with heavy prefix sharing, like minimal pairs: a few stems, varied endings,
    plus the awkward cases (a sequence that is a prefix of another, a duplicate, a 1-token and a
    sequence longer than a row)."""
    rng = random.Random(seed)
    # mostly one shared first token (BOS), some not (bos: none): a row may hold several roots
    stems = [[rng.choice([0, 0, 3, 9])] + [rng.randrange(1, vocab) for _ in range(rng.randint(1, 6))]
             for _ in range(8)]
    seqs = [rng.choice(stems) + [rng.randrange(1, vocab) for _ in range(rng.randint(0, 7))] for _ in range(n)]
    seqs += [stems[0][:2], stems[0][:2] + [5, 6], seqs[3], [0], list(range(0, 40))]
    return seqs


def test_rows_reproduce_every_sequence_and_respect_the_row_size():
    seqs = templated_seqs()
    rows = build_rows(seqs, row_tokens=24)
    seen = {}
    for row in rows:
        assert len(row.tokens) <= 24 or len(row.ends) == 1  # only a lone long sequence may overflow
        for i, node in row.ends:
            path = []
            while node >= 0:
                path.append(row.tokens[node])
                assert row.depth[node] == len(seqs[i]) - len(path)
                node = row.parent[node]
            seen[i] = path[::-1]
    assert seen == {i: list(s) for i, s in enumerate(seqs) if len(s) >= 2}
    # a single row holding everything is exactly the trie: one node per distinct prefix
    (whole,) = build_rows(seqs, row_tokens=10_000)
    assert len(whole.tokens) == len({tuple(s[:k]) for s in seqs if len(s) >= 2 for k in range(1, len(s) + 1)})


@pytest.mark.parametrize("make", [micro_model, llama_micro], ids=["qwen2", "llama"])
def test_tree_scores_equal_plain_padded_scores(make):
    model = make(50, seed=1)
    assert supports_prefix_tree(model)
    seqs = templated_seqs(seed=2)
    want, n_want = score_token_ids(model, seqs, batch_size=16)
    for bs, row in [(1, 8), (7, 24), (64, 128), (1000, 10_000)]:
        got, n_got = score_token_ids_tree(model, seqs, batch_size=bs, row_tokens=row)
        assert (n_got == n_want).all()
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)
    assert got[len(seqs) - 2] == 0.0  # the one-token sequence has nothing to score


def test_eager_attention_gives_the_same_scores():
    model = micro_model(50, seed=4)
    seqs = templated_seqs(seed=5, n=40)
    sdpa, _ = score_token_ids_tree(model, seqs, batch_size=32, row_tokens=32)
    model.config._attn_implementation = "eager"
    eager, _ = score_token_ids_tree(model, seqs, batch_size=32, row_tokens=32)
    np.testing.assert_allclose(sdpa, eager, atol=2e-5, rtol=0)


def test_half_precision_model_gets_a_mask_in_its_dtype():
    model = micro_model(50, seed=6).to(torch.bfloat16)
    seqs = templated_seqs(seed=7, n=30)
    want, _ = score_token_ids(model, seqs, batch_size=8)
    got, _ = score_token_ids_tree(model, seqs, batch_size=8, row_tokens=32)
    # bf16 activations: agreement to bf16 rounding, not to 1e-5
    np.testing.assert_allclose(got, want, atol=0.05 * max(map(len, seqs)), rtol=0)


def test_option_resolution():
    tok = word_tokenizer()
    bigram = BigramLM(np.zeros((11, 11)))
    assert not supports_prefix_tree(bigram)
    with pytest.raises(ConfigError, match="prefix_tree"):
        score_sentences(bigram, tok, ["the cat"], prefix_tree=True)
    lp, _ = score_sentences(bigram, tok, ["the cat"])  # auto: falls back to the plain scorer
    assert lp[0] == pytest.approx(2 * np.log(1 / 11))
    model = micro_model(11)
    model.config._attn_implementation = "flash_attention_2"  # cannot take a tree mask
    assert not supports_prefix_tree(model)


def test_evaluator_records_the_mode_and_matches_plain(shared_data):
    from preschool.data.tokenizer import as_hf, train_bpe
    from preschool.evals.minimal_pairs import load_pairs

    pairs, _ = load_pairs(shared_data / "blimp", max_pairs_per_paradigm=3)
    tok = as_hf(train_bpe([s for p in pairs for s in (p.good, p.bad)], vocab_size=300))
    model = micro_model(len(tok), seed=7)
    cfg = {"path": str(shared_data / "blimp"), "max_pairs_per_paradigm": 3, "sentence_prefix": " "}
    tree = EVALUATORS.build("minimal_pairs", cfg).evaluate(model, tok)
    plain = EVALUATORS.build("minimal_pairs", {**cfg, "prefix_tree": False}).evaluate(model, tok)
    assert tree.extra["prefix_tree"] is True and plain.extra["prefix_tree"] is False
    assert [r["correct"] for r in tree.items] == [r["correct"] for r in plain.items]
    np.testing.assert_allclose([r["logp_good"] for r in tree.items], [r["logp_good"] for r in plain.items], atol=1e-4)
