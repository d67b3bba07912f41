"""BLiMP scoring speed: preschool's minimal_pairs scorer vs lm-evaluation-harness, same checkpoint, one run.

Builds one small random Qwen2 checkpoint (byte-level BPE trained on the BLiMP
sentences scored), then times, on the same pairs:

- ours:     ``minimal_pairs`` (load JSONL -> per-pair rows -> metrics), ``sentence_prefix=" "``
            so it scores exactly lm-eval's requests, with its default prefix-tree scoring
            (``--no-prefix-tree`` for the plain padded batches);
- lm-eval:  ``simple_evaluate`` on a local copy of the pairs written as a task
            that mirrors lm-eval's BLiMP template (writing that copy from the
            same folder is timed, as our reading of the folder is; indexing of
            lm-eval's built-in tasks and its imports are not);
- naive:    one HF forward per sentence (batch 1), the loop most scripts write;
            used as the baseline when lm-eval is not installed.

and prints pairs/s, the speed-up ratio, and whether the per-pair decisions are
identical (ties aside: lm-eval counts an exact tie as correct, we count 0.5).
Ratios are given in wall-clock time and in process CPU time; on a CPU box shared
with other jobs the wall clock mostly measures the neighbours, CPU time the work.

    python benchmarks/eval.py --blimp ../shared/data/blimp                 # 20 pairs x 67 paradigms
    python benchmarks/eval.py --blimp ../shared/data/blimp --pairs 0       # all 67,000 pairs (slow on CPU)
    python benchmarks/eval.py --blimp ../shared/data/blimp --device cuda --pairs 0
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def build_checkpoint(texts, vocab, hidden, layers, seed=0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from preschool.data.tokenizer import as_hf, train_bpe

    tok = as_hf(train_bpe(texts, vocab_size=vocab, min_frequency=2))
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                      num_attention_heads=max(1, hidden // 32), num_key_value_heads=max(1, hidden // 64),
                      max_position_embeddings=256, tie_word_embeddings=True)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg).eval()
    return model, tok


def naive_loop(model, tok, pairs, device):
    """One forward per sentence, BOS prepended, no batching: the usual hand-written scorer."""
    import torch

    correct = 0.0
    bos = tok.bos_token_id
    with torch.inference_mode():
        for p in pairs:
            lps = []
            for s in (p.good, p.bad):
                ids = torch.tensor([[bos] + tok(" " + s, add_special_tokens=False)["input_ids"]], device=device)
                logits = model(input_ids=ids).logits[0, :-1].float()
                lps.append(float(torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).sum()))
            correct += 1.0 if lps[0] > lps[1] else (0.5 if lps[0] == lps[1] else 0.0)
    return correct / len(pairs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blimp", default=str(Path(__file__).resolve().parents[1].parent / "shared/data/blimp"))
    ap.add_argument("--pairs", type=int, default=20, help="pairs per paradigm (first N by pairID); 0 = all 1000")
    ap.add_argument("--batch-size", type=int, default=256, help="our sentences per forward pass")
    ap.add_argument("--lm-eval-batch-size", type=int, default=64,
                    help="lm-eval's batch size (64 was its fastest of 64/512 on the 2-core CPU)")
    ap.add_argument("--no-prefix-tree", action="store_true", help="score ours with plain padded batches")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--naive", action="store_true", help="also time the naive loop when lm-eval is available")
    ap.add_argument("--naive-pairs", type=int, default=10,
                    help="the naive loop runs on the first N pairs of each paradigm (its pairs/s is what is compared)")
    args = ap.parse_args(argv)

    from preschool.evals import EVALUATORS
    from preschool.evals.minimal_pairs import load_pairs

    n = args.pairs or None
    pairs, _ = load_pairs(args.blimp, max_pairs_per_paradigm=n)
    label = f"{len(pairs)} pairs ({'all' if n is None else f'first {n} by pairID'} of each of 67 paradigms)"
    model, tok = build_checkpoint([s for p in pairs for s in (p.good, p.bad)], args.vocab, args.hidden, args.layers)
    model = model.to(args.device)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"checkpoint: Qwen2 d={args.hidden} L={args.layers} vocab={len(tok)} ({nparams / 1e6:.2f}M params), "
          f"device={args.device}, torch threads={__import__('torch').get_num_threads()}")
    print(f"data: BLiMP {label}, batch size ours {args.batch_size}, lm-eval {args.lm_eval_batch_size}")

    from preschool.evals.minimal_pairs import score_pairs

    score_pairs(model, tok, pairs[:64], batch_size=args.batch_size)  # warm-up (allocator, kernels) for everyone
    ev = EVALUATORS.build("minimal_pairs", {"path": args.blimp, "max_pairs_per_paradigm": n, "sentence_prefix": " ",
                                            "batch_size": args.batch_size, "prefix_tree": not args.no_prefix_tree})
    t0, c0 = time.perf_counter(), time.process_time()
    ours = ev.evaluate(model, tok)
    t_ours, c_ours = time.perf_counter() - t0, time.process_time() - c0
    print(f"ours      {t_ours:8.2f} s  {len(pairs) / t_ours:9.1f} pairs/s  cpu {c_ours:7.2f} s  acc={ours.metrics['acc']:.4f} "
          f"(ties {int(ours.metrics['ties'])}; prefix tree {ours.extra['prefix_tree']})")

    try:
        from preschool.evals.lm_eval import pair_scores, require_lm_eval, run_lm_eval, write_minimal_pair_task

        require_lm_eval()
        have_lm_eval = True
    except ImportError as e:
        print(f"lm-eval not available ({e}); baseline = naive per-sentence HF loop")
        have_lm_eval = False

    if have_lm_eval:
        with tempfile.TemporaryDirectory() as d:
            from lm_eval.tasks import TaskManager

            TaskManager(include_defaults=False)  # warm lm-eval's imports outside the timed region
            t0, c0 = time.perf_counter(), time.process_time()
            # lm-eval reads local data through a task file: writing it from the same folder is part of its time,
            # as reading the folder is part of ours
            write_minimal_pair_task(args.blimp, d, task="blimp_bench", max_pairs_per_paradigm=n)
            res = run_lm_eval(model, tok, ["blimp_bench"], include_path=d, batch_size=args.lm_eval_batch_size,
                              log_samples=True, include_defaults=False)
            t_lm, c_lm = time.perf_counter() - t0, time.process_time() - c0
        theirs = pair_scores(res, "blimp_bench")
        acc_lm = res["results"]["blimp_bench"]["acc,none"]
        print(f"lm-eval   {t_lm:8.2f} s  {len(pairs) / t_lm:9.1f} pairs/s  cpu {c_lm:7.2f} s  acc={acc_lm:.4f}")
        nontie = [(a, b) for a, b in zip(ours.items, theirs) if a["correct"] != 0.5]
        same = sum(a["correct"] == b["correct_lmeval"] for a, b in nontie)
        maxdiff = max(max(abs(a["logp_good"] - b["logp_good"]), abs(a["logp_bad"] - b["logp_bad"]))
                      for a, b in zip(ours.items, theirs))
        print(f"decisions identical on {same}/{len(nontie)} non-tied pairs "
              f"({len(pairs) - len(nontie)} ties); max |logp diff| = {maxdiff:.2e}")
        print(f"RATIO ours vs lm-eval: {t_lm / t_ours:.1f}x faster (wall clock); {c_lm / c_ours:.1f}x less CPU time")
    if not have_lm_eval or args.naive:
        k = args.naive_pairs if n is None else min(n, args.naive_pairs)
        sub, _ = load_pairs(args.blimp, max_pairs_per_paradigm=k)
        t0, c0 = time.perf_counter(), time.process_time()
        acc_naive = naive_loop(model, tok, sub, args.device)
        t_nv, c_nv = time.perf_counter() - t0, time.process_time() - c0
        print(f"naive     {t_nv:8.2f} s  {len(sub) / t_nv:9.1f} pairs/s  cpu {c_nv:7.2f} s  acc={acc_naive:.4f}  (on {len(sub)} pairs: "
              f"first {k} of each paradigm)")
        print(f"RATIO ours vs naive per-sentence loop (pairs/s): {(len(pairs) / t_ours) / (len(sub) / t_nv):.1f}x faster "
              f"(wall clock); {(len(pairs) / c_ours) / (len(sub) / c_nv):.1f}x per CPU second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
