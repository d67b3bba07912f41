"""The checkpoints our trainer writes, scored in plain PyTorch: no transformers import.

Why: ``preschool eval`` of 1,340 BLiMP pairs on a 1M-parameter model spent more CPU time importing
transformers (and the parts of torch it pulls in: Dynamo, DTensor, sympy, scipy) than scoring; the
forward of these small decoders is a dozen tensor ops per layer. So for evaluators that need only
log-probabilities (``Evaluator.plain_decoder``), the runner builds the model from this module instead.

:func:`load` reads a checkpoint folder as the trainer writes it: an HF ``Qwen2ForCausalLM`` or
``LlamaForCausalLM`` ``save_pretrained`` folder (``config.json``, one ``model.safetensors``) with a
``tokenizer.json`` and ``tokenizer_config.json``. :class:`PlainDecoder` runs the same computation as
transformers' modeling code, op for op in the same order (the RMSNorm in fp32 with the gain applied
last, rotary tables from the same inverse frequencies, SDPA with the key/value heads repeated, SwiGLU,
a tied or untied head), and takes the same arguments the scorers pass (``input_ids``, a 2-D padding or
4-D float ``attention_mask``, ``position_ids``, ``logits_to_keep``), so log-probabilities agree with
the HF model's to float rounding (tests/evals/test_plain_decoder.py compares both on every position,
for both families, tied and untied, padded and prefix-tree batches).

It builds only what it knows to be exact and returns None for anything else (another model type, a
RoPE scaling, sliding-window attention, an activation other than SiLU, sharded or extra weights, a
tokenizer file with settings beyond the special tokens, a config field a plug-in added): the caller then
loads the HF model, whose checks name a damaged file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

from ..layout import CKPT_WEIGHTS

FAMILIES = ("qwen2", "llama")
# the config.json fields of transformers' Qwen2 / Llama configs (and older names of the RoPE settings); a
# field beyond them is a plug-in's (a compartment embedding's settings, read by its checkpoint hook from the
# HF model's config): such a checkpoint is left to transformers and the hook
CONFIG_KEYS = frozenset({
    "_name_or_path", "architectures", "attention_bias", "attention_dropout", "bos_token_id",
    "chunk_size_feed_forward", "dtype", "torch_dtype", "eos_token_id", "head_dim", "hidden_act", "hidden_size",
    "id2label", "initializer_range", "intermediate_size", "is_encoder_decoder", "label2id", "layer_types",
    "max_position_embeddings", "max_window_layers", "mlp_bias", "model_type", "num_attention_heads",
    "num_hidden_layers", "num_key_value_heads", "output_attentions", "output_hidden_states", "pad_token_id",
    "pretraining_tp", "problem_type", "return_dict", "rms_norm_eps", "rope_parameters", "rope_theta",
    "rope_scaling", "sliding_window", "tie_word_embeddings", "transformers_version", "use_cache",
    "use_sliding_window", "vocab_size"})
# tokenizer_config.json keys whose effect this reproduces (special tokens) or that do not touch the ids of
# encode_batch(add_special_tokens=False); any other key means HF's tokenizer class may differ: not built here
TOKENIZER_KEYS = frozenset({"backend", "bos_token", "eos_token", "pad_token", "unk_token", "model_max_length",
                            "tokenizer_class", "added_tokens_decoder", "clean_up_tokenization_spaces"})


@dataclass(frozen=True)
class Shape:
    """What the forward needs from ``config.json``."""

    model_type: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    eps: float
    theta: float
    tied: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool


def read_shape(cfg: dict[str, Any]) -> Shape | None:
    """The :class:`Shape` of an HF ``config.json`` this module computes exactly, else None."""
    kind = cfg.get("model_type")
    if set(cfg) - CONFIG_KEYS or kind not in FAMILIES or cfg.get("hidden_act", "silu") != "silu":
        return None
    rope = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling")
    if rope.get("rope_type", "default") != "default" or (scaling and scaling.get("rope_type", "default") != "default"):
        return None
    if kind == "qwen2" and (cfg.get("use_sliding_window") or
                            any(t != "full_attention" for t in cfg.get("layer_types") or ())):
        return None
    if kind == "llama" and cfg.get("pretraining_tp", 1) != 1:
        return None
    try:
        hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        return Shape(model_type=kind, vocab=int(cfg["vocab_size"]), hidden=hidden,
                     layers=int(cfg["num_hidden_layers"]), heads=heads,
                     kv_heads=int(cfg.get("num_key_value_heads") or heads),
                     head_dim=int(cfg.get("head_dim") or hidden // heads), ffn=int(cfg["intermediate_size"]),
                     eps=float(cfg.get("rms_norm_eps", 1e-6)),
                     theta=float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))),
                     tied=bool(cfg.get("tie_word_embeddings", True)),
                     qkv_bias=True if kind == "qwen2" else bool(cfg.get("attention_bias", False)),
                     o_bias=False if kind == "qwen2" else bool(cfg.get("attention_bias", False)),
                     mlp_bias=False if kind == "qwen2" else bool(cfg.get("mlp_bias", False)))
    except (KeyError, TypeError, ValueError):
        return None


def tensor_shapes(s: Shape) -> dict[str, tuple[int, ...]]:
    """Every weight the checkpoint must hold, by its HF name (the head's only when untied)."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    want: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (s.vocab, s.hidden),
                                        "model.norm.weight": (s.hidden,)}
    if not s.tied:
        want["lm_head.weight"] = (s.vocab, s.hidden)
    for i in range(s.layers):
        p = f"model.layers.{i}."
        want.update({p + "input_layernorm.weight": (s.hidden,), p + "post_attention_layernorm.weight": (s.hidden,),
                     p + "self_attn.q_proj.weight": (q, s.hidden), p + "self_attn.k_proj.weight": (kv, s.hidden),
                     p + "self_attn.v_proj.weight": (kv, s.hidden), p + "self_attn.o_proj.weight": (s.hidden, q),
                     p + "mlp.gate_proj.weight": (s.ffn, s.hidden), p + "mlp.up_proj.weight": (s.ffn, s.hidden),
                     p + "mlp.down_proj.weight": (s.hidden, s.ffn)})
        if s.qkv_bias:
            want.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                         p + "self_attn.v_proj.bias": (kv,)})
        if s.o_bias:
            want[p + "self_attn.o_proj.bias"] = (s.hidden,)
        if s.mlp_bias:
            want.update({p + "mlp.gate_proj.bias": (s.ffn,), p + "mlp.up_proj.bias": (s.ffn,),
                         p + "mlp.down_proj.bias": (s.hidden,)})
    return want


class PlainDecoder(torch.nn.Module):
    """The forward of an HF Qwen2 / Llama causal LM over ``weights`` (HF names, fp32), for inference.

    ``model(input_ids, attention_mask=None, position_ids=None, logits_to_keep=0).logits`` as the HF
    model returns it; ``config`` carries what the scorers read (``model_type``, ``_attn_implementation``)."""

    def __init__(self, shape: Shape, weights: dict[str, torch.Tensor]):
        super().__init__()
        self.shape = shape
        self.config = SimpleNamespace(model_type=shape.model_type, _attn_implementation="sdpa",
                                      vocab_size=shape.vocab)
        # registered as (frozen) parameters under their HF names with dots made underscores: callers read
        # the device and dtype from next(model.parameters()), and .to() moves them
        self.names = {k: k.replace(".", "_") for k in weights}
        for k, v in weights.items():
            self.register_parameter(self.names[k], torch.nn.Parameter(v, requires_grad=False))
        dim = shape.head_dim
        # transformers' default RoPE: the same inverse frequencies, in fp32
        self.register_buffer("inv_freq", 1.0 / (shape.theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)),
                             persistent=False)

    def w(self, name: str) -> torch.Tensor | None:
        key = self.names.get(name)
        return None if key is None else getattr(self, key)

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.shape.eps)
        return self.w(name) * h.to(dtype)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w(name + ".weight"), self.w(name + ".bias"))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, logits_to_keep: int = 0, **_: Any) -> SimpleNamespace:
        s = self.shape
        b, t = input_ids.shape
        x = F.embedding(input_ids, self.w("model.embed_tokens.weight"))
        if position_ids is None:
            position_ids = torch.arange(t, device=x.device)[None]
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype)[:, None], emb.sin().to(x.dtype)[:, None]
        mask, causal = self._mask(attention_mask, b, t, x)
        rep = s.heads // s.kv_heads
        for i in range(s.layers):
            p = f"model.layers.{i}."
            h = self._norm(x, p + "input_layernorm.weight")
            q = self._linear(h, p + "self_attn.q_proj").view(b, t, -1, s.head_dim).transpose(1, 2)
            k = self._linear(h, p + "self_attn.k_proj").view(b, t, -1, s.head_dim).transpose(1, 2)
            v = self._linear(h, p + "self_attn.v_proj").view(b, t, -1, s.head_dim).transpose(1, 2)
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            if causal:  # no mask: is_causal with grouped heads, as transformers' SDPA path does then
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=s.head_dim ** -0.5,
                                                   enable_gqa=rep > 1)
            else:
                a = F.scaled_dot_product_attention(q, _repeat_kv(k, rep), _repeat_kv(v, rep), attn_mask=mask,
                                                   scale=s.head_dim ** -0.5)
            x = x + self._linear(a.transpose(1, 2).reshape(b, t, -1).contiguous(), p + "self_attn.o_proj")
            h = self._norm(x, p + "post_attention_layernorm.weight")
            h = F.silu(self._linear(h, p + "mlp.gate_proj")) * self._linear(h, p + "mlp.up_proj")
            x = x + self._linear(h, p + "mlp.down_proj")
        x = self._norm(x, "model.norm.weight")
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        head = self.w("model.embed_tokens.weight") if s.tied else self.w("lm_head.weight")
        return SimpleNamespace(logits=F.linear(x, head))

    @staticmethod
    def _mask(attention_mask: torch.Tensor | None, b: int, t: int, x: torch.Tensor):
        """(SDPA mask, causal flag): a 4-D mask as given; a 2-D padding mask as a boolean causal one (None
        and causal when nothing is padded); a padded query row keeps its own key, so no row is all -inf."""
        if attention_mask is not None and attention_mask.dim() == 4:
            return attention_mask.to(x.dtype) if attention_mask.is_floating_point() else attention_mask, False
        if attention_mask is None or bool(attention_mask.all()):
            return None, True
        idx = torch.arange(t, device=x.device)
        see = (idx[:, None] >= idx[None, :])[None] & attention_mask.bool()[:, None, :]
        return (see | torch.eye(t, dtype=torch.bool, device=x.device)[None])[:, None], False


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _repeat_kv(x: torch.Tensor, rep: int) -> torch.Tensor:
    if rep == 1:
        return x
    b, kv, t, d = x.shape
    return x[:, :, None].expand(b, kv, rep, t, d).reshape(b, kv * rep, t, d)


class PlainTokenizer:
    """A checkpoint's ``tokenizer.json`` with the special ids its ``tokenizer_config.json`` names: what the
    scorers read of an HF fast tokenizer (``backend_tokenizer``, ``bos/eos/pad_token_id``, ``__call__``)."""

    def __init__(self, backend, special: dict[str, int | None]):
        self.backend_tokenizer = backend
        self.bos_token_id, self.eos_token_id = special.get("bos_token"), special.get("eos_token")
        self.pad_token_id, self.unk_token_id = special.get("pad_token"), special.get("unk_token")

    def __call__(self, texts, add_special_tokens: bool = True) -> dict[str, Any]:
        one = isinstance(texts, str)
        enc = self.backend_tokenizer.encode_batch([texts] if one else list(texts), add_special_tokens=add_special_tokens)
        ids = [e.ids for e in enc]
        return {"input_ids": ids[0] if one else ids}

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)


def read_tokenizer(folder: Path) -> PlainTokenizer | None:
    """The folder's tokenizer as HF's fast tokenizer would encode it, or None when that is not certain."""
    try:
        cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict) or set(cfg) - TOKENIZER_KEYS:
        return None
    from tokenizers import Tokenizer

    try:
        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception:  # the tokenizers library raises plain Exception for a file it cannot parse
        return None
    # HF adds a listed token the file lacks: then its ids are not this file's
    for tid, tok in (cfg.get("added_tokens_decoder") or {}).items():
        content = tok.get("content") if isinstance(tok, dict) else None
        if content is None or backend.token_to_id(content) != int(tid):
            return None
    special: dict[str, int | None] = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        tok = cfg.get(key)
        tok = tok.get("content") if isinstance(tok, dict) else tok
        if tok is None:
            special[key] = None
        elif not isinstance(tok, str) or (tid := backend.token_to_id(tok)) is None:
            return None  # a special token outside the vocabulary: HF would add it
        else:
            special[key] = tid
    return PlainTokenizer(backend, special)


def load(folder: str | Path, device: str | torch.device = "cpu") -> tuple[PlainDecoder, PlainTokenizer] | None:
    """``(model, tokenizer)`` of a checkpoint folder in plain PyTorch (fp32, on ``device``), or None when
    the folder is anything this module does not compute exactly (module docstring)."""
    p = Path(folder)
    try:
        cfg = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    shape = read_shape(cfg) if isinstance(cfg, dict) else None
    weights_file = p / CKPT_WEIGHTS
    if shape is None or not weights_file.is_file() or any(p.glob("*.safetensors.index.json")):
        return None
    tok = read_tokenizer(p)
    if tok is None:
        return None
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        weights = load_file(str(weights_file))
    except (SafetensorError, OSError):
        return None
    if shape.tied:
        weights.pop("lm_head.weight", None)  # a tied head saved as well is the embedding again
    want = tensor_shapes(shape)
    if set(weights) != set(want) or any(tuple(weights[k].shape) != v for k, v in want.items()):
        return None
    weights = {k: v.float() for k, v in weights.items()}
    return PlainDecoder(shape, weights).to(device).eval(), tok
