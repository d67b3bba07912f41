"""What verifying a checkpoint costs on resume (issue 22, item 6): sha256 against loading, on one file.

A resume checks every checkpoint file against the sha256 recorded when it was
written (``train.checkpoint.verify_checkpoint``), then loads it. This writes a
``--mb`` MiB ``model.safetensors`` of random fp32 tensors into a temporary folder
and, in one run, times

- ``io.sha256_file`` on it (what the verification does per file), and
- ``safetensors.torch.load_file`` on it, every tensor touched (what the resume's load does),

each after a first untimed read so both see the page cache warm (the resume
reads the file twice: hash, then load), and prints both rates, their ratio
(hash time / load time) and the hashing time extrapolated to the checkpoint of
a 1B-parameter model (fp32 weights 4 GB, AdamW moments 8 GB; FSDP adds the
sharded copy of both). The extrapolation is linear in bytes and says so.

    PYTHONPATH=src python benchmarks/checkpoint_verify.py            # 1024 MiB
    PYTHONPATH=src python benchmarks/checkpoint_verify.py --mb 256
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_memory import cpu_model  # noqa: E402  (the machine line every benchmark prints)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=1024, help="size of the weights file in MiB (default 1024)")
    args = ap.parse_args()

    import torch
    from safetensors.torch import load_file, save_file

    from preschool.io import sha256_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        n = args.mb * (1 << 20) // 4
        chunk = 1 << 24  # 64 MiB tensors, like a large model's matrices
        gen = torch.Generator().manual_seed(0)
        save_file({f"w{i}": torch.randn(min(chunk, n - i * chunk), generator=gen)
                   for i in range((n + chunk - 1) // chunk)}, str(path))
        size = path.stat().st_size
        sha256_file(path)  # warm the page cache for both timings
        t0 = time.perf_counter()
        sha256_file(path)
        t_hash = time.perf_counter() - t0
        t0 = time.perf_counter()
        total = sum(float(t.sum()) for t in load_file(str(path)).values())  # every page read into a tensor
        t_load = time.perf_counter() - t0
    gb = size / 1e9
    print(f"machine: {cpu_model()}, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}")
    print(f"file: {gb:.2f} GB model.safetensors (checksum of tensors {total:.1f})")
    print(f"sha256:          {t_hash:6.2f} s  {gb / t_hash:5.2f} GB/s")
    print(f"safetensors load:{t_load:6.2f} s  {gb / t_load:5.2f} GB/s")
    print(f"ratio hash/load: {t_hash / t_load:.2f}")
    rate = gb / t_hash
    for what, size_gb in (("1B model, plain checkpoint (weights 4 GB + trainer_state.pt 8 GB)", 12.0),
                          ("1B model, FSDP checkpoint (model.safetensors 4 GB + sharded/ 12 GB)", 16.0)):
        print(f"extrapolated (linear in bytes, not measured): {what}: sha256 {size_gb / rate:.0f} s")


if __name__ == "__main__":
    main()
