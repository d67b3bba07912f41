"""Every shipped example config validates (so `preschool run` starts cleanly) and runs end to end at
micro scale (conftest.micro_overrides: micro model, a few thousand tokens, every arm and stage as shipped)."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def test_there_are_examples():
    assert any(p.name == "quickstart.yaml" for p in EXAMPLES)


@pytest.mark.filterwarnings("error::FutureWarning")  # examples show the current spelling, not a read-for-now one
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates(path, monkeypatch):
    # examples read ../shared/data by path relative to the repository root, as a user runs them
    if "shared/data" in path.read_text() and not (REPO.parent / "shared" / "data").is_dir():
        pytest.skip("needs ../shared/data")
    monkeypatch.chdir(REPO)
    from preschool.experiment import load_experiment

    cfg = load_experiment(path).cfg
    assert cfg.name == path.stem


STORED = sorted((REPO / "docs" / "results").glob("compartments_*/**/experiment.yaml"))


@pytest.mark.filterwarnings("error::FutureWarning")
@pytest.mark.parametrize("path", STORED, ids=lambda p: str(p.relative_to(REPO / "docs" / "results")))
def test_stored_result_configs_validate(path):
    """The configs stored beside committed results are in the current schema (migrated, issue 13:
    an old spelling that is still read, with a FutureWarning, fails here)."""
    from preschool.experiment import load_experiment

    cfg = load_experiment(path).cfg
    assert cfg.arms and cfg.report.sections


# seconds on 2 idle cores; the default run keeps one compartments example (derived datasets, callbacks,
# report sections); the quickstart runs in tests/test_experiment.py. The rest run with -m slow.
MICRO_DEFAULT = {"compartments_slowdown"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=() if p.stem in MICRO_DEFAULT else pytest.mark.slow)
                                  for p in EXAMPLES], ids=lambda p: p.name)
def test_example_runs_at_micro_scale(path, tmp_path, micro_run, monkeypatch):
    if "shared/data" in path.read_text() and not (REPO.parent / "shared" / "data").is_dir():
        pytest.skip("needs ../shared/data")
    monkeypatch.chdir(REPO)
    # one training seed; L2T cuts documents into seq_len // 4 token chunks, so 64-token rows leave none
    micro_run(path, tmp_path / "run", ["seeds=[0]", *(["seq_len=256"] if "l2t" in path.stem else [])])
