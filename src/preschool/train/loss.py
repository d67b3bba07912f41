"""Summed next-token cross-entropy straight from the final hidden states, without a [B, L, V] logits tensor.

At the papers' scale (vocab 128k, 4k context) the logits of one micro-batch
row are 4096 x 128,256 fp32 = 2.1 GB, and the plain path keeps them (and
their softmax for the backward) alive. The fused paths here never hold more
than one chunk of them:

- ``chunked`` (:class:`ChunkedLinearCrossEntropy`, pure PyTorch, any device):
  the positions are cut into chunks of ``chunk_size``; for each chunk the
  forward computes the logits, their log-sum-exp, the summed loss *and* the
  gradients with respect to the hidden states and the head weight, then frees
  the chunk's logits. The backward only scales those stored gradients by the
  incoming gradient. Memory: one chunk of logits plus a gradient buffer the
  size of the head weight (which the backward would allocate anyway).
  The FLOPs are those of the plain path (forward matmul, two backward matmuls).
- ``liger`` (CUDA): Liger-Kernel's Triton fused linear cross-entropy, the same
  algorithm in fused kernels. Needs ``pip install 'preschool[gpu]'``.

Both return the **sum** of the per-token losses over positions whose label is
not ``IGNORE_INDEX``, like ``F.cross_entropy(..., reduction="sum")`` on the
plain logits, so the trainer's global token-mean normalisation (divide by the
loss-token count of the whole global batch) is unchanged.

Both run inside the model's forward (:class:`FusedLoss`, a forward hook on
the root module), not after it. Under ``parallel: fsdp`` the LM head weight
is whole only inside the root's forward (between FSDP2's pre- and
post-forward hooks); outside it, a root that reshards after forward holds a
one-rank shard (a DTensor). Inside, the loss reads the whole weight, its
result is part of the root's output, so FSDP's pre-backward hook gathers the
weight again before the loss's backward and reduce-scatters its gradient like
any other; this does not depend on the root's reshard policy. DDP and a single
process run the same code.

Numerics: the matmuls run in the autocast dtype when autocast is on (as the
plain path's ``lm_head`` would), softmax and the loss in fp32, and the head
weight's gradient is accumulated over chunks in fp32 (``liger``: Liger's
``accum_dtype=float32``; without it Liger sums it in the operands' bf16). Like
the plain path's autocast ``lm_head``, ``liger`` hands that fp32 sum through
the bf16 copy of the weight, so it is rounded to bf16 once, at the end;
``chunked`` returns it in the weight's own dtype. Under fp32 the result equals the plain path to float
rounding (tests: loss and every parameter gradient within rtol 1e-5 / atol 1e-6
relative to the gradient scale).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator, Literal

import torch

from ..errors import ConfigError
from ..data.mixture import IGNORE_INDEX

FusedLoss = Literal["auto", "off", "chunked", "liger"]

# logits elements per chunk: 2**24 fp32 = 64 MiB (and as much again for the softmax gradient) on an
# accelerator; on a CPU 2**19 (2 MiB): the chunk's logits, log-probabilities and gradient then stay in
# the cores' L2 caches between the passes over them instead of going out to memory and back
CHUNK_ELEMENTS = 1 << 24
CPU_CHUNK_ELEMENTS = 1 << 19
# ``auto`` on a CPU picks the chunked path once one micro-batch's logits would reach this many
# elements (2**26 fp32 = 256 MiB). Below it the plain path is as fast and simpler; the
# CPU presets (tiny-1m at 16 x 256 x 2048 = 2**23) stay on it.
AUTO_MIN_ELEMENTS = 1 << 26
# ``auto`` on CUDA picks a fused path only for memory: the plain path (one cuBLAS matmul and a fused
# cross-entropy) is faster there (H200, gpt-125m, seq 4096, vocab 128,256: 90.2k tokens/s plain vs
# 84.4k fused, issue #38), so it is kept until the logits the plain path holds (bf16 logits, their
# fp32 copy and the fp32 softmax gradient: 10 bytes per element) would take this share of the GPU.
AUTO_GPU_LOGITS_SHARE = 0.25
PLAIN_LOGITS_BYTES = 10


def chunk_size_for(vocab: int, device: torch.device | str = "cuda") -> int:
    """Positions per chunk so that one chunk's logits hold about ``CHUNK_ELEMENTS`` numbers
    (``CPU_CHUNK_ELEMENTS`` on a CPU)."""
    elements = CPU_CHUNK_ELEMENTS if torch.device(device).type == "cpu" else CHUNK_ELEMENTS
    return max(1, elements // max(vocab, 1))


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """``sum CE(hidden @ weight.T, labels)`` over non-ignored labels, computed chunk by chunk.

    ``hidden`` is (N, d), ``weight`` (V, d), ``labels`` (N,) with ``IGNORE_INDEX``
    for positions without loss; ``compute_dtype`` is the matmul dtype (the
    autocast dtype, or the weight's). Returns an fp32 scalar.
    """

    @staticmethod
    def forward(ctx, hidden, weight, labels, chunk: int, compute_dtype: torch.dtype):
        n = hidden.shape[0]
        w = weight.to(compute_dtype)
        grad_h = torch.empty_like(hidden) if hidden.requires_grad else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if weight.requires_grad else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        keep_all = labels != IGNORE_INDEX
        target_all = torch.where(keep_all, labels, torch.zeros_like(labels))
        for lo in range(0, n, chunk):
            h = hidden[lo:lo + chunk].to(compute_dtype)
            target = target_all[lo:lo + chunk, None]
            keep = keep_all[lo:lo + chunk, None]
            # fp32 log-probabilities in one pass over the chunk's logits (the cast fused into it)
            logp = torch.log_softmax(h @ w.T, dim=-1, dtype=torch.float32)
            total -= (logp.gather(1, target) * keep).sum()
            if grad_h is None and grad_w is None:
                continue
            # d(sum CE)/d logits = softmax - onehot(target); an ignored row's is zeroed through the
            # (positions x hidden) operands below, never by another pass over the (positions x vocab) one
            g = logp.exp_()
            g.scatter_add_(1, target, torch.full_like(target, -1.0, dtype=g.dtype))
            g = g.to(compute_dtype)
            if grad_h is not None:
                grad_h[lo:lo + chunk] = ((g @ w) * keep).to(hidden.dtype)
            if grad_w is None:
                pass
            elif compute_dtype == torch.float32:
                grad_w.addmm_(g.T, h * keep)
            else:  # low-precision matmul, fp32 accumulation across chunks
                grad_w += (g.T @ (h * keep)).float()
        ctx.save_for_backward(*(t for t in (grad_h, grad_w) if t is not None))
        ctx.has = (grad_h is not None, grad_w is not None)
        ctx.weight_dtype = weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_out):
        saved = list(ctx.saved_tensors)
        gh = saved.pop(0) * grad_out.to(ctx.saved_tensors[0].dtype) if ctx.has[0] else None
        gw = (saved.pop(0) * grad_out).to(ctx.weight_dtype) if ctx.has[1] else None
        return gh, gw, None, None, None


def chunked_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                                 chunk: int | None = None) -> torch.Tensor:
    """Summed CE of ``hidden @ weight.T`` against ``labels`` (any leading shape), never holding all logits.

    Honours an active autocast (matmuls in its dtype). ``chunk`` defaults to
    :func:`chunk_size_for` the vocabulary and device.
    """
    dev = hidden.device.type
    dtype = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else weight.dtype
    h = hidden.reshape(-1, hidden.shape[-1])
    with torch.autocast(dev, enabled=False):
        return ChunkedLinearCrossEntropy.apply(h, weight, labels.reshape(-1),
                                               chunk or chunk_size_for(weight.shape[0], hidden.device), dtype)


@functools.lru_cache(maxsize=1)
def liger_available() -> bool:
    """Whether Liger-Kernel (``preschool[gpu]``) imports in this environment."""
    try:
        import liger_kernel.transformers  # noqa: F401
    except Exception:  # not installed, or its Triton build does not load here
        return False
    return True


def liger_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed CE through Liger-Kernel's fused linear cross-entropy (CUDA, ``preschool[gpu]``), the head
    gradient accumulated in fp32."""
    import inspect

    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

    if "accum_dtype" not in inspect.signature(LigerFusedLinearCrossEntropyLoss).parameters:
        raise ConfigError("fused_loss", "this Liger-Kernel cannot accumulate the head gradient in fp32 (no "
                          "accum_dtype); install the locked version (make setup-gpu) or use 'chunked'")
    fn = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE_INDEX, reduction="sum", accum_dtype=torch.float32)
    dev = hidden.device.type
    h = hidden.reshape(-1, hidden.shape[-1])
    if torch.is_autocast_enabled(dev):  # Liger's kernels take one dtype for both operands
        h = h.to(torch.get_autocast_dtype(dev))
    out = fn(weight.to(h.dtype), h, labels.reshape(-1))
    return (out[0] if isinstance(out, tuple) else out).float()


def resolve_fused_loss(mode: str, device: torch.device, positions: int, vocab: int,
                       device_memory: int | None = None) -> str:
    """The loss path a run uses: ``off``, ``chunked`` or ``liger``.

    ``auto`` chooses a fused path for memory, never for speed: on CUDA once a micro-batch's logits
    (``positions`` x ``vocab`` x :data:`PLAIN_LOGITS_BYTES`) would exceed :data:`AUTO_GPU_LOGITS_SHARE`
    of ``device_memory`` (default: the GPU's total memory), then ``liger`` when Liger-Kernel is
    installed, else ``chunked``; on a CPU ``chunked`` once the logits reach ``AUTO_MIN_ELEMENTS``;
    otherwise ``off``. An explicit ``liger`` off CUDA or without the package is a ConfigError saying
    how to get it.
    """
    if mode == "liger":
        if device.type != "cuda":
            raise ConfigError("fused_loss", f"'liger' runs on CUDA only (device is {device.type}); use 'chunked'")
        if not liger_available():
            raise ConfigError("fused_loss", "'liger' needs Liger-Kernel: pip install 'preschool[gpu]' "
                              "(or use 'chunked', the pure-PyTorch path)")
        return "liger"
    if mode == "auto":
        if device.type == "cuda":
            if device_memory is None:
                device_memory = torch.cuda.get_device_properties(device).total_memory
            if positions * vocab * PLAIN_LOGITS_BYTES <= AUTO_GPU_LOGITS_SHARE * device_memory:
                return "off"
            return "liger" if liger_available() else "chunked"
        return "chunked" if positions * vocab >= AUTO_MIN_ELEMENTS else "off"
    return mode


def linear_cross_entropy(path: str, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed CE by the resolved fused ``path`` (``chunked`` or ``liger``)."""
    if path == "liger":
        return liger_linear_cross_entropy(hidden, weight, labels)
    return chunked_linear_cross_entropy(hidden, weight, labels)


class FusedLoss:
    """The fused loss of a training forward, computed inside ``model``'s forward and returned as ``output.loss``.

    Two forward hooks, and nothing asked of transformers: one on the base model
    (``model.model``, whose output's ``last_hidden_state`` is the final, normed
    hidden state) keeps that tensor; one on ``model`` (the root module, the one
    FSDP2 shards last), run before any other forward hook and hence before
    FSDP's post-forward reshard, computes :func:`linear_cross_entropy` by
    ``path`` of it and the model's output-embedding weight. The model is called
    with an empty ``logits_to_keep`` (no logits) and without
    ``output_hidden_states``: that option makes transformers install
    output-capturing hooks in every decoder layer, which break the graph of a
    compiled block. Only a forward made inside :meth:`labels` is touched; every
    other forward (validation, callbacks) passes through unchanged::

        fused = FusedLoss(model, "chunked")
        with fused.labels(labels):
            out = model(input_ids=ids, logits_to_keep=torch.empty(0, dtype=torch.long))
        out.loss  # summed CE over the non-ignored labels
    """

    def __init__(self, model: torch.nn.Module, path: str):
        if path not in ("chunked", "liger"):
            raise ConfigError("fused_loss", f"a fused loss path is 'chunked' or 'liger', got {path!r}")
        base = getattr(model, getattr(model, "base_model_prefix", ""), None)
        if not isinstance(base, torch.nn.Module):
            raise ConfigError("fused_loss", f"{type(model).__name__} has no base model (model.model) whose final "
                              "hidden state the fused loss could read; use fused_loss: off")
        self.path = path
        self._labels: torch.Tensor | None = None
        self._hidden: torch.Tensor | None = None
        self._handles = [base.register_forward_hook(self._keep_hidden),
                         model.register_forward_hook(self._hook, prepend=True)]

    @contextlib.contextmanager
    def labels(self, labels: torch.Tensor) -> Iterator[None]:
        """The next forward of the model in this block computes its loss against ``labels``."""
        self._labels = labels
        try:
            yield
        finally:
            self._labels = self._hidden = None

    def _keep_hidden(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self._labels is not None:
            self._hidden = output[0] if isinstance(output, tuple) else output.last_hidden_state

    def _hook(self, module: torch.nn.Module, args: Any, output: Any) -> Any:
        if self._labels is None:
            return None
        labels, hidden, self._labels, self._hidden = self._labels, self._hidden, None, None  # one loss per block
        if hidden is None:
            raise ConfigError("fused_loss", f"the base model of {type(module).__name__} did not run in its forward; "
                              "the fused loss has no final hidden state to read")
        output["loss"] = linear_cross_entropy(self.path, hidden, module.get_output_embeddings().weight, labels)
        return output

    def remove(self) -> None:
        """Detach the hooks from the model."""
        for h in self._handles:
            h.remove()
