"""Fused / chunked linear + cross-entropy: same loss and gradients as the plain logits path."""

import json
import warnings

import pytest
import torch
import torch.nn.functional as F

from preschool.data.mixture import IGNORE_INDEX
from preschool.errors import ConfigError
from preschool.train.loss import chunked_linear_cross_entropy, resolve_fused_loss
from preschool.train.model import ModelConfig, build_model


def _plain(hidden, weight, labels):
    logits = hidden @ weight.T
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction="sum")


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_chunked_matches_plain_loss_and_grads(chunk):
    g = torch.Generator().manual_seed(0)
    h = torch.randn(3, 20, 16, generator=g, requires_grad=True)
    w = torch.randn(50, 16, generator=g, requires_grad=True)
    y = torch.randint(0, 50, (3, 20), generator=g)
    y[0, :5] = IGNORE_INDEX  # loss-masked positions contribute nothing
    y[2, -3:] = IGNORE_INDEX
    ref = _plain(h, w, y)
    gh_ref, gw_ref = torch.autograd.grad(ref * 0.37, (h, w))
    out = chunked_linear_cross_entropy(h, w, y, chunk=chunk)
    gh, gw = torch.autograd.grad(out * 0.37, (h, w))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gh, gh_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gw, gw_ref, rtol=1e-5, atol=1e-6)
    assert gh[0, :5].abs().max() == 0  # masked positions get no gradient


def test_chunked_under_bf16_autocast_tracks_plain():
    g = torch.Generator().manual_seed(1)
    h = torch.randn(64, 32, generator=g, requires_grad=True)
    w = (torch.randn(300, 32, generator=g) * 0.1).requires_grad_()
    y = torch.randint(0, 300, (64,), generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = F.cross_entropy((h @ w.T).float(), y, reduction="sum")
        out = chunked_linear_cross_entropy(h, w, y, chunk=16)
    assert out.dtype == torch.float32
    gh_ref, gw_ref = torch.autograd.grad(ref, (h, w))
    gh, gw = torch.autograd.grad(out, (h, w))
    assert gw.dtype == torch.float32 and gh.dtype == torch.float32
    # bf16 matmuls on both sides: agreement to bf16 rounding
    torch.testing.assert_close(out, ref, rtol=2e-3, atol=0.0)
    torch.testing.assert_close(gw, gw_ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(gh, gh_ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("family", ["qwen2", "llama", "olmo2", "gpt_neox", "gpt2"])
def test_model_level_parity_every_parameter_gradient(family):
    """Through the HF model of every family, as the trainer computes it (FusedLoss: empty ``logits_to_keep``,
    the base model's final hidden state) == plain logits, every grad."""
    from preschool.train.loss import FusedLoss

    torch.manual_seed(0)
    model = build_model(ModelConfig("micro", family=family, overrides={"hidden_size": 32}), 97, seed=3)
    ids = torch.randint(0, 97, (2, 12))
    labels = torch.roll(ids, -1, 1)
    labels[:, :4] = IGNORE_INDEX
    ref = F.cross_entropy(model(input_ids=ids, use_cache=False).logits.reshape(-1, 97), labels.reshape(-1),
                          ignore_index=IGNORE_INDEX, reduction="sum")
    ref.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    fused = FusedLoss(model, "chunked")
    with fused.labels(labels):
        out = model(input_ids=ids, use_cache=False, logits_to_keep=torch.empty(0, dtype=torch.long))
    assert out.logits.shape[1] == 0  # the [B, L, V] tensor is never built
    out.loss.backward()
    torch.testing.assert_close(out.loss, ref, rtol=1e-5, atol=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[n], rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")


def test_fused_loss_is_computed_inside_the_forward_of_a_sharded_root():
    """FSDP2 on one rank, the root resharding after forward (so outside its forward the head is a DTensor
    shard): FusedLoss computes the loss inside the forward and every gradient equals the plain path's on an
    unsharded copy (fp32, rtol 1e-4 / atol 1e-6 as above). Forwards outside ``labels()`` are untouched."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    from preschool.train.distributed import process_group
    from preschool.train.loss import FusedLoss
    from preschool.train.parallel import decoder_blocks, full_tensor

    cfg = ModelConfig("micro", tie_embeddings=False, overrides={"hidden_size": 32, "intermediate_size": 64})
    ref, model = build_model(cfg, 97, seed=3), build_model(cfg, 97, seed=3)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 97, (2, 12), generator=g)
    labels = torch.roll(ids, -1, 1)
    labels[:, :4] = IGNORE_INDEX
    want_loss = F.cross_entropy(ref(input_ids=ids, use_cache=False).logits.reshape(-1, 97), labels.reshape(-1),
                                ignore_index=IGNORE_INDEX, reduction="sum")
    want_loss.backward()
    with process_group("cpu", one_rank=True):
        mesh = init_device_mesh("cpu", (1,))
        for block in decoder_blocks(model):
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh, reshard_after_forward=True)
        fused = FusedLoss(model, "chunked")
        kw = {"use_cache": False, "logits_to_keep": torch.empty(0, dtype=torch.long)}
        assert model(input_ids=ids, use_cache=False).loss is None  # no labels(): plain
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with fused.labels(labels):  # the trainer's call
                out = model(input_ids=ids, **kw)
        # the loss reads the base model's output, not output_hidden_states: no hidden-state tuple in the
        # root's output, so FSDP2 has no view (its hook on the first block's input) to warn about
        assert out.hidden_states is None and not [w for w in caught if "view tensor" in str(w.message)]
        assert isinstance(model.get_output_embeddings().weight, DTensor)  # outside the forward: a shard
        out.loss.backward()
        torch.testing.assert_close(out.loss, want_loss, rtol=1e-5, atol=1e-5)
        got = {n: full_tensor(p.grad) for n, p in model.named_parameters()}
        fused.remove()
    for n, p in ref.named_parameters():
        torch.testing.assert_close(got[n], p.grad, rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")


def test_resolve_auto_and_errors():
    cpu = torch.device("cpu")
    assert resolve_fused_loss("auto", cpu, 16 * 256, 2048) == "off"  # tiny-1m: small logits, plain path
    assert resolve_fused_loss("auto", cpu, 4096, 128_256) == "chunked"  # paper scale
    assert resolve_fused_loss("off", cpu, 4096, 128_256) == "off"
    assert resolve_fused_loss("chunked", cpu, 8, 8) == "chunked"
    with pytest.raises(ConfigError, match="fused_loss.*CUDA"):
        resolve_fused_loss("liger", cpu, 8, 8)


def test_auto_on_cuda_fuses_for_memory_only(monkeypatch):
    """On a GPU the plain loss is faster: auto keeps it until the logits would take a quarter of the
    GPU's memory, then takes Liger when installed, else chunked."""
    import preschool.train.loss as L

    cuda, h200 = torch.device("cuda"), 141 * 10**9
    monkeypatch.setattr(L, "liger_available", lambda: True)
    assert resolve_fused_loss("auto", cuda, 4 * 4096, 128_256, device_memory=h200) == "off"  # 21 GB of 141
    assert resolve_fused_loss("auto", cuda, 16 * 4096, 128_256, device_memory=h200) == "liger"  # 84 GB
    assert resolve_fused_loss("auto", cuda, 4 * 4096, 128_256, device_memory=24 * 10**9) == "liger"  # a 24 GB card
    monkeypatch.setattr(L, "liger_available", lambda: False)
    assert resolve_fused_loss("auto", cuda, 16 * 4096, 128_256, device_memory=h200) == "chunked"


def _losses(run):
    return [json.loads(l)["loss"] for l in (run / "metrics.jsonl").read_text().splitlines()
            if json.loads(l)["event"] == "train"]


def test_trainer_chunked_equals_plain(tmp_path, datasets, micro_cfg):
    """Loss-masked, 2 micro-batches: the chunked run's loss curve is the plain run's to float rounding."""
    from preschool.train.trainer import train

    stages = [{"name": "s", "data": "synth", "tokens": 4 * 16 * 6}]
    train(micro_cfg(stages=stages, micro_batch_size=2, fused_loss="off"), tmp_path / "plain", datasets)
    train(micro_cfg(stages=stages, micro_batch_size=2, fused_loss="chunked"), tmp_path / "chunked", datasets)
    a, b = _losses(tmp_path / "plain"), _losses(tmp_path / "chunked")
    assert len(a) == 6
    assert a[-1] < a[0]
    torch.testing.assert_close(torch.tensor(b), torch.tensor(a), rtol=1e-4, atol=1e-5)


class _StandInLigerFLCE(torch.autograd.Function):
    """Liger's fused linear cross-entropy as its contract reads (summed CE, chunks of rows, the head
    gradient accumulated across chunks in ``accum_dtype``, or in the weight's dtype when None), in PyTorch."""

    @staticmethod
    def forward(ctx, hidden, weight, target, ignore_index, accum_dtype, chunk):
        grad_h = torch.empty_like(hidden)
        grad_w = torch.zeros_like(weight, dtype=accum_dtype or weight.dtype)
        loss = torch.zeros((), dtype=torch.float32)
        for lo in range(0, hidden.shape[0], chunk):
            h, y = hidden[lo:lo + chunk], target[lo:lo + chunk]
            keep = y != ignore_index
            logits = (h @ weight.T).float()
            loss += (torch.logsumexp(logits, -1) - logits.gather(1, y.clamp(min=0)[:, None])[:, 0])[keep].sum()
            g = torch.softmax(logits, -1)
            g[torch.arange(len(y)), y.clamp(min=0)] -= 1
            g = (g * keep[:, None]).to(weight.dtype)
            grad_h[lo:lo + chunk] = g @ weight
            grad_w += (g.T @ h).to(grad_w.dtype)
        ctx.save_for_backward(grad_h, grad_w)
        return loss

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None, None, None


@pytest.fixture
def standin_liger_loss(monkeypatch):
    import sys
    import types

    class LigerFusedLinearCrossEntropyLoss(torch.nn.Module):
        def __init__(self, ignore_index=-100, reduction="mean", accum_dtype=None):
            super().__init__()
            assert reduction == "sum"
            self.ignore_index, self.accum_dtype = ignore_index, accum_dtype

        def forward(self, lin_weight, _input, target):
            return _StandInLigerFLCE.apply(_input, lin_weight, target, self.ignore_index, self.accum_dtype, 4)

    pkg, sub = types.ModuleType("liger_kernel"), types.ModuleType("liger_kernel.transformers")
    sub.LigerFusedLinearCrossEntropyLoss = LigerFusedLinearCrossEntropyLoss
    pkg.transformers = sub
    monkeypatch.setitem(sys.modules, "liger_kernel", pkg)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", sub)


def test_liger_loss_accumulates_the_head_gradient_in_fp32(standin_liger_loss):
    """Under bf16 autocast, over 64 chunks, the head gradient stays within the per-chunk bf16 products'
    rounding of the exact one (from the bf16 operands, in fp64): rtol 2**-7, atol 0.3 % of its largest
    entry. Summed across chunks in bf16 (Liger's default) it misses that by 3x and more."""
    from preschool.train.loss import liger_linear_cross_entropy

    g = torch.Generator().manual_seed(0)
    h = torch.randn(256, 32, generator=g, requires_grad=True)
    w = (torch.randn(40, 32, generator=g) * 0.3).requires_grad_()
    y = torch.randint(0, 40, (256,), generator=g)
    y[:7] = IGNORE_INDEX
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = liger_linear_cross_entropy(h, w, y)
    (gw,) = torch.autograd.grad(out, (w,))
    w64 = w.detach().bfloat16().double().requires_grad_()
    ref = F.cross_entropy(h.detach().bfloat16().double() @ w64.T, y, ignore_index=IGNORE_INDEX, reduction="sum")
    (gw_ref,) = torch.autograd.grad(ref, (w64,))
    assert gw.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=0.0)
    torch.testing.assert_close(gw.double(), gw_ref, rtol=2 ** -7, atol=3e-3 * float(gw_ref.abs().max()))
