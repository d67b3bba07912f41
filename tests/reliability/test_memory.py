"""A 50 MB line without a newline is read in bounded memory (issue 11, item 4).

Each command runs in a child process and its peak resident set size
(``ru_maxrss`` from ``wait4``) is compared with the same command on a tiny file.
Before the fix ``transform l2t`` held the whole line as one document (8.8 GB
peak on this input read to the end) and ``corpus read`` held it as one string.
The reads stop after a few documents: the old readers had to take in the whole
line before the first document came out, the bounded ones do not.
``benchmarks/reader_memory.py`` measures whole 500 MB runs.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import preschool

SRC = Path(preschool.__file__).resolve().parents[1]  # the code under test, also in child processes
SENTENCES = b"The old sailor looked at the sea and smiled. A small boat came into the harbour at dawn. "


def peak_mb(args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.Popen([sys.executable, "-m", "preschool.cli", *args], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    assert os.waitstatus_to_exitcode(status) == 0, err
    return usage.ru_maxrss / 1024


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("long_line")
    big, tiny = d / "line.txt", d / "tiny.txt"
    with open(big, "wb") as fh:
        for _ in range(50_000_000 // len(SENTENCES)):
            fh.write(SENTENCES)
    tiny.write_bytes(SENTENCES * 40)
    from preschool.data.tokenizer import save_tokenizer, train_bpe

    save_tokenizer(train_bpe([SENTENCES.decode() * 50], 300), d / "tok")
    return big, tiny, d


def test_corpus_read_of_a_50mb_line_stays_bounded(files):
    big, tiny, _ = files
    cmd = ["corpus", "read", "--set", "max_documents=3", "--set", "path="]
    base = peak_mb(cmd[:-1] + [f"path={tiny}"])
    peak = peak_mb(cmd[:-1] + [f"path={big}"])
    print(f"corpus read: {peak:.0f} MB vs {base:.0f} MB")
    assert peak - base < 60, f"corpus read: {peak:.0f} MB peak vs {base:.0f} MB on a tiny file"


@pytest.mark.slow  # about 45 s on 2 shared cores (two CLI start-ups and two 1M-character documents)
def test_transform_l2t_of_a_50mb_line_stays_bounded(files):
    big, tiny, d = files

    def cmd(inp, out):
        return ["transform", "l2t", "--input", str(inp), "--out", str(d / out), "--tokenizer", str(d / "tok"),
                "--max-documents", "2", "--seq-len", "128", "--val-fraction", "0"]

    base = peak_mb(cmd(tiny, "o_tiny"))
    peak = peak_mb(cmd(big, "o_big"))
    print(f"transform l2t: {peak:.0f} MB vs {base:.0f} MB")
    assert peak - base < 400, f"transform l2t: {peak:.0f} MB peak vs {base:.0f} MB on a tiny file"
