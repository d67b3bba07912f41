"""Where a CPU training step goes, and what model-level rewrites buy (docs/training.md, "What was tried").

In one run, on the same random-token batch and the same bare loop (forward, fp32
cross-entropy, backward, clip, fused AdamW), prints ratios against the HF model:

- the matmul bound: the model's linear layers' matmuls alone (forward and both backward
  products, at this machine's rate for their shapes), i.e. the most tokens/s any trainer
  could reach if attention, norms, loss and optimizer cost nothing;
- attention kernels at the preset's shape: SDPA flash (what HF uses) vs the math kernel, fwd+bwd;
- a hand-fused eager Qwen2 block (one QKV and one gate/up matmul, ``F.rms_norm``,
  SDPA ``is_causal`` with GQA, cached rotary tables) vs the HF model, tokens/s;
- with ``--attempts``: our batched-matmul attention (``BmmAttention``) vs SDPA flash at the
  model's GQA shape, and micro-batches of 8/4/2 rows with gradient accumulation vs the full batch;
- with ``--compile``: ``torch.compile`` of the HF model vs eager (steady state; compile time printed);
- with ``--profile``: the top ops of one HF step by self CPU time.

    python benchmarks/train_cpu_limits.py [--preset tiny-1m] [--compile] [--profile] [--attempts]

Everything runs with the retained heap our trainer uses on CPU (``cpu_heap: retain``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

import torch
import torch.nn.functional as F


def fused_model(hf):
    """Same shapes as ``hf`` (a Qwen2 model), our own eager implementation, random init."""
    c = hf.config
    d, H, KV = c.hidden_size, c.num_attention_heads, c.num_key_value_heads
    hd, ff, V = d // H, c.intermediate_size, c.vocab_size

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.Parameter(torch.ones(d)), torch.nn.Parameter(torch.ones(d))
            self.qkv = torch.nn.Linear(d, (H + 2 * KV) * hd, bias=True)
            self.o = torch.nn.Linear(H * hd, d, bias=False)
            self.gu = torch.nn.Linear(d, 2 * ff, bias=False)
            self.down = torch.nn.Linear(ff, d, bias=False)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q, k, v = self.qkv(F.rms_norm(x, (d,), self.ln1, c.rms_norm_eps)).view(B, T, H + 2 * KV, hd) \
                .transpose(1, 2).split([H, KV, KV], dim=1)

            def rot(t):
                a, b = t.chunk(2, -1)
                return t * cos + torch.cat((-b, a), -1) * sin

            a = F.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(B, T, H * hd))
            g, u = self.gu(F.rms_norm(x, (d,), self.ln2, c.rms_norm_eps)).chunk(2, -1)
            return x + self.down(F.silu(g) * u)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, d)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(c.num_hidden_layers))
            self.lnf = torch.nn.Parameter(torch.ones(d))
            theta = (c.rope_parameters or {}).get("rope_theta", 10000.0)
            inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd)
            f = torch.outer(torch.arange(4096).float(), inv)
            e = torch.cat((f, f), -1)
            self.register_buffer("cos", e.cos(), persistent=False)
            self.register_buffer("sin", e.sin(), persistent=False)

        def forward(self, input_ids):
            T = input_ids.shape[1]
            x = self.emb(input_ids)
            for b in self.blocks:
                x = b(x, self.cos[:T], self.sin[:T])
            return F.rms_norm(x, (d,), self.lnf, c.rms_norm_eps) @ self.emb.weight.t()

    return Model()


def tokens_per_s(model, logits_of, batch, steps=6, rounds=3, micro: int | None = None, after_step=None) -> float:
    """Best-of-rounds tokens/s of the bare loop (after 3 warm-up steps); ``micro`` rows per forward with
    gradient accumulation (the same optimizer step: the loss is summed over micro-batches and divided by all
    tokens); ``after_step`` is called after every step, warm-up included (a profiler's ``step``)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    micro = micro or batch.shape[0]

    def step():
        for i in range(0, batch.shape[0], micro):
            rows = batch[i:i + micro]
            logits = logits_of(model, rows[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1),
                                   reduction="sum") / batch[:, 1:].numel()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if after_step is not None:
            after_step()

    for _ in range(3):
        step()
    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        best = max(best, batch[:, :-1].numel() * steps / (time.perf_counter() - t))
    return best


def profile_step(model, logits_of, batch, steps: int = 4):
    """A torch profile of ``steps`` steps of the bare loop, recorded only after its 3 warm-up steps and 2 more
    that the profiler records and discards: the first steps under a profiler run several times slower in a few
    large ops (a 32 MiB ``fill_`` read 35 ms per call averaged over them, 0.6 ms alone), which distorts any
    share read from them. Returns the profile; divide its times by ``steps``."""
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=3, warmup=2, active=steps),
                 acc_events=True) as prof:
        tokens_per_s(model, logits_of, batch, steps=2 + steps, rounds=1, after_step=prof.step)
    return prof


def matmul_ms(model, tokens: int, reps: int = 5) -> float:
    """Milliseconds per step of every nn.Linear's three matmuls (x W^T; dY W; dY^T x) at ``tokens`` rows."""
    total = 0.0
    for mod in model.modules():
        if not isinstance(mod, torch.nn.Linear):
            continue
        out_f, in_f = mod.weight.shape
        x, w, g = torch.randn(tokens, in_f), torch.randn(out_f, in_f), torch.randn(tokens, out_f)
        ops = (lambda: x @ w.t(), lambda: g @ w, lambda: g.t() @ x)
        for f in ops:
            f()
        t = time.perf_counter()
        for _ in range(reps):
            for f in ops:
                f()
        total += (time.perf_counter() - t) / reps
    return total * 1e3


class BmmAttention(torch.autograd.Function):
    """Causal attention from batched matmuls: GQA folded into the batch (no K/V repeat), scale and
    mask fused into ``baddbmm``, probabilities saved for backward, work chunked over batch x KV heads
    so each chunk's scores stay in cache. Our attempt at beating SDPA's flash kernel on CPU."""

    @staticmethod
    def forward(ctx, q, k, v, chunk):
        B, H, T, D = q.shape
        KV = k.shape[1]
        G, scale = H // KV, D ** -0.5
        mask = torch.full((T, T), float("-inf")).triu(1).repeat(G, 1)
        qq, kk, vv = q.reshape(B * KV, G * T, D), k.reshape(B * KV, T, D), v.reshape(B * KV, T, D)
        out, probs = torch.empty(B * KV, G * T, D), []
        for i in range(0, B * KV, chunk):
            n = min(chunk, B * KV - i)
            p = torch.softmax(torch.baddbmm(mask.expand(n, -1, -1), qq[i:i + n], kk[i:i + n].transpose(1, 2),
                                            alpha=scale), -1)
            torch.bmm(p, vv[i:i + n], out=out[i:i + n])
            probs.append(p)
        ctx.save_for_backward(qq, kk, vv, *probs)
        ctx.meta = (chunk, scale, q.shape, k.shape)
        return out.view(B, H, T, D)

    @staticmethod
    def backward(ctx, g):
        qq, kk, vv, *probs = ctx.saved_tensors
        chunk, scale, qshape, kshape = ctx.meta
        gg = g.reshape(qq.shape)
        dq, dk, dv = torch.empty_like(qq), torch.empty_like(kk), torch.empty_like(vv)
        for j, i in enumerate(range(0, qq.shape[0], chunk)):
            p, sl = probs[j], slice(i, i + probs[j].shape[0])
            torch.bmm(p.transpose(1, 2), gg[sl], out=dv[sl])
            ds = torch._softmax_backward_data(torch.bmm(gg[sl], vv[sl].transpose(1, 2)), p, -1, p.dtype)
            torch.bmm(ds, kk[sl], out=dq[sl])
            torch.bmm(ds.transpose(1, 2), qq[sl], out=dk[sl])
        return dq.mul_(scale).view(qshape), dk.mul_(scale).view(kshape), dv.view(kshape), None


def attention_ms(B, H, T, hd, kind, kv=None, chunk=None, reps=10) -> float:
    """Causal attention fwd+bwd in ms at (B, H query heads, kv key/value heads (default H), T, hd):
    ``kind`` is SDPA's ``flash`` or ``math`` kernel, or ``ours`` (``BmmAttention`` with ``chunk``,
    checked against SDPA first)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kv = kv or H
    q = torch.randn(B, H, T, hd, requires_grad=True)
    k, v = (torch.randn(B, kv, T, hd, requires_grad=True) for _ in range(2))
    if kind == "ours":
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != H)
        assert torch.allclose(BmmAttention.apply(q, k, v, chunk), ref, atol=1e-5), "own attention disagrees with SDPA"
        fn = lambda: BmmAttention.apply(q, k, v, chunk)  # noqa: E731
        ctx = contextlib.nullcontext()
    else:
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != H)  # noqa: E731
        ctx = sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}[kind])
    with ctx:
        for _ in range(2):
            fn().sum().backward()
        t = time.perf_counter()
        for _ in range(reps):
            fn().sum().backward()
    return (time.perf_counter() - t) / reps * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny-1m")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--attempts", action="store_true",
                    help="also time our batched-matmul attention (GQA shape) and micro-batching with accumulation")
    a = ap.parse_args(argv)
    from preschool.train.cpu_heap import retain_freed_memory
    from preschool.train.model import ModelConfig, build_model

    retain_freed_memory()
    hf = build_model(ModelConfig(preset=a.preset), a.vocab, seed=0)
    c = hf.config
    batch = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1), generator=torch.Generator().manual_seed(0))
    print(f"{a.preset}: {sum(p.numel() for p in hf.parameters()) / 1e6:.2f}M params, batch {a.batch} x {a.seq_len}, "
          f"threads {torch.get_num_threads()}")

    shape = (a.batch, c.num_attention_heads, a.seq_len, c.hidden_size // c.num_attention_heads)
    fl, ma = attention_ms(*shape, "flash"), attention_ms(*shape, "math")
    print(f"attention {shape} fwd+bwd: flash {fl:.1f} ms, math {ma:.1f} ms -> flash is {ma / fl:.2f}x faster")

    hf_logits = lambda m, x: m(input_ids=x).logits  # noqa: E731
    base = tokens_per_s(hf, hf_logits, batch)
    tokens = a.batch * a.seq_len
    mm = matmul_ms(hf, tokens)
    print(f"HF model {base:,.0f} tok/s ({tokens / base * 1e3:.0f} ms/step); its linear layers' matmuls alone take "
          f"{mm:.0f} ms/step -> bound {tokens / mm * 1e3:,.0f} tok/s = {tokens / mm * 1e3 / base:.2f}x the HF model "
          f"with everything else free")
    mm_attn = mm + c.num_hidden_layers * fl
    print(f"matmuls + flash attention ({c.num_hidden_layers} x {fl:.1f} ms) take {mm_attn:.0f} ms/step -> bound "
          f"{tokens / mm_attn * 1e3:,.0f} tok/s = {tokens / mm_attn * 1e3 / base:.2f}x the HF model with norms, "
          f"rotary, SiLU, loss and optimizer free")
    fused = tokens_per_s(fused_model(hf), lambda m, x: m(x), batch)
    print(f"HF model {base:,.0f} tok/s; hand-fused eager block {fused:,.0f} tok/s -> RATIO {fused / base:.2f}x")

    if a.attempts:
        H, KV, hd = c.num_attention_heads, c.num_key_value_heads, c.hidden_size // c.num_attention_heads
        fl_gqa = attention_ms(a.batch, H, a.seq_len, hd, "flash", kv=KV)
        own = {ch: attention_ms(a.batch, H, a.seq_len, hd, "ours", kv=KV, chunk=ch) for ch in (a.batch * KV, 16, 8, 4, 2)}
        print(f"attention with GQA {(a.batch, H, KV, a.seq_len, hd)}: flash {fl_gqa:.1f} ms; ours (batched matmuls) "
              "by chunk: " + ", ".join(f"{ch}: {ms:.1f} ms ({fl_gqa / ms:.2f}x)" for ch, ms in own.items()))
        for micro in (8, 4, 2):
            if micro < a.batch:
                got = tokens_per_s(hf, hf_logits, batch, micro=micro)
                print(f"micro-batches of {micro} rows with accumulation: {got:,.0f} tok/s -> RATIO {got / base:.2f}x")

    if a.compile:
        t = time.perf_counter()
        comp = torch.compile(hf)
        tokens_per_s(comp, hf_logits, batch, steps=1, rounds=1)  # compiles
        t_comp = time.perf_counter() - t
        got = tokens_per_s(comp, hf_logits, batch)
        print(f"torch.compile(HF model) {got:,.0f} tok/s after {t_comp:.0f} s compiling -> RATIO {got / base:.2f}x")

    if a.profile:
        print("one HF step's top ops (4 steps profiled after warm-up):")
        print(profile_step(hf, hf_logits, batch).key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    return 0


if __name__ == "__main__":
    sys.exit(main())
