"""Peak memory of `corpus read` and `transform l2t` on one huge line (issue 11, item 4).

Writes a file of ``--mb`` megabytes with no newline at all (storybook stories
joined by spaces) into a temporary folder, runs each command on it in a child
process and prints the child's peak resident set size (``ru_maxrss`` from
``wait4``), its ratio to the file size and whether it is under the target
(``--target-gb``, default 1). A tiny file run first gives the interpreter's
own baseline. Before the bounded reader (1 MiB line pieces, documents cut at
``max_chars``) `transform l2t` peaked at 8.8 GB on a 50 MB line.

    PYTHONPATH=src python benchmarks/reader_memory.py            # 500 MB, the issue's size
    PYTHONPATH=src python benchmarks/reader_memory.py --mb 50

`transform l2t` trains its BPE on ``--tokenizer-documents`` documents (default
20, i.e. the first 20 MB: the tokenizer trainer is not what is measured) and
transforms the whole file; ``--train-tokens`` can cap it for a quicker run.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_single_line(path: Path, mb: int) -> int:
    """``mb`` megabytes of storybook text without a newline; returns the size in bytes."""
    from preschool.corpora import Storybook

    book = Storybook(seed=0)
    block = " ".join(book.story(i).replace("\n", " ") for i in range(3000)).encode() + b" "
    target = mb * 1_000_000
    with open(path, "wb") as fh:
        n = 0
        while n < target:
            piece = block[:target - n]
            fh.write(piece)
            n += len(piece)
    return n


def count_newlines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 24), b""))


def peak_rss(cmd: list[str]) -> tuple[int, float, int]:
    """Run ``cmd``; (peak RSS in bytes, seconds, exit code)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    _, status, usage = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        print(f"  failed ({p.returncode}): {err.strip()[-500:]}", file=sys.stderr)
    return usage.ru_maxrss * 1024, secs, p.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=500, help="size of the single-line file (MB)")
    ap.add_argument("--target-gb", type=float, default=1.0)
    ap.add_argument("--tokenizer-documents", type=int, default=20)
    ap.add_argument("--train-tokens", type=int, default=0, help="cap for transform l2t (0 = the whole file)")
    ap.add_argument("--only", choices=["corpus", "l2t"], action="append", help="run only these commands")
    args = ap.parse_args(argv)
    py = [sys.executable, "-m", "preschool.cli"]
    print(f"CPU: {cpu_model()}; python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="reader_memory.") as tmp:
        tmp = Path(tmp)
        big, tiny = tmp / "one_line.txt", tmp / "tiny.txt"
        size = write_single_line(big, args.mb)
        tiny.write_text("A small file.\n")
        print(f"file: {size / 1e6:.0f} MB, {count_newlines(big)} newlines")
        base, _, _ = peak_rss(py + ["corpus", "read", "--set", f"path={tiny}"])
        print(f"baseline (corpus read of a 14-byte file): peak RSS {base / 1e9:.3f} GB")
        runs = {
            "corpus": py + ["corpus", "read", "--set", f"path={big}"],
            "l2t": py + ["transform", "l2t", "--input", str(big), "--out", str(tmp / "l2t"), "--seq-len", "512",
                         "--vocab-size", "2048", "--tokenizer-documents", str(args.tokenizer_documents),
                         "--val-fraction", "0.01", "--train-tokens", str(args.train_tokens)],
        }
        ok = True
        for name, cmd in runs.items():
            if args.only and name not in args.only:
                continue
            rss, secs, rc = peak_rss(cmd)
            under = rss < args.target_gb * 1e9 and rc == 0
            ok &= under
            label = "corpus read" if name == "corpus" else "transform l2t"
            print(f"{label:14s} peak RSS {rss / 1e9:.3f} GB = {rss / size:.2f}x the file, {secs:.0f} s, exit {rc}; "
                  f"target < {args.target_gb:g} GB: {'yes' if under else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
