"""Prepare throughput: tokens/s per core of our engine against datatrove's tokenizer, worker scaling,
and peak RSS of a streamed synthetic prepare at growing sizes. Everything is measured in this one run.

1. corpus: the shared novels (``../shared/data/novels``, the first ``--files`` files, paragraph
   chunks of 4,000 characters) tokenized, split and packed by our engine (``CorpusJob`` via
   ``run_units``) with 1 worker, then 2; and datatrove's ``DocumentTokenizer`` (no shuffle,
   ``LocalPipelineExecutor`` with 1 task) on the same documents and the same tokenizer.
   ratio = our tokens/s per core / datatrove's tokens/s per core (target >= 1); scaling =
   2-worker tokens/s / 1-worker tokens/s (target >= 1.7; the parent process also reads the text).
2. storybook: the built-in corpus, same engine, 1 worker.
3. L2T: ``build_l2t`` on the novels' documents (transform + tokenize + pack + mix), 1 worker;
   tokens/s counts the rows written (L2T samples and raw text).
4. memory: ``write_generator_shards`` (shuffle_dyck, reserved ids, 1 worker) at ``--rss-sizes``
   tokens in a fresh process each; peak RSS (ru_maxrss) per size.
5. executors: the whole ``prepare_data`` of one corpus dataset of the novels (90% of their
   tokens, units of ``--executor-unit-tokens``) on our engine with 2 workers, then with
   datatrove's local executor and 2 tasks (``--executor local``); wall time of each and whether
   the two wrote the same bytes (``content_sha256``).
6. tokenizer (``--parts tokenizer``, not in the default list): the share of a 1-worker prepare spent in
   the tokenizer's ``encode_batch`` (cProfile), and ``encode_batch`` vs ``encode_batch_fast`` on all documents.
7. resume (``--parts resume``, not in the default list): all 90 novels cut into work units of
   ``--resume-unit-tokens`` (``CorpusJob.units``, no tokenizing); the seconds until the last full unit's documents
   are ready when a rerun continues at the unit's recorded position (``u<k>.start.json``) vs when it reads
   the corpus from its start (what a rerun without positions did), best of 3 each, and their ratio; for the
   novels as text files and as JSON Lines (their paragraphs, one record each).

    python benchmarks/prepare.py [--files 12] [--rss-sizes 10M,30M,100M] [--parts corpus,executors]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

NOVELS = Path(os.environ.get("PRESCHOOL_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")) / "novels"
SEQ = 2048


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def novel_docs(folder: Path, files: int):
    from preschool.corpora import CorpusConfig, iter_documents

    import shutil

    sub = Path(tempfile.mkdtemp(prefix="novels-"))  # a scratch copy of the first files (the reader skips links)
    if not folder.is_dir():
        raise SystemExit(f"no novels at {folder}; set PRESCHOOL_SHARED_DATA to the shared data folder")
    for f in sorted(folder.glob("*.txt"))[:files]:
        shutil.copy(f, sub / f.name)
    cfg = CorpusConfig(source="text", path=str(sub), split_documents="paragraphs", chunk_chars=4000)
    return cfg, [(d.id, d.text) for d in iter_documents(cfg)]


def ours(docs, tok, workers: int, unit_tokens: int) -> tuple[float, int]:
    from preschool.data.builders.corpus import CorpusJob
    from preschool.data.engine import run_units, text_units

    class Job(CorpusJob):  # documents already in memory, so reading the text is not what we time
        def units(self, start=None):
            return text_units(iter(docs), self.unit_tokens)

    job = Job(None, tok.to_str(), SEQ + 1, 0, 0.01, ["train", "val"], unit_tokens)
    with tempfile.TemporaryDirectory() as work:
        t = time.perf_counter()
        infos = run_units(job, work, workers)
        dt = time.perf_counter() - t
    tokens = sum(sum(i["tokens"].values()) for i in infos)
    return tokens / dt, tokens


def tokenizer_share(docs, tok, unit_tokens: int) -> tuple[float, float, float]:
    """Where a 1-worker prepare spends its time: the share inside ``Tokenizer.encode_batch`` (cProfile),
    and the seconds of ``encode_batch`` vs ``encode_batch_fast`` over all documents (best of 2)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.runcall(ours, docs, tok, 1, unit_tokens)
    stats = pstats.Stats(prof).stats  # {(file, line, name): (calls, prim, tottime, cumtime, callers)}
    total = sum(v[2] for v in stats.values())
    enc = sum(v[2] for k, v in stats.items() if k[2] == "<method 'encode_batch' of 'tokenizers.Tokenizer' objects>")
    texts = [t for _, t in docs]

    def best(fn) -> float:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            fn(texts, add_special_tokens=False)
            times.append(time.perf_counter() - t)
        return min(times)

    return enc / total, best(tok.encode_batch), best(tok.encode_batch_fast)


def datatrove_rate(docs, tok_path: Path) -> tuple[float, int]:
    from datatrove.data import Document
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.tokens import DocumentTokenizer

    def reader(data, rank=0, world_size=1):
        for doc_id, text in docs:
            yield Document(text=text, id=doc_id)

    with tempfile.TemporaryDirectory() as out:
        step = DocumentTokenizer(output_folder=f"{out}/tok", tokenizer_name_or_path=str(tok_path / "tokenizer.json"),
                                 eos_token="<|endoftext|>", shuffle_documents=False, save_final_metadata=False)
        ex = LocalPipelineExecutor([reader, step], tasks=1, workers=1, logging_dir=f"{out}/logs")
        t = time.perf_counter()
        ex.run()
        dt = time.perf_counter() - t
        size = sum(p.stat().st_size for p in Path(out, "tok").glob("*.ds"))
    return size / 2 / dt, size // 2


def l2t_rate(docs, tok) -> tuple[float, int]:
    from preschool.l2t.write import build_l2t

    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        m = build_l2t(docs, Path(out) / "l2t", {"seq_len": SEQ, "val_fraction": 0.01}, tok, workers=1)
        dt = time.perf_counter() - t
    tokens = sum(s["n_rows"] for s in m["splits"].values()) * (SEQ + 1)
    return tokens / dt, tokens


def executor_times(cfg, tok_dir: Path, tokens: int, unit_tokens: int) -> dict:
    """Seconds of ``prepare_data`` for one corpus dataset: engine (2 workers) and datatrove local (2 tasks)."""
    from preschool.data.builders.corpus import CorpusSpec
    from preschool.data.distributed import DatatroveDistributor, ExecutorOptions
    from preschool.data.engine import distributed
    from preschool.data.prepare import prepare_data
    from preschool.data.shards import content_sha256
    from preschool.data.tokenizer import TokenizerConfig

    spec = {"pt": CorpusSpec(corpus="novels", tokens=tokens, val_tokens=0, unit_tokens=unit_tokens)}
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        # warm-up: the first prepare_data of a process pays seconds of one-time costs; keep them out of both
        prepare_data(Path(tmp) / "warm", TokenizerConfig(kind="load", path=str(tok_dir)), {"novels": cfg},
                     {"pt": CorpusSpec(corpus="novels", tokens=2 * (SEQ + 1), unit_tokens=unit_tokens)},
                     seq_len=SEQ, seed=0, workers=2, progress=False)
        runs = [("engine", None), ("local", DatatroveDistributor(ExecutorOptions(kind="local", tasks=2)))]
        for name, dist in runs:
            t = time.perf_counter()
            with distributed(dist):
                prepare_data(Path(tmp) / name, TokenizerConfig(kind="load", path=str(tok_dir)), {"novels": cfg},
                             spec, seq_len=SEQ, seed=0, workers=2, progress=False)
            out[name] = time.perf_counter() - t
            out[f"{name}_sha"] = content_sha256(Path(tmp) / name / "pt")
        local = runs[1][1]
        out["units"] = local.runs[0]["units"] if local.runs else None
    return out


def resume_times(folder: Path, unit_tokens: int) -> list[tuple[str, int, int, float, float]]:
    """``(format, unit k, units, seconds reading from the start, seconds continuing at k's position)`` for the
    last full unit of the novels, as text and as JSON Lines (see the module docstring, part 7)."""
    from preschool.corpora import CorpusConfig
    from preschool.data.builders.corpus import CorpusJob

    def best(fn) -> float:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        jl = Path(tmp)
        for f in sorted(folder.glob("*.txt")):
            text = f.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
            (jl / f"{f.stem}.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in text.split("\n\n")
                                                        if p.strip()), encoding="utf-8")
        for name, cfg in (("text", CorpusConfig(source="text", path=str(folder), split_documents="paragraphs",
                                                chunk_chars=4000)),
                          ("jsonl", CorpusConfig(source="jsonl", path=str(jl)))):
            job = CorpusJob(cfg, "", SEQ + 1, 0, 0.01, ["train"], unit_tokens)  # cutting units needs no tokenizer
            starts = {k: job.start_token(k) for k, _ in job.units()}
            k = max(starts) - 1 if len(starts) > 2 else max(starts)  # the last full unit (the last may be short)

            def reread():
                return next(payload for j, payload in job.units() if j == k)

            def resume():
                return next(iter(job.units(start=(k, starts[k]))))[1]

            assert starts[k] is not None and reread() == resume()  # the same documents either way
            out.append((name, k, len(starts), best(reread), best(resume)))
    return out


RSS_CHILD = """
import resource, sys, time
from preschool.synthetic import GENERATORS
from preschool.synthetic.write import SymbolEncoder, write_generator_shards
tokens, out = int(sys.argv[1]), sys.argv[2]
gen = GENERATORS.build("shuffle_dyck", {"length": 2047})
enc = SymbolEncoder("reserved", reserved_offset=1)
t = time.perf_counter()
write_generator_shards(gen, enc, out, tokens // 2049, 2049, enc.vocab_size(gen), 0, workers=1)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def rss_at(tokens: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as out:
        res = subprocess.run([sys.executable, "-c", RSS_CHILD, str(tokens), f"{out}/set"], capture_output=True,
                             text=True, check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    secs, kib = res.stdout.split()
    return float(secs), int(kib) / 1024


def parse_size(s: str) -> int:
    mult = {"K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=12, help="novels to read (of 90)")
    ap.add_argument("--storybook-docs", type=int, default=20000)
    ap.add_argument("--l2t-docs", type=int, default=300)
    ap.add_argument("--rss-sizes", default="10M,30M,100M")
    ap.add_argument("--unit-tokens", type=int, default=65536,
                    help="engine work unit size for the corpus and storybook rates: several units per worker, "
                         "or the 2-worker run has nothing to split")
    ap.add_argument("--executor-unit-tokens", type=int, default=65536)
    ap.add_argument("--resume-unit-tokens", type=int, default=1 << 21,
                    help="work unit size for --parts resume (the prepare default)")
    ap.add_argument("--parts", default="corpus,storybook,l2t,rss,executors",
                    help="which measurements to run (comma-separated)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))

    from preschool.corpora import CorpusConfig, iter_documents
    from preschool.data.tokenizer import load_tokenizer, save_tokenizer, train_bpe

    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; python {platform.python_version()}; "
          f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if "resume" in parts:
        for name, k, n, slow, fast in resume_times(NOVELS, args.resume_unit_tokens):
            print(f"resume at unit {k} of {n} (90 novels as {name}, units of {args.resume_unit_tokens:,} tokens): "
                  f"reading from the start {slow:.2f} s, at the recorded position {fast:.2f} s "
                  f"({slow / fast:.1f}x faster)")
        if not parts - {"resume"}:
            return
    cfg, docs = novel_docs(NOVELS, args.files)
    chars = sum(len(t) for _, t in docs)
    tok_dir = Path(tempfile.mkdtemp(prefix="tok-"))
    save_tokenizer(train_bpe((t for _, t in docs[:2000]), 8192), tok_dir)
    tok = load_tokenizer(tok_dir)
    print(f"novels: {args.files} files, {len(docs)} documents, {chars / 1e6:.1f}M characters; BPE vocab 8192")

    if "corpus" in parts:
        r1, n1 = ours(docs, tok, 1, args.unit_tokens)
        r2, n2 = ours(docs, tok, 2, args.unit_tokens)
        rd, nd = datatrove_rate(docs, tok_dir)
        print(f"ours, 1 worker:     {r1:12,.0f} tokens/s  ({n1:,} tokens incl. EOS)")
        print(f"ours, 2 workers:    {r2:12,.0f} tokens/s  -> {r2 / 2:,.0f} per core; scaling 1 -> 2: {r2 / r1:.2f}x")
        print(f"datatrove, 1 task:  {rd:12,.0f} tokens/s  ({nd:,} tokens incl. EOS)")
        print(f"ratio ours / datatrove per core (1 process each): {r1 / rd:.2f}x (target >= 1)")

    if "tokenizer" in parts:
        share, plain, fast = tokenizer_share(docs, tok, args.unit_tokens)
        print(f"ours, 1 worker, profiled: {share:.0%} of the time in the tokenizer's encode_batch")
        print(f"all documents: encode_batch {plain:.2f} s, encode_batch_fast (no offsets) {fast:.2f} s")

    if "storybook" in parts:
        sb = [(d.id, d.text) for d in iter_documents(CorpusConfig(source="storybook", seed=0,
                                                                  max_documents=args.storybook_docs))]
        rs, ns = ours(sb, tok, 1, args.unit_tokens)
        print(f"storybook, 1 worker: {rs:11,.0f} tokens/s  ({ns:,} tokens, {len(sb)} stories)")
    if "l2t" in parts:
        rl, nl = l2t_rate(docs[:args.l2t_docs], tok)
        print(f"L2T, 1 worker:      {rl:12,.0f} tokens/s of rows written ({nl:,} tokens from {args.l2t_docs} documents)")

    if "rss" in parts:
        for size in [parse_size(s) for s in args.rss_sizes.split(",") if s]:
            secs, mib = rss_at(size)
            print(f"streamed shuffle_dyck prepare, {size / 1e6:,.0f}M tokens: {secs:.1f} s, peak RSS {mib:,.0f} MiB")

    if "executors" in parts:
        n_tok = sum(len(x) + 1 for x in tok.encode_batch([t for _, t in docs], add_special_tokens=False))
        ex = executor_times(cfg, tok_dir, int(0.9 * n_tok), args.executor_unit_tokens)
        print(f"prepare {int(0.9 * n_tok):,} novel tokens, engine 2 workers: {ex['engine']:.1f} s; datatrove local "
              f"2 tasks: {ex['local']:.1f} s ({ex['units']} units handed out); same bytes: "
              f"{ex['engine_sha'] == ex['local_sha']}")


if __name__ == "__main__":
    main()
