"""Model families (train/families/): every family builds, counts, trains, resumes exactly, evaluates and exports
at micro size; what a family cannot do is refused in one line."""

import json

import pytest
import torch

from preschool.errors import ConfigError
from preschool.train.model import (FAMILIES, MODEL_PRESETS, ModelConfig, build_model, count_params, describe,
                                   hf_config)
from preschool.train.trainer import train

FAMILY_NAMES = ["qwen2", "llama", "olmo2", "gpt_neox", "gpt2"]


def test_the_five_families_are_registered():
    assert set(FAMILY_NAMES) <= set(FAMILIES.names())


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_preset_counts_what_the_hf_model_holds_or_is_refused_in_one_line(family):
    """describe() is arithmetic; built on the meta device, the HF model of every preset must hold exactly that.
    A preset the family cannot build (a head size other than hidden / heads) is a ConfigError naming it."""
    from transformers import AutoModelForCausalLM

    built = 0
    for name in MODEL_PRESETS.names():
        cfg = ModelConfig(preset=name, family=family)
        try:
            d = describe(cfg, 1000)
        except ConfigError as e:
            assert e.field == "preset" and name.startswith("l2t-") and family in str(e) and "\n" not in str(e)
            continue
        try:
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(hf_config(cfg, 1000))
        except Exception:  # transformers' own Llama check: hidden size a multiple of the heads
            assert family == "llama" and name.startswith("l2t-"), name
            continue
        model.tie_weights()
        assert model.config.model_type == family
        assert count_params(model) == d["params_total"], name
        assert count_params(model, embeddings=False) == d["params_non_embedding"], name
        built += 1
    assert built >= len(MODEL_PRESETS.names()) - 2


def test_families_without_gqa_or_a_gated_mlp_are_sized_like_the_preset():
    """MHA where there is no grouped-query attention; a two-matrix MLP 1.5x as wide: the same MLP weights."""
    q = describe(ModelConfig(preset="gpt-1b", family="qwen2"), 50000)
    for fam in ("gpt_neox", "gpt2"):
        d = describe(ModelConfig(preset="gpt-1b", family=fam), 50000)
        assert (d["hidden_size"], d["layers"], d["heads"], d["kv_heads"]) == (1536, 36, 12, 12)
        assert d["ffn"] == 4096 * 3 // 2
        assert 0.95 < d["params_total"] / q["params_total"] < 1.15


def test_overrides_use_canonical_names_and_refuse_what_the_family_lacks():
    gpt2 = build_model(ModelConfig(family="gpt2", overrides={"hidden_size": 32, "rms_norm_eps": 1e-6}), 50)
    assert gpt2.config.n_embd == 32 and gpt2.config.layer_norm_epsilon == 1e-6
    assert gpt2.config.resid_pdrop == gpt2.config.embd_pdrop == gpt2.config.attn_pdrop == 0.0
    neox = build_model(ModelConfig(family="gpt_neox", overrides={"use_parallel_residual": False}), 50)
    assert neox.config.use_parallel_residual is False  # a field of the family's own config
    with pytest.raises(ConfigError, match=r"overrides.n_embd: gpt2 calls 'hidden_size' this"):
        ModelConfig(family="gpt2", overrides={"n_embd": 32}).validate()
    with pytest.raises(ConfigError, match=r"overrides.rope_theta: gpt2 has no RoPE"):
        ModelConfig(family="gpt2", overrides={"rope_theta": 5e4}).validate()
    with pytest.raises(ConfigError, match=r"overrides.num_key_value_heads: gpt_neox has no grouped-query"):
        ModelConfig(family="gpt_neox", overrides={"num_key_value_heads": 1}).validate()
    with pytest.raises(ConfigError, match=r"family: unknown model family 'gpt3'.*gpt2"):
        ModelConfig(family="gpt3").validate()


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_norms_found_by_module_are_the_norms_found_by_name_before(family):
    """Unit-gain init now finds norms by their module's class (GPT-2's ln_1 has no 'norm' in its name); for
    the two families that trained before, that is the same set, so their models are the same as before."""
    model = build_model(ModelConfig(family=family), 97, seed=3)
    by_module = {n for m_name, m in model.named_modules() if "Norm" in type(m).__name__
                 for n, _ in [(f"{m_name}.{k}", v) for k, v in m.named_parameters(recurse=False)]}
    by_name = {n for n, _ in model.named_parameters() if "norm" in n and not n.endswith("bias")}
    assert by_module == by_name and by_module


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox"])
def test_layer_norm_families_start_with_unit_gains_zero_biases_and_scaled_residual_outputs(family):
    import math

    cfg = ModelConfig(family=family, scaled_init=True, overrides={"num_hidden_layers": 8, "hidden_size": 128})
    model = build_model(cfg, 512, seed=0)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(torch.all(m.weight == 1) and torch.all(m.bias == 0) for m in norms)
    scaled = [(n, p) for n, p in model.named_parameters()
              if n.endswith(("c_proj.weight", "attention.dense.weight", "dense_4h_to_h.weight"))]
    assert len(scaled) == 16
    for n, p in scaled:
        assert p.std().item() == pytest.approx(0.02 / math.sqrt(16), rel=0.1), n


def test_liger_is_refused_for_families_it_is_not_bound_into_and_auto_leaves_them_plain():
    from preschool.train.kernels import resolve_kernels

    cuda = torch.device("cuda")
    for fam in ("olmo2", "gpt_neox", "gpt2"):
        with pytest.raises(ConfigError, match=rf"kernels: 'liger' has no patch here for the {fam} family"):
            resolve_kernels("liger", cuda, "off", fam)
        assert resolve_kernels("auto", cuda, "off", fam) == "off"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_decoder_blocks_are_found_for_compile_checkpointing_and_fsdp(family):
    from preschool.train.families import decoder_blocks

    model = build_model(ModelConfig(family=family), 64)
    blocks = decoder_blocks(model)
    assert len(blocks) == 2 and all(isinstance(b, torch.nn.Module) for b in blocks)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from preschool.data.tokenizer import save_tokenizer, train_bpe

    folder = tmp_path_factory.mktemp("tok")
    save_tokenizer(train_bpe(["the cat sleeps on the mat", "a dog barks"] * 10 + [str(i) for i in range(40)],
                             vocab_size=300), folder)
    return folder


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_micro_model_of_each_family_trains_resumes_exactly_evaluates_and_exports(
        family, tmp_path, datasets, micro_cfg, stop_at, tokenizer_dir, same_checkpoint):
    """The chunked fused loss, per-document attention, a stop and resume: the resumed run's checkpoints equal
    the uninterrupted run's byte for byte (the trainer state by content: conftest.assert_same_checkpoint); the final checkpoint
    scores with an evaluator and loads and generates with transformers alone (the fused loss against the plain
    one, per family: tests/train/test_loss.py)."""
    from transformers import AutoModelForCausalLM

    from preschool.evals.runner import evaluate_run

    cfg = micro_cfg(model={"preset": "micro", "family": family, "overrides": {"hidden_size": 32}},
                    stages=[{"name": "pt", "data": {"text": 1, "synth": 1}, "tokens": 4 * 16 * 8}],
                    attention_reset_between_docs=True, fused_loss="chunked", checkpoint_every=3)
    a, b = tmp_path / "a", tmp_path / "b"
    train(cfg, a, datasets, tokenizer_dir)
    assert train(cfg, b, datasets, tokenizer_dir, callbacks=[stop_at(3)])["stopped"]
    train(cfg, b, datasets, tokenizer_dir)
    ckpts = sorted(p.name for p in (a / "checkpoints").iterdir())
    assert ckpts == sorted(p.name for p in (b / "checkpoints").iterdir()) and len(ckpts) >= 3
    for name in ckpts[1:]:  # written after the resume from step 3
        same_checkpoint(a / "checkpoints" / name, b / "checkpoints" / name)
    last = a / "checkpoints" / ckpts[-1]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"sentence_good": g, "sentence_bad": b, "UID": "toy", "pairID": str(k),
                                         "field": "syntax", "linguistics_term": "t"}) + "\n"
                             for k, (g, b) in enumerate([("the cat sleeps", "the sleeps cat"),
                                                         ("a dog barks", "a barks dog")])))
    out = evaluate_run(a, [("minimal_pairs", {"path": str(pairs)})], steps=[int(ckpts[-1][5:])], log=None)
    assert out[0]["results"]["minimal_pairs"]["metrics"]["n_pairs"] == 2
    model = AutoModelForCausalLM.from_pretrained(last).eval()
    assert model.config.model_type == family
    gen = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4, do_sample=False)
    assert gen.shape == (1, 7)
