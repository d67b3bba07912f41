"""Peak memory of one training rank, estimated from the model's shapes (no model is built).

Used by ``preschool plan`` (memory per GPU, the largest micro-batch that fits) and by the trainer and the
runner, which refuse what surely does not fit before any work. It lives under train/ so that the trainer
needs nothing from the planner (the planner reads experiments, which run the trainer).

Memory per GPU (bytes; P = parameters, W = ranks, T = micro-batch x seq_len
tokens, d hidden, q = heads x head_dim, kv = KV heads x head_dim, f FFN, V vocab,
L layers). Our trainer keeps fp32 weights and AdamW moments; on CUDA it runs
bf16 autocast (DDP) or FSDP2's bf16 MixedPrecisionPolicy with fp32 reduction;
on CPU everything is fp32.

- DDP: weights 4P, gradients 4P, AdamW moments 8P, DDP's gradient buckets 4P
  (``gradient_as_bucket_view`` off, torch's default; none with one process),
  on CUDA the bf16 weight copies autocast saves for backward 2P.
- FSDP: weights, gradients and moments sharded, 16P / W; gathered bf16 (CPU:
  fp32) copies of the root module (embeddings, final norm, head) and of two
  blocks (the current one and the prefetched next), the root's unsharded
  gradient, and one block's unsharded gradient plus its fp32 copy for the
  reduce-scatter.
- Activations saved for backward, per token per layer (counted tensor by tensor
  from HF's Llama/Qwen2 block with SDPA, whose flash kernels save no s x s
  matrix): CUDA DDP 26d + 6q + 4kv + 8f bytes (fp32 residual stream and norm
  outputs, autocast's bf16 input casts, bf16 q/k/v/attention output, four bf16
  FFN tensors); CUDA FSDP 12d + 6q + 4kv + 8f (the stream is bf16, no casts);
  CPU 16d + 12q + 8kv + 16f (fp32 throughout). With ``blocks`` checkpointing
  only each block's input survives (4d bytes per token per layer on CUDA DDP and
  CPU, 2d under FSDP) plus one block recomputed during backward.
- Output head, per token: 12V bytes at the start of backward (the fp32
  log-softmax saved by the loss, its gradient, and the logits' gradient), plus
  the head's gradient 4Vd allocated first in backward.
- Peak = weights + moments + buffers + max(forward-end activations + head + head
  gradient, all gradients + one recomputed block). With gradient accumulation
  (micro-batch < per-rank batch) every gradient (FSDP: its shard) already exists
  during the later micro-batches, so the first term holds all gradients instead
  of the head's (the trainer frees gradients after each step: set_to_none).
- CUDA runs also reserve 1 GiB for the context and cuBLAS/NCCL workspaces, and a
  plan "fits" only under 90 % of the card's memory (allocator fragmentation):
  both are assumptions, not measurements.

The CPU formula is checked against the peak RSS of real CPU runs in
tests/test_plan.py (within 25 %); the CUDA rows are estimates, not yet
measured on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from .flops import GIB

CUDA_RESERVED = 1 * GIB  # context + cuBLAS/NCCL workspaces (assumption)


@dataclass
class Memory:
    """Bytes per GPU (or per CPU process) for one mode at one micro-batch; ``total`` is the peak."""

    weights: float
    grads: float
    optimizer: float
    activations: float  # forward-end activations + head working set (at the peak)
    buffers: float  # DDP buckets / FSDP gathered params and unsharded grads / autocast weight copies
    reserved: float
    total: float


def layer_bytes_per_token(desc: dict, device: str, parallel: str) -> float:
    """Activation bytes one decoder block saves per token (see the module docstring)."""
    d, f = desc["hidden_size"], desc["ffn"]
    q = desc["heads"] * desc["head_dim"]
    kv = desc["kv_heads"] * desc["head_dim"]
    if device == "cpu":
        return 16 * d + 12 * q + 8 * kv + 16 * f
    if parallel == "fsdp":
        return 12 * d + 6 * q + 4 * kv + 8 * f
    return 26 * d + 6 * q + 4 * kv + 8 * f


def memory(desc: dict, micro: int, seq_len: int, world: int, parallel: str, checkpointing: str,
           device: str = "cuda", extra_params: int = 0, local_batch: int | None = None) -> Memory:
    """Peak memory per rank for one mode (formulas in the module docstring).

    ``local_batch`` is the per-rank batch: when ``micro`` is smaller the step
    accumulates gradients, so every gradient (4P, FSDP 4P / W) is alive through
    the later micro-batches' forward and backward, not only at the end of backward.
    """
    P = desc["params_total"] + extra_params
    d, L, V = desc["hidden_size"], desc["layers"], desc["vocab_size"]
    block = desc["params_per_layer"]
    root = P - L * block
    p_bytes = 4 if device == "cpu" else 2  # gathered/computed parameter dtype
    T = micro * seq_len
    per_layer = layer_bytes_per_token(desc, device, parallel)
    ckpt = checkpointing == "blocks"
    stream = 2 if (parallel == "fsdp" and device != "cpu") else 4
    layers = L * T * (stream * d if ckpt else per_layer)
    recompute = T * per_layer if ckpt else 0.0
    final_norm = T * 8 * d
    head = T * 12 * V
    head_grad = 4 * V * d
    sharded = parallel == "fsdp" and world > 1
    accumulating = local_batch is not None and micro < local_batch
    if sharded:
        weights, grads, optim = 4 * P / world, 4 * P / world, 8 * P / world
        gathered = p_bytes * root + 2 * p_bytes * block
        unsharded_grads = p_bytes * root + (p_bytes + 4) * block
        buffers = gathered + unsharded_grads
        held = grads if accumulating else 0.0  # the sharded gradients of the earlier micro-batches
        fwd = layers + final_norm + head + recompute + held
        bwd_end = grads + recompute
    else:
        weights, grads, optim = 4 * P, 4 * P, 8 * P
        buffers = 4 * P if (parallel == "ddp" and world > 1) else 0.0
        matmul_p = P - (V * d if desc["params_embedding"] > V * d else 0) - extra_params
        cast_copies = 2 * matmul_p if device != "cpu" else 0.0  # bf16 weights saved by autocast
        buffers += cast_copies
        # the head's gradient is the first one backward allocates; accumulating, all of them already exist
        held = grads if accumulating else head_grad
        fwd = layers + final_norm + head + held + recompute
        bwd_end = grads + recompute
    reserved = CUDA_RESERVED if device != "cpu" else 0.0
    # the peak is either at the start of backward (all activations + the head's working set) or at
    # its end (every gradient exists; with checkpointing one block is being recomputed)
    if fwd >= bwd_end:
        act, g = fwd - held, held
    else:
        act, g = recompute, grads
    return Memory(weights, g, optim, act, buffers, reserved, weights + optim + buffers + reserved + act + g)


def largest_micro(desc: dict, seq_len: int, world: int, parallel: str, checkpointing: str, device: str,
                  capacity: float, local_batch: int, extra_params: int = 0) -> int:
    """The largest micro-batch dividing the per-rank batch whose peak fits ``capacity`` (0: none)."""
    best = 0
    for m in range(1, local_batch + 1):
        if local_batch % m:
            continue
        if memory(desc, m, seq_len, world, parallel, checkpointing, device, extra_params,
                  local_batch).total <= capacity:
            best = m
    return best
