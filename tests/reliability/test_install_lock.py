"""The install lock (issue 11, item 8) covers what `make setup`/`make test` install: every runtime
dependency and every extra in the Makefile's TEST_EXTRAS is pinned with hashes in
requirements/lock.txt, torch at the version of requirements/torch.txt. A dependency added to
pyproject.toml without `make lock` fails here, naming it."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) from requirements/lock.txt."""
    out: dict[str, tuple[str, int]] = {}
    name = None
    for line in (REPO / "requirements" / "lock.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            name = _norm(m.group(1))
            out[name] = (m.group(2), 0)
        elif name and line.strip().startswith("--hash=sha256:"):
            out[name] = (out[name][0], out[name][1] + 1)
    return out


def _needed() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = re.search(r"^TEST_EXTRAS := (.+)$", (REPO / "Makefile").read_text(), re.M).group(1).split(",")
    reqs = list(project["dependencies"])
    for e in extras:
        assert e in project["optional-dependencies"], f"Makefile TEST_EXTRAS names {e!r}, not an extra in pyproject.toml"
        reqs += project["optional-dependencies"][e]
    return [Requirement(r) for r in reqs]


def test_every_dependency_is_locked_with_hashes_within_its_range():
    lock = _lock()
    for req in _needed():
        name = _norm(req.name)
        assert name in lock, f"{req.name} is not in requirements/lock.txt: run `make lock`"
        version, hashes = lock[name]
        assert hashes >= 1, f"{req.name} has no --hash in the lock"
        assert req.specifier.contains(version, prereleases=True), \
            f"{req.name}=={version} in the lock is outside pyproject's {req.specifier}: run `make lock`"


def test_torch_is_the_pinned_cpu_wheel():
    pin = (REPO / "requirements" / "torch.txt").read_text().split()[0]
    assert pin.startswith("torch==") and pin.endswith("+cpu")
    assert _lock()["torch"][0] == pin.split("==")[1]
    assert not [n for n in _lock() if n.startswith("nvidia-") or n == "triton"]  # no CUDA build crept in
