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

Then the whole processes, as a user runs them (``--process-rounds``, default 3, 0
skips it): the checkpoint saved to a folder, ``preschool eval --checkpoint DIR --blimp
PATH --set max_pairs_per_paradigm=N --set sentence_prefix=" "`` against ``python -m
lm_eval --model hf --model_args pretrained=DIR`` on the pairs written as an lm-eval task
(written once beforehand, as the BLiMP files are ours), rounds alternating, the
median of each; every import, the model load and the scoring are inside. Our
process's per-pair decisions are compared with lm-eval's from the in-process run.

Ratios are given in wall-clock time and in process CPU time; on a CPU box shared
with other jobs the wall clock mostly measures the neighbours, CPU time the work.

    python benchmarks/eval.py --blimp ../shared/data/blimp                 # 20 pairs x 67 paradigms
    python benchmarks/eval.py --blimp ../shared/data/blimp --pairs 0       # all 67,000 pairs (slow on CPU)
    python benchmarks/eval.py --blimp ../shared/data/blimp --device cuda --pairs 0
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
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
    ap.add_argument("--process-rounds", type=int, default=3,
                    help="paired whole-process runs of `preschool eval` and lm-eval's CLI (0: skip)")
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
        if args.process_rounds:
            whole_processes(args, model, tok, theirs, len(pairs))
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


def _timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s) of a command run to its end; SystemExit with its output when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed:\n{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def whole_processes(args, model, tok, theirs: list[dict], n_pairs: int) -> None:
    """`preschool eval` vs lm-eval's CLI, each a whole process on the saved checkpoint (module docstring)."""
    from preschool.evals.lm_eval import write_minimal_pair_task

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    n = args.pairs or None
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        model.save_pretrained(d / "ckpt")
        tok.save_pretrained(d / "ckpt")
        write_minimal_pair_task(args.blimp, d / "task", task="blimp_bench", max_pairs_per_paradigm=n)
        ours = [sys.executable, "-m", "preschool.cli", "eval", "--checkpoint", str(d / "ckpt"), "--out", str(d / "ours"),
                "--device", args.device, "--force", "--blimp", args.blimp, "--set", 'sentence_prefix=" "',
                "--set", f"batch_size={args.batch_size}"]
        if n:
            ours += ["--set", f"max_pairs_per_paradigm={n}"]
        lm = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
              f"pretrained={d / 'ckpt'},dtype=float32", "--tasks", "blimp_bench", "--include_path", str(d / "task"),
              "--device", args.device, "--batch_size", str(args.lm_eval_batch_size)]
        got: dict[str, list[tuple[float, float]]] = {"ours": [], "lm-eval": []}
        for _ in range(args.process_rounds):
            got["ours"].append(_timed(ours, env))
            got["lm-eval"].append(_timed(lm, env))
        items = [json.loads(line) for line in (d / "ours" / "blimp" / "items.jsonl").read_text().splitlines()]
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in got.items()}
    for k, (w, c) in med.items():
        print(f"{k:8s} whole process {w:7.2f} s  cpu {c:7.2f} s  (median of {args.process_rounds}; "
              f"rounds {', '.join(f'{x:.2f}' for x, _ in got[k])} s)")
    nontie = [(a, b) for a, b in zip(items, theirs) if not a["tie"]]
    same = sum(a["correct"] == b["correct_lmeval"] for a, b in nontie)
    print(f"whole process: decisions identical to lm-eval's on {same}/{len(nontie)} non-tied pairs "
          f"({n_pairs - len(nontie)} ties)")
    print(f"RATIO whole process, `preschool eval` vs lm-eval: {med['lm-eval'][0] / med['ours'][0]:.1f}x faster "
          f"(wall clock); {med['lm-eval'][1] / med['ours'][1]:.1f}x less CPU time")


if __name__ == "__main__":
    sys.exit(main())
