"""Throughput of the ``verbatim`` and ``qa_f1`` evaluators, batched vs batch size 1, in one run.

Builds one random Llama-style checkpoint (byte-level BPE trained on the
stimuli), then times on the same machine:

- verbatim: the default stimulus set (800 stimuli) scored with ``batch_size``
  B (ours) and with batch size 1 (the per-stimulus loop most scripts write);
  prints stimuli/s, tokens/s and the speed-up ratio, and the largest
  difference between the two runs' per-stimulus NLLs;
- qa_f1: a synthetic two-hop QA set with distractor paragraphs; times the
  answer-only fine-tune (examples/s, tokens/s) and greedy answering with
  ``eval_batch_size`` B vs 1 (ratio; the answers must be identical).

    python benchmarks/verbatim_qa.py                                   # micro model, CPU
    python benchmarks/verbatim_qa.py --device cuda --preset smollm135 --model-vocab 49152  # SmolLM-135M shape
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PRESETS = {  # hidden, layers, heads, kv heads, mlp
    "micro": (64, 2, 2, 1, 192),
    "smollm135": (576, 30, 9, 3, 1536),
}


def two_hop_qa(n: int, seed: int, paragraphs: int = 6) -> list[dict]:
    """Two-hop questions ("Where was the owner of the X born?") among distractor paragraphs."""
    import numpy as np

    names = ["Ada", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea"]
    things = ["lamp", "boat", "violin", "clock", "kite", "bicycle", "piano", "camera", "tent", "sled"]
    towns = ["Arden", "Bexley", "Corran", "Dunmore", "Elston", "Farrow", "Glenby", "Halton", "Irvine", "Jarrow"]
    rows = []
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        ps = rng.choice(len(names), size=paragraphs, replace=False)
        ts = rng.choice(len(things), size=paragraphs, replace=False)
        ws = rng.integers(0, len(towns), size=paragraphs)
        paras = [f"{names[p]} owns a {things[t]} and keeps it at home. {names[p]} was born in {towns[w]} "
                 f"and still visits the town every summer." for p, t, w in zip(ps, ts, ws)]
        q = int(rng.integers(paragraphs))
        rows.append({"id": f"b{seed}-{i}", "type": "chain", "context": [paras[j] for j in rng.permutation(paragraphs)],
                     "question": f"Where was the owner of the {things[ts[q]]} born?", "answer": towns[ws[q]]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="micro", choices=sorted(PRESETS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--model-vocab", type=int, default=0,
                    help="embedding rows (>= tokenizer size; e.g. 49152 for SmolLM's softmax cost); 0 = tokenizer size")
    ap.add_argument("--qa-train", type=int, default=256)
    ap.add_argument("--qa-eval", type=int, default=64)
    ap.add_argument("--verbatim-lists", type=int, default=40, help="lists per length (x 4 lengths x 5 intervening)")
    args = ap.parse_args(argv)

    import numpy as np
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from preschool.data.tokenizer import as_hf, train_bpe
    from preschool.evals import EVALUATORS
    from preschool.evals.verbatim import VerbatimConfig, build_stimuli

    vcfg = {"n_lists": args.verbatim_lists, "bootstrap_resamples": 1000}
    stims = build_stimuli(VerbatimConfig(**vcfg))
    train, dev = two_hop_qa(args.qa_train, 1), two_hop_qa(args.qa_eval, 2)
    texts = [s.text for s in stims] + ["\n".join(r["context"]) + " " + r["question"] for r in train]
    tok = as_hf(train_bpe(texts, vocab_size=args.vocab, min_frequency=2))
    h, L, nh, kv, mlp = PRESETS[args.preset]
    mcfg = LlamaConfig(vocab_size=max(len(tok), args.model_vocab), hidden_size=h, num_hidden_layers=L, num_attention_heads=nh,
                       num_key_value_heads=kv, intermediate_size=mlp, max_position_embeddings=2048,
                       tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = LlamaForCausalLM(mcfg).eval().to(args.device)
    sync = (lambda: torch.cuda.synchronize()) if args.device.startswith("cuda") else (lambda: None)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"checkpoint: Llama {args.preset} d={h} L={L} vocab={len(tok)} (model rows {mcfg.vocab_size}) ({nparams / 1e6:.1f}M params), "
          f"device={args.device}, torch threads={torch.get_num_threads()}, fp32")

    # ---- verbatim
    ntok = sum(len(tok(s.text)["input_ids"]) for s in stims)
    res = {}
    for bs in (args.batch_size, 1):
        ev = EVALUATORS.build("verbatim", {**vcfg, "batch_size": bs})
        if bs == args.batch_size:  # warm-up (kernels, allocator) outside the timed region
            EVALUATORS.build("verbatim", {**vcfg, "n_lists": 2, "batch_size": bs}).evaluate(model, tok)
        sync()
        t0 = time.perf_counter()
        res[bs] = ev.evaluate(model, tok)
        sync()
        res[bs].extra["_t"] = time.perf_counter() - t0
    tb, t1 = res[args.batch_size].extra["_t"], res[1].extra["_t"]
    diff = max(abs(a[k] - b[k]) for a, b in zip(res[args.batch_size].items, res[1].items)
               for k in ("nll_list1", "nll_list2") if a.get("valid"))
    print(f"verbatim: {len(stims)} stimuli, {ntok} tokens")
    print(f"  ours (batch {args.batch_size:3d}) {tb:8.2f} s {len(stims) / tb:9.1f} stimuli/s {ntok / tb:11.0f} tokens/s")
    print(f"  batch 1          {t1:8.2f} s {len(stims) / t1:9.1f} stimuli/s {ntok / t1:11.0f} tokens/s")
    print(f"  speed-up {t1 / tb:.2f}x; max |NLL difference| between batch sizes {diff:.2e}; "
          f"x_perc={res[1].metrics['x_perc']:.2f}")

    # ---- QA
    with tempfile.TemporaryDirectory() as d:
        for name, rows in (("train", train), ("dev", dev)):
            Path(d, f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        qcfg = {"train_path": f"{d}/train.jsonl", "eval_path": f"{d}/dev.jsonl", "lr": 3e-4, "batch_size": 16,
                "max_new_tokens": 8}
        from preschool.evals.qa_f1 import generate_answers, load_qa

        qa = EVALUATORS.build("qa_f1", {**qcfg, "eval_batch_size": args.batch_size})
        ex = load_qa(qcfg["train_path"])
        ntrain = sum(len(tok(qa.cfg.prompt.format(context=e.context, question=e.question))["input_ids"]) for e in ex)
        sync()
        t0 = time.perf_counter()  # the copy of the model, the trainer run and its one (final) checkpoint
        m, ft = qa.fine_tune(model, tok, ex, 2048)
        sync()
        tft = time.perf_counter() - t0
        print(f"qa_f1 fine-tune: {len(ex)} examples ({ntrain} prompt tokens), {ft['steps']} steps of 16, "
              f"{tft:.2f} s, {len(ex) / tft:.1f} examples/s, {ntrain / tft:.0f} tokens/s, "
              f"loss {np.mean(ft['losses'][:4]):.3f} -> {np.mean(ft['losses'][-4:]):.3f}")
        prompts = [qa.cfg.prompt.format(context=e.context, question=e.question) for e in load_qa(qcfg["eval_path"])]
        out = {}
        for bs in (args.batch_size, 1):
            qa.cfg.eval_batch_size = bs
            sync()
            t0 = time.perf_counter()
            preds, _ = generate_answers(m, tok, prompts, qa.cfg, 2048)
            sync()
            out[bs] = (preds, time.perf_counter() - t0)
        (pb, tb), (p1, t1) = out[args.batch_size], out[1]
        print(f"qa_f1 answers ({len(prompts)} prompts, up to {qa.cfg.max_new_tokens} new tokens):")
        print(f"  ours (batch {args.batch_size:3d}) {tb:8.2f} s {len(prompts) / tb:9.1f} answers/s")
        print(f"  batch 1          {t1:8.2f} s {len(prompts) / t1:9.1f} answers/s")
        print(f"  speed-up {t1 / tb:.2f}x; identical answers: {pb == p1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
