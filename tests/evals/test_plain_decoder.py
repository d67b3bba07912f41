"""evals/_plain_decoder.py: the trainer's checkpoints scored without transformers give the HF model's
log-probabilities, and `preschool eval` of minimal pairs then never imports transformers."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from preschool.data.tokenizer import as_hf, train_bpe
from preschool.evals import _plain_decoder as plain_decoder
from preschool.evals.minimal_pairs import score_token_ids
from preschool.evals.prefix_tree import score_token_ids_tree
from preschool.evals.runner import evaluate_checkpoint, load_checkpoint
from preschool.train.model import ModelConfig, build_model

from .test_prefix_tree import templated_seqs

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [f"the {a} {v} the {b} ." for a in ("cat", "dog", "girl", "boys") for v in ("sees", "saw", "likes")
         for b in ("ball", "cats", "tree")] * 3


def _checkpoint(folder: Path, family: str, tie: bool) -> Path:
    tok = as_hf(train_bpe(TEXTS, vocab_size=300, min_frequency=1))
    vocab = len(tok)
    cfg = ModelConfig("micro", family=family, tie_embeddings=tie,
                      overrides={"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4,
                                 "num_key_value_heads": 2})
    model = build_model(cfg, vocab, seed=1)
    with torch.no_grad():  # biases and norm gains away from their init, so a missed term shows
        for n, p in model.named_parameters():
            if n.endswith("bias") or "norm" in n:
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(n))) * 0.3)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("family,tie", [("qwen2", True), ("qwen2", False), ("llama", True)])
def test_logits_equal_the_hf_models_padded_and_prefix_tree(tmp_path, family, tie):
    ckpt = _checkpoint(tmp_path / "ckpt", family, tie)
    hf, hf_tok = load_checkpoint(ckpt)
    plain, tok = load_checkpoint(ckpt, plain=True)
    assert isinstance(plain, plain_decoder.PlainDecoder)
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == \
        (hf_tok.bos_token_id, hf_tok.eos_token_id, hf_tok.pad_token_id)
    assert [e.ids for e in tok.backend_tokenizer.encode_batch(TEXTS[:5], add_special_tokens=False)] == \
        [e.ids for e in hf_tok.backend_tokenizer.encode_batch(TEXTS[:5], add_special_tokens=False)]
    ids = torch.randint(0, 60, (3, 11), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # right padding, as the plain scorer pads
    with torch.inference_mode():
        for m in (None, mask):
            torch.testing.assert_close(plain(input_ids=ids, attention_mask=m).logits[mask.bool()],
                                       hf(input_ids=ids, attention_mask=m).logits[mask.bool()], rtol=1e-5, atol=1e-5)
    seqs = templated_seqs(vocab=60)
    for scorer, kw in ((score_token_ids, {}), (score_token_ids_tree, {"row_tokens": 24})):
        lp_plain, n_plain = scorer(plain, seqs, batch_size=16, **kw)
        lp_hf, n_hf = scorer(hf, seqs, batch_size=16, **kw)
        np.testing.assert_array_equal(n_plain, n_hf)
        np.testing.assert_allclose(lp_plain, lp_hf, rtol=0, atol=2e-5)


def test_anything_else_goes_to_transformers(tmp_path):
    ckpt = _checkpoint(tmp_path / "ckpt", "qwen2", True)
    cfg = json.loads((ckpt / "config.json").read_text())
    for key, value in (("model_type", "mistral"), ("hidden_act", "gelu"),
                       ("rope_parameters", {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4})):
        (ckpt / "config.json").write_text(json.dumps({**cfg, key: value}))
        assert plain_decoder.load(ckpt) is None, key
    (ckpt / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 3}))  # weights of 2 layers
    assert plain_decoder.load(ckpt) is None
    (ckpt / "config.json").write_text(json.dumps(cfg))
    tc = json.loads((ckpt / "tokenizer_config.json").read_text())
    (ckpt / "tokenizer_config.json").write_text(json.dumps({**tc, "bos_token": "<not-in-vocab>"}))
    assert plain_decoder.load(ckpt) is None  # HF would add the token: other ids
    (ckpt / "tokenizer_config.json").write_text(json.dumps(tc))
    assert plain_decoder.load(ckpt) is not None


def test_minimal_pairs_same_decisions_and_no_transformers_import(tmp_path):
    ckpt = _checkpoint(tmp_path / "ckpt", "qwen2", True)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"sentence_good": TEXTS[i], "sentence_bad": TEXTS[i + 1], "UID": "u",
                                         "pairID": str(i)}) + "\n" for i in range(0, 30, 2)))
    spec = [("minimal_pairs", {"path": str(pairs)})]
    hf = evaluate_checkpoint(ckpt, spec, tmp_path / "hf")  # the HF model (the test imported transformers)
    items = [json.loads(l) for l in (tmp_path / "hf" / "minimal_pairs" / "items.jsonl").read_text().splitlines()]
    code = ("import sys, json; from preschool.cli import main; rc = main(); "
            "print(json.dumps({'rc': rc, 'transformers': 'transformers' in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", code, "eval", "--checkpoint", str(ckpt), "--out",
                           str(tmp_path / "plain"), "--evaluator", "minimal_pairs", "--set", f"path={pairs}"],
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin",
                                                               "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"rc": 0, "transformers": False}
    plain = [json.loads(l) for l in (tmp_path / "plain" / "minimal_pairs" / "items.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in plain] == [r["correct"] for r in items]
    np.testing.assert_allclose([r["logp_good"] for r in plain], [r["logp_good"] for r in items], atol=2e-5)
    assert hf["results"]["minimal_pairs"]["metrics"]["n_pairs"] == 15
