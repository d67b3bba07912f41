"""Every shipped example config validates (so `preschool run` / `preschool compartments` start cleanly)."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def test_there_are_examples():
    assert any(p.name == "quickstart.yaml" for p in EXAMPLES)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates(path, monkeypatch):
    # examples read ../shared/data by path relative to the repository root, as a user runs them
    if "shared/data" in path.read_text() and not (REPO.parent / "shared" / "data").is_dir():
        pytest.skip("needs ../shared/data")
    monkeypatch.chdir(REPO)
    if path.name.startswith("compartments_"):
        from preschool.config import load_yaml

        if load_yaml(path).get("kind") == "audit":
            from preschool.compartments.audit import load_audit as load
        else:
            from preschool.compartments.experiment import load_config as load
    else:
        from preschool.experiment import load_experiment as load
    cfg = load(path)
    assert cfg.name == path.stem
