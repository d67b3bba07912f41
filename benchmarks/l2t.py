"""L2T transform throughput: documents/s per core, 1 -> 2 worker scaling, and
transformed tokens/s divided by the training tokens/s of the ``small-6m`` preset.

Everything is measured in this one run on this machine:

1. documents: the shared novels (``../shared/data/novels``) cut into ~20 kB
   documents (paragraph groups), or the built-in storybook corpus if absent;
2. transform rate: ``encode_documents`` (sentence split + task + format +
   tokenization, i.e. everything the packer needs) with 1 worker and with 2;
   "transform only" excludes tokenization;
3. training rate: a plain torch loop (AdamW, fp32, batch 8) of the ``small-6m``
   Qwen2 preset on rows of the same length, measured after a warm-up step;
4. ratio = output tokens/s (L2T samples + raw text, all that the trainer will
   read) / training tokens/s. The issue asks for >= 20.

    python benchmarks/l2t.py [--documents 300] [--seq-len 512] [--train-steps 4]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "novels"


def documents(n: int) -> tuple[list[str], str]:
    from preschool.l2t.inputs import iter_texts

    docs: list[str] = []
    if SHARED.is_dir():
        for _, text in iter_texts(SHARED):
            paras = text.split("\n\n")
            cur, size = [], 0
            for p in paras:
                cur.append(p)
                size += len(p)
                if size >= 20_000:
                    docs.append("\n\n".join(cur))
                    cur, size = [], 0
                    if len(docs) >= n:
                        return docs, "novels (20 kB pieces)"
        return docs, "novels (20 kB pieces)"
    return [t for _, t in iter_texts("storybook", max_documents=n)], "storybook"


def transform_rate(docs, cfg, tok, workers: int) -> dict:
    from preschool.l2t.build import DocumentEncoder, encode_documents

    enc = DocumentEncoder(cfg, tok.to_str())
    t = time.perf_counter()
    n_tok = n_l2t = 0
    for d in encode_documents(docs, enc, workers):
        n_l2t += sum(len(s.ids) for s in d.samples)
        n_tok += sum(len(s.ids) for s in d.samples) + (len(d.raw.ids) if d.raw is not None else 0)
    dt = time.perf_counter() - t
    return {"docs_per_s": len(docs) / dt, "tokens_per_s": n_tok / dt, "l2t_tokens_per_s": n_l2t / dt, "s": dt}


def transform_only_rate(docs, cfg) -> float:
    from preschool.l2t.transform import L2TTransform

    tf = L2TTransform(cfg.l2t)
    t = time.perf_counter()
    prev = None
    for i, text in enumerate(docs):
        tf(i, text, prev)
        prev = text
    return len(docs) / (time.perf_counter() - t)


def train_rate(seq_len: int, vocab: int, steps: int, batch: int = 8) -> float:
    import torch

    from preschool.train.model import ModelConfig, build_model

    model = build_model(ModelConfig(preset="small-6m"), vocab, seed=0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, seq_len + 1), generator=g)

    def step():
        out = model(input_ids=x[:, :-1], labels=x[:, :-1])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch * seq_len / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=300)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--train-steps", type=int, default=4)
    args = ap.parse_args()

    from preschool.config import from_dict
    from preschool.data.tokenizer import train_bpe
    from preschool.l2t.build import BuildConfig

    docs, what = documents(args.documents)
    mb = sum(len(d) for d in docs) / 1e6
    tok = train_bpe(docs[:100], 2048)
    cfg = from_dict(BuildConfig, {"seq_len": args.seq_len, "l2t": {"chunk_tokens": args.seq_len // 4}})
    print(f"corpus: {len(docs)} documents from {what}, {mb:.1f} MB; seq_len {args.seq_len}; cores: {os.cpu_count()}")
    only = transform_only_rate(docs, cfg)
    print(f"transform only (split+task+format), 1 core: {only:8.1f} docs/s")
    r1 = transform_rate(docs, cfg, tok, 1)
    print(f"transform + tokenize, 1 worker : {r1['docs_per_s']:8.1f} docs/s  {r1['tokens_per_s']:10.0f} tok/s "
          f"({r1['l2t_tokens_per_s']:.0f} L2T tok/s)")
    r2 = transform_rate(docs, cfg, tok, 2)
    print(f"transform + tokenize, 2 workers: {r2['docs_per_s']:8.1f} docs/s  {r2['tokens_per_s']:10.0f} tok/s")
    print(f"scaling 1 -> 2 workers: {r2['docs_per_s'] / r1['docs_per_s']:.2f}x")
    tr = train_rate(args.seq_len, tok.get_vocab_size(), args.train_steps)
    print(f"training small-6m (plain torch loop, batch 8 x {args.seq_len}): {tr:8.0f} tok/s")
    print(f"ratio transformed tok/s / training tok/s: 1 worker {r1['tokens_per_s'] / tr:.1f}x, "
          f"2 workers {r2['tokens_per_s'] / tr:.1f}x (target >= 20)")


if __name__ == "__main__":
    main()
