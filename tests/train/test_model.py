import pytest
import torch

from preschool.errors import ConfigError
from preschool.train.model import (MODEL_PRESETS, ModelConfig, build_model, count_params, describe, hf_config,
                                   resize_vocab)


def test_presets_registered_and_sized():
    assert {"micro", "tiny-1m", "small-6m", "gpt-125m", "gpt-500m", "gpt-1b"} <= set(MODEL_PRESETS.names())
    tiny = describe(ModelConfig(preset="tiny-1m"), 2048)["params_total"]
    small = describe(ModelConfig(preset="small-6m"), 2048)["params_total"]
    assert 0.8e6 < tiny < 1.3e6
    assert 5e6 < small < 7e6
    b1 = hf_config(ModelConfig(preset="gpt-1b"), 128256)
    assert (b1.hidden_size, b1.num_hidden_layers, b1.num_attention_heads, b1.intermediate_size) == (1536, 36, 12, 4096)
    assert b1.rope_parameters["rope_theta"] == 50000.0


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_build_deterministic_and_counts_match(family):
    cfg = ModelConfig(family=family)
    rng_before = torch.get_rng_state()
    a, b, c = build_model(cfg, 97, seed=1), build_model(cfg, 97, seed=1), build_model(cfg, 97, seed=2)
    assert torch.equal(rng_before, torch.get_rng_state())  # caller's RNG untouched
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.lm_head.weight is a.model.embed_tokens.weight
    assert count_params(a) == describe(cfg, 97)["params_total"]
    assert a.config.hidden_size <= 64 and a.config.num_hidden_layers == 2
    std = a.model.embed_tokens.weight.std().item()
    assert 0.015 < std < 0.025


def test_untied_and_overrides():
    cfg = ModelConfig(tie_embeddings=False, overrides={"hidden_size": 32, "rope_theta": 5e4})
    m = build_model(cfg, 50, seed=0)
    assert m.lm_head.weight is not m.model.embed_tokens.weight
    assert m.config.hidden_size == 32 and m.config.rope_parameters["rope_theta"] == 5e4
    assert count_params(m) == describe(cfg, 50)["params_total"]


def test_bad_config_names_field():
    with pytest.raises(ConfigError, match="overrides.hiden_size.*hidden_size"):
        ModelConfig(overrides={"hiden_size": 3}).validate()
    with pytest.raises(ConfigError, match="preset.*tiny-1m"):
        ModelConfig(preset="tiny-1n").validate()
    with pytest.raises(ConfigError, match="overrides.vocab_size"):
        ModelConfig(overrides={"vocab_size": 3}).validate()


def test_save_load_roundtrip_with_auto(tmp_path):
    from transformers import AutoModelForCausalLM

    m = build_model(ModelConfig(), 61, seed=0).eval()
    m.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    back = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    x = torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(m(x).logits, back(x).logits, atol=1e-5)


def test_resize_vocab_keeps_rows():
    m = build_model(ModelConfig(), 40, seed=0)
    old = m.model.embed_tokens.weight.detach().clone()
    resize_vocab(m, 48, seed=1)
    w = m.model.embed_tokens.weight
    assert w.shape[0] == 48 and m.config.vocab_size == 48
    assert torch.equal(w[:40], old)
    assert m.lm_head.weight is w
    assert m(torch.tensor([[47, 1, 2]])).logits.shape[-1] == 48
    resize_vocab(m, 30)
    assert m.model.embed_tokens.weight.shape[0] == 30


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_describe_counts_every_preset_as_the_hf_model_has_them(family):
    """describe() works from the shape dict without transformers; every preset (head_dim ones included) must
    count what the HF model of hf_config() holds, built on the meta device (no memory)."""
    from transformers import AutoModelForCausalLM

    counted = 0
    for name in MODEL_PRESETS.names():
        for tie in (True, False):
            cfg = ModelConfig(preset=name, family=family, tie_embeddings=tie)
            try:
                with torch.device("meta"):
                    model = AutoModelForCausalLM.from_config(hf_config(cfg, 1000))
            except Exception:  # transformers refuses the L2T shapes for Llama (query width != hidden size)
                assert family == "llama" and name.startswith("l2t-"), name
                continue
            counted += 1
            if tie:
                model.tie_weights()
            d = describe(cfg, 1000)
            assert count_params(model) == d["params_total"], (name, tie)
            assert count_params(model, embeddings=False) == d["params_non_embedding"], (name, tie)
    assert counted >= 2 * (len(MODEL_PRESETS.names()) - 2)


def test_describing_a_model_does_not_import_torch_or_transformers():
    """`preschool plan` on a laptop: the model summary is arithmetic, the heavy imports are not needed."""
    import subprocess
    import sys

    code = ("import sys; from preschool.train.model import ModelConfig, describe; "
            "describe(ModelConfig(preset='gpt-7b'), 128256); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_scaled_init_gives_residual_projections_std_over_sqrt_two_layers():
    """Nanotron's scaled init (verify-ppt): o_proj and down_proj ~ N(0, init_std / sqrt(2 L)), the rest init_std."""
    import math

    cfg = ModelConfig(preset="micro", family="llama", init_std=0.02, scaled_init=True,
                      overrides={"num_hidden_layers": 8, "hidden_size": 128, "intermediate_size": 512})
    model = build_model(cfg, 512, seed=0)
    want = 0.02 / math.sqrt(2 * 8)
    for name, p in model.named_parameters():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            assert p.std().item() == pytest.approx(want, rel=0.05), name
        elif name.endswith(("q_proj.weight", "up_proj.weight", "embed_tokens.weight")):
            assert p.std().item() == pytest.approx(0.02, rel=0.05), name
    plain = build_model(ModelConfig(**{**cfg.__dict__, "scaled_init": False}), 512, seed=0)
    assert plain.model.layers[0].self_attn.o_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_model_config_records_the_tokenizers_special_ids():
    from preschool.data.tokenizer import SpecialIds

    cfg = ModelConfig(preset="micro")
    hf = hf_config(cfg, 403, SpecialIds(eos=401, bos=400, pad=402))  # Llama-3 style: specials after the vocabulary
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (400, 401, 402)
    m = build_model(cfg, 403, special=SpecialIds(eos=2, bos=None, pad=2))  # Mistral style without a PAD
    assert (m.config.bos_token_id, m.config.eos_token_id, m.config.pad_token_id) == (None, 2, 2)
    assert hf_config(cfg, 300).eos_token_id == 0  # no tokenizer folder: our BPE's <|endoftext|>


def test_vocab_multiple_pads_the_embedding():
    from preschool.config import from_dict
    from preschool.train.model import embedding_rows

    l2t = ModelConfig(vocab_multiple=128)
    assert embedding_rows(l2t, 32768) == 32768 and embedding_rows(l2t, 32769) == 32896  # L2T: Mistral v0.3
    assert embedding_rows(ModelConfig(), 403) == 403
    with pytest.raises(ConfigError, match="vocab_multiple"):
        from_dict(ModelConfig, {"vocab_multiple": 0}, "model")


@pytest.mark.parametrize("family", ["qwen2", "llama", "olmo2", "gpt_neox", "gpt2"])
def test_overrides_checked_without_transformers_are_fields_of_every_family(family):
    """COMMON_FIELDS skips the HF config import: each must really be a field of the family's HF config (under
    the family's own name for it), or refused by the family itself without transformers."""
    from preschool.train.model import COMMON_FIELDS, get_family

    fam = get_family(family)
    hf_fields = set(fam.config_class()().to_dict())
    for k in COMMON_FIELDS:
        if k == "num_key_value_heads" and not fam.gqa:
            continue  # taken only equal to the attention heads (Family.check_shape; tests/train/test_families.py)
        if k in fam.canonical_fields():
            assert (fam.renames.get(k, k) in hf_fields) or (k == "rope_theta" and "rope_parameters" in hf_fields), k
        else:
            with pytest.raises(ConfigError, match=f"overrides.{k}"):
                fam.check_override(k)
