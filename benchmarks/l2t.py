"""L2T transform throughput: documents/s per core, 1 -> 2 worker scaling, and
transformed tokens/s divided by the training tokens/s of the ``small-6m`` preset.

Everything is measured in this one run on this machine:

1. documents: the shared novels (``$PRESCHOOL_SHARED_DATA/novels``, default
   ``../shared/data/novels``) cut into ~20 kB
   documents (paragraph groups), or the built-in storybook corpus if absent;
2. transform rate: ``build_l2t`` on the one prepare engine (``data/engine.py``:
   work units of ``--unit-tokens``; sentence split + task + format + tokenization
   + packing + mixing + shard files) with 1 worker and with 2; "transform only"
   excludes tokenization, packing and writing;
3. training rate: a plain torch loop (AdamW, fp32, batch 8) of the ``small-6m``
   Qwen2 preset on rows of the same length, measured after a warm-up step;
4. ratio = output tokens/s (L2T samples + raw text, all that the trainer will
   read) / training tokens/s. The issue asks for >= 20.

    python benchmarks/l2t.py [--documents 300] [--seq-len 512] [--train-steps 4] [--unit-tokens 131072]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED = Path(os.environ.get("PRESCHOOL_SHARED_DATA",
                             Path(__file__).resolve().parents[1].parent / "shared" / "data")) / "novels"


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


def transform_rate(docs, cfg, tok, workers: int, unit_tokens: int) -> dict:
    """Documents and output tokens (L2T samples + raw text, before packing) per second of ``build_l2t``."""
    import tempfile

    from preschool.l2t.write import build_l2t

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        t = time.perf_counter()
        build_l2t(docs, out, cfg, tok, workers=workers, unit_tokens=unit_tokens)
        dt = time.perf_counter() - t
        stats = json.loads((out / "stats.json").read_text())
        units = json.loads((out / "train" / "manifest.json").read_text())["units"]
    n_l2t = sum(sum(stats[s]["sample_tokens_by_task"].values()) for s in ("train", "val"))
    n_raw = sum(stats[s]["raw_packing"]["tokens_in"] for s in ("train", "val"))
    return {"docs_per_s": len(docs) / dt, "tokens_per_s": (n_l2t + n_raw) / dt, "l2t_tokens_per_s": n_l2t / dt,
            "s": dt, "units": units}


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
    ap.add_argument("--unit-tokens", type=int, default=131072,
                    help="engine work unit size (4 characters per token): sets how many units the documents make")
    args = ap.parse_args()

    from preschool.config import from_dict
    from preschool.data.tokenizer import train_bpe
    from preschool.l2t.write import BuildConfig

    docs, what = documents(args.documents)
    mb = sum(len(d) for d in docs) / 1e6
    tok = train_bpe(docs[:100], 2048)
    cfg = from_dict(BuildConfig, {"seq_len": args.seq_len, "l2t": {"chunk_tokens": args.seq_len // 4}})
    print(f"corpus: {len(docs)} documents from {what}, {mb:.1f} MB; seq_len {args.seq_len}; cores: {os.cpu_count()}")
    only = transform_only_rate(docs, cfg)
    print(f"transform only (split+task+format), 1 core: {only:8.1f} docs/s")
    r1 = transform_rate(docs, cfg, tok, 1, args.unit_tokens)
    print(f"engine units: {r1['units']} of {args.unit_tokens} tokens")
    print(f"engine (transform+tokenize+pack+write), 1 worker : {r1['docs_per_s']:8.1f} docs/s  {r1['tokens_per_s']:10.0f} tok/s "
          f"({r1['l2t_tokens_per_s']:.0f} L2T tok/s)")
    r2 = transform_rate(docs, cfg, tok, 2, args.unit_tokens)
    print(f"engine (transform+tokenize+pack+write), 2 workers: {r2['docs_per_s']:8.1f} docs/s  {r2['tokens_per_s']:10.0f} tok/s")
    print(f"scaling 1 -> 2 workers: {r2['docs_per_s'] / r1['docs_per_s']:.2f}x")
    tr = train_rate(args.seq_len, tok.get_vocab_size(), args.train_steps)
    print(f"training small-6m (plain torch loop, batch 8 x {args.seq_len}): {tr:8.0f} tok/s")
    print(f"ratio transformed tok/s / training tok/s: 1 worker {r1['tokens_per_s'] / tr:.1f}x, "
          f"2 workers {r2['tokens_per_s'] / tr:.1f}x (target >= 20)")


if __name__ == "__main__":
    main()
