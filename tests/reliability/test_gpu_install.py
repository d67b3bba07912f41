"""`make setup-gpu` (issue #38 item 6), checked on a CPU machine without installing anything: what
requirements/gpu-lock.txt pins (the CUDA build of torch at the CPU wheel's version, Liger-Kernel,
every dependency with hashes, the main lock's versions wherever both hold a package) and the commands
make would run on a fresh clone (`make -n -B`, so an environment already built here, as in CI after
`make test`'s setup, does not hide them), so the README's two CPU commands and the GPU one cannot
drift into each other."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_install_lock import REPO, _check_covered, _lock  # noqa: E402  (the lock readers, one copy)


def test_the_gpu_lock_pins_the_cuda_build_of_torch_and_liger():
    _check_covered("gpu-lock.txt", "GPU_EXTRAS", "make lock-gpu")
    gpu, main = _lock("gpu-lock.txt"), _lock()
    cpu_torch = (REPO / "requirements" / "torch.txt").read_text().split()[0].split("==")[1]
    gpu_pin = (REPO / "requirements" / "torch-gpu.txt").read_text().split()[0]
    assert gpu_pin == "torch==" + cpu_torch.split("+")[0]  # the same torch, its CUDA build
    assert gpu["torch"][0] == cpu_torch.split("+")[0] and gpu["torch"][1] >= 1
    # PyPI's Linux torch wheel is the CUDA build: its CUDA libraries and triton come with it
    assert "triton" in gpu and [n for n in gpu if n.startswith("nvidia-cublas")]
    assert "liger-kernel" in gpu and "liger-kernel" not in main
    moved = sorted(n for n in gpu if n in main and n != "torch" and gpu[n][0] != main[n][0])
    assert moved == [], f"requirements/gpu-lock.txt differs from the main lock in {moved}: run `make lock-gpu`"


def _make_n(*targets: str) -> list[str]:
    done = subprocess.run(["make", "-n", "-B", *targets], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PIP_FIND_LINKS": ""})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_setup_gpu_installs_the_gpu_lock_into_its_own_environment():
    lines = _make_n("setup-gpu")
    install = [l for l in lines if "pip install" in l and "-r " in l]
    assert install == [".venv-gpu/bin/pip install -q --require-hashes  -r requirements/gpu-lock.txt"]
    assert not [l for l in lines if "whl/cpu" in l or "requirements/lock.txt" in l]  # not the CPU wheel
    assert ".venv-gpu/bin/pip install -q --no-deps -e ." in lines and ".venv-gpu/bin/pip check" in lines
    check = _make_n("gpu-check")
    assert check[-1].strip() == ".venv-gpu/bin/python scripts/gpu_check.py"
    # the README's commands stay on the CPU wheel, in .venv
    for target in ("quickstart", "test"):
        cpu = [l for l in _make_n(target) if "pip install" in l and "-r " in l]
        assert cpu and all("requirements/lock.txt" in l and ".venv/bin/pip" in l for l in cpu), cpu
