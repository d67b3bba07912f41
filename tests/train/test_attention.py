"""Document-masked attention: the FlexAttention BlockMask path gives the dense 4D-mask path's logits."""


import pytest
import torch
import torch.nn.functional as F

from preschool.errors import ConfigError
from preschool.train.attention import (doc_attention_kwargs, doc_attention_mask, doc_block_mask, doc_positions,
                                       resolve_doc_attention, use_flex)
from preschool.train.model import ModelConfig, build_model

# the eager (unfused) flex kernel is the point of these CPU tests
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def _segments(B=2, T=300):
    seg = torch.zeros(B, T, dtype=torch.long)
    seg[0, 17:] = 1
    seg[0, 140:] = 2  # a document crossing the 128-position block boundary
    seg[0, 290:] = 3
    seg[1, 260:] = 1
    return seg


def test_resolve_doc_attention():
    assert resolve_doc_attention("auto", torch.device("cpu")) == "dense"
    assert resolve_doc_attention("auto", torch.device("cuda", 0)) == "flex"
    assert resolve_doc_attention("dense", torch.device("cuda", 0)) == "dense"
    with pytest.raises(ConfigError, match="doc_attention.*no backward"):
        resolve_doc_attention("flex", torch.device("cpu"))


def test_block_mask_attends_exactly_like_the_dense_mask():
    from torch.nn.attention.flex_attention import flex_attention

    seg = _segments()
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, seg.shape[1], 16, generator=g) for _ in range(3))
    dense = F.scaled_dot_product_attention(q, k, v, attn_mask=doc_attention_mask(seg))
    with torch.no_grad():  # eager flex (reference kernel): forward only on CPU
        flex = flex_attention(q, k, v, block_mask=doc_block_mask(seg))
    torch.testing.assert_close(flex, dense, rtol=1e-5, atol=1e-5)
    bm = doc_block_mask(seg)
    # blocks wholly outside a document (row 0: docs 0 and 1 end before block 2) are skipped
    assert bm.to_dense()[0, 0, 2, 0] == 0 and bm.to_dense()[1, 0, 2, 0] == 1


def test_positions_restart_per_document():
    seg = torch.tensor([[0, 0, 0, 1, 1, 2]])
    assert doc_positions(seg).tolist() == [[0, 1, 2, 0, 1, 0]]


@pytest.fixture
def eager_flex(monkeypatch):
    """HF compiles flex_attention on first use (minutes on CPU); the eager kernel computes the same thing."""
    from torch.nn.attention.flex_attention import flex_attention
    from transformers.integrations import flex_attention as hf_flex

    monkeypatch.setattr(hf_flex, "compile_friendly_flex_attention",
                        lambda q, k, v, training=False, **kw: flex_attention(q, k, v, **kw))


def _logits_dense_vs_flex(family):
    model = build_model(ModelConfig("micro", family=family, overrides={"hidden_size": 64}), 211, seed=1).eval()
    seg = _segments(T=160)
    ids = torch.randint(0, 211, seg.shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        dense = model(input_ids=ids, use_cache=False, **doc_attention_kwargs(model, seg)).logits
        use_flex(model)
        kw = doc_attention_kwargs(model, seg)
        assert type(kw["attention_mask"]).__name__ == "BlockMask"
        flex = model(input_ids=ids, use_cache=False, **kw).logits
    return model, dense, flex


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_model_logits_flex_equal_dense(eager_flex, family):
    model, dense, flex = _logits_dense_vs_flex(family)
    torch.testing.assert_close(flex, dense, rtol=1e-4, atol=1e-5)


def test_flex_is_not_written_into_checkpoints(eager_flex, tmp_path):
    """A checkpoint of a flex-trained model loads with the default attention (it must run on CPU too)."""
    from transformers import AutoModelForCausalLM

    model, _, _ = _logits_dense_vs_flex("qwen2")
    model.save_pretrained(tmp_path)
    assert AutoModelForCausalLM.from_pretrained(tmp_path).config._attn_implementation != "flex_attention"


@pytest.mark.slow
def test_model_logits_flex_compiled_equal_dense():
    """HF's real flex path (torch.compile of the kernel; 1-3 min on a 2-core CPU)."""
    model, dense, flex = _logits_dense_vs_flex("qwen2")
    torch.testing.assert_close(flex, dense, rtol=1e-4, atol=1e-5)
