"""The install lock (issue 11, item 8) covers what `make setup`/`make test` install: every runtime
dependency and every extra in the Makefile's TEST_EXTRAS is pinned with hashes in
requirements/lock.txt, torch at the version of requirements/torch.txt. A dependency added to
pyproject.toml without `make lock` fails here, naming it. Likewise requirements/olmo-lock.txt, the
environment of `make test-olmo` (OLMo-core's reader), for OLMO_EXTRAS."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock(file: str = "lock.txt") -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) from requirements/<file>."""
    out: dict[str, tuple[str, int]] = {}
    name = None
    for line in (REPO / "requirements" / file).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            name = _norm(m.group(1))
            out[name] = (m.group(2), 0)
        elif name and line.strip().startswith("--hash=sha256:"):
            out[name] = (out[name][0], out[name][1] + 1)
    return out


def _make_var(name: str) -> str:
    return re.search(rf"^{name} := (.+)$", (REPO / "Makefile").read_text(), re.M).group(1)


def _needed(extras_var: str = "TEST_EXTRAS") -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for e in _make_var(extras_var).split(","):
        assert e in project["optional-dependencies"], f"Makefile {extras_var} names {e!r}, not an extra in pyproject.toml"
        reqs += project["optional-dependencies"][e]
    return [Requirement(r) for r in reqs]


def _check_covered(file: str, extras_var: str, remedy: str) -> None:
    lock = _lock(file)
    for req in _needed(extras_var):
        name = _norm(req.name)
        assert name in lock, f"{req.name} is not in requirements/{file}: run `{remedy}`"
        version, hashes = lock[name]
        assert hashes >= 1, f"{req.name} has no --hash in requirements/{file}"
        assert req.specifier.contains(version, prereleases=True), \
            f"{req.name}=={version} in requirements/{file} is outside pyproject's {req.specifier}: run `{remedy}`"


def test_every_dependency_is_locked_with_hashes_within_its_range():
    _check_covered("lock.txt", "TEST_EXTRAS", "make lock")


def test_the_olmo_lock_is_the_main_lock_but_what_olmo_core_excludes():
    """make test-olmo's environment (requirements/olmo-lock.txt) pins the runtime dependencies and
    OLMO_EXTRAS with hashes, and every package the main lock also holds at the main lock's version,
    except the Makefile's OLMO_DOWNGRADES (what OLMo-core's cached-path caps): OLMo-core's reader is
    checked against the libraries everything else runs on, and OLMo-core stays out of the main lock."""
    _check_covered("olmo-lock.txt", "OLMO_EXTRAS", "make lock-olmo")
    main, olmo = _lock(), _lock("olmo-lock.txt")
    moved = sorted(n for n in olmo if n in main and olmo[n][0] != main[n][0])
    assert moved == sorted(_norm(n) for n in _make_var("OLMO_DOWNGRADES").split()), \
        f"requirements/olmo-lock.txt differs from the main lock in {moved}: run `make lock-olmo` after `make lock`"
    assert "ai2-olmo-core" in olmo and "ai2-olmo-core" not in main


def test_torch_is_the_pinned_cpu_wheel():
    pin = (REPO / "requirements" / "torch.txt").read_text().split()[0]
    assert pin.startswith("torch==") and pin.endswith("+cpu")
    assert _lock()["torch"][0] == pin.split("==")[1]
    assert not [n for n in _lock() if n.startswith("nvidia-") or n == "triton"]  # no CUDA build crept in


def _tree(tmp_path: Path) -> Path:
    """What `make setup` reads: the Makefile, pyproject.toml and requirements/, in a folder of their own."""
    import shutil

    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "requirements", tmp_path / "requirements")
    return tmp_path


def _fake(path: Path, script: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)
    return path


def test_a_locked_install_into_another_python_stops_before_pip_saying_what_to_do(tmp_path):
    """The lock's torch CPU wheel is one CPython's (one hash): an environment of another Python (Ubuntu 24.04's
    python3 is 3.12) stops with what to do, before pip installs anything or fails on that hash."""
    import subprocess

    tree = _tree(tmp_path)
    _fake(tree / ".venv" / "bin" / "python", 'echo 3.12')
    _fake(tree / ".venv" / "bin" / "pip", 'echo "$@" >> "$0.ran"')
    done = subprocess.run(["make", "setup"], cwd=tree, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    lock_python = _make_var("LOCK_PYTHON")
    assert (f"requirements/lock.txt is resolved for CPython {lock_python} (its torch CPU wheel is {lock_python}'s) "
            "and .venv runs Python 3.12" in done.stderr), done.stderr
    assert f"PY=/path/to/python{lock_python}" in done.stderr and "USE_LOCK=0" in done.stderr
    assert not (tree / ".venv" / "bin" / "pip.ran").exists()


def test_make_takes_the_locks_python_when_it_is_on_the_path(tmp_path):
    """`make setup` creates .venv with python3.11 (the lock's) where one is on PATH, whatever python3 is."""
    import subprocess

    tree = _tree(tmp_path / "tree")
    lock_python = _make_var("LOCK_PYTHON")
    wanted = _fake(tmp_path / "bin" / f"python{lock_python}", "exit 0")
    done = subprocess.run(["make", "-n", "-B", "setup"], cwd=tree, capture_output=True, text=True,
                          env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert f"{wanted} -m venv .venv" in done.stdout
