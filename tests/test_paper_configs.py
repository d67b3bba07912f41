"""Every examples/paper/*.yaml runs end to end on CPU after --set overrides shrink it to micro scale.

The overrides swap the hub corpus for the offline storybook, the model for `micro`, the sequence
length to 64 and every token budget to a few thousand; everything else (arms, stages, schedules,
groups, mixtures, L2T building, compartments, evaluator settings) runs as shipped, so a config that
stops validating or running fails here. Evaluators that need the hub (BLiMP from nyu-mll/blimp,
lm-eval's downstream tasks) are checked for valid settings and then replaced by a tiny local
verbatim run.
"""

from pathlib import Path

import pytest

from preschool.cli import main
from preschool.config import load_yaml
from preschool.evals import EVALUATORS

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "examples" / "paper"
TINY_EVALS = ("evals=[{name: verbatim, params: {n_base_lists: 2, n_lists: 2, list_lengths: [3], "
              "intervening_words: [0], bootstrap_resamples: 10}}]")
STORYBOOK = "{source: storybook, seed: 0}"
MICRO_MODEL = ["model.preset=micro", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200", "seq_len=64"]


def _stage_overrides(raw: dict, per_stage: int = 2048) -> list[str]:
    """Every stage budget to ``per_stage`` tokens (mixture weights kept)."""
    out = []
    for i, arm in enumerate(raw["arms"]):
        for j, _ in enumerate(arm["stages"]):
            out.append(f"arms.{i}.stages.{j}.tokens={per_stage}")
    return out


def _run_kind_overrides(raw: dict, out: Path) -> list[str]:
    sets = [f"out={out}", "workers=1", *MICRO_MODEL, TINY_EVALS, "train.batch_size=8", "train.micro_batch_size=4",
            "train.checkpoint_every=2", "train.eval_every=2", "train.val_rows=4", "train.log_every=1"]
    sets += [f"corpora.{c}={STORYBOOK}" for c in raw["corpora"]]
    for name, d in raw["data"].items():
        sets += [f"data.{name}.tokens=8000", f"data.{name}.val_tokens={1024 if d.get('val_tokens') else 0}"]
        if d.get("exact_fill"):  # a 300-token BPE does not give every integer symbol the same token count
            sets.append(f"data.{name}.exact_fill=false")
    return sets + _stage_overrides(raw)


def _check_evaluator_settings(raw: dict, data_dir: Path) -> None:
    """The shipped evaluator settings are valid (``${data}`` resolved as the runner does)."""
    from preschool.evals.runner import with_data_dir

    for i, e in enumerate(raw.get("evals") or []):
        EVALUATORS.build_config(e["name"], with_data_dir(e.get("params") or {}, data_dir), f"evals[{i}]")


# verify_ppt_500m runs in the default suite (about 30 s on 2 idle cores); the others take as long
# each and run with -m slow (CI's default run still loads, plans and launches every one of them:
# tests/test_plan.py, tests/test_launch.py)
SLOW = pytest.mark.slow


@pytest.mark.parametrize("name", ["verify_ppt_500m", pytest.param("verify_ppt_1b", marks=SLOW),
                                  pytest.param("stack_paper", marks=SLOW), pytest.param("l2t_paper", marks=SLOW)])
def test_paper_experiment_runs_at_micro_scale(name, tmp_path):
    path = PAPER / f"{name}.yaml"
    raw = load_yaml(path)
    sets = _run_kind_overrides(raw, tmp_path / "run")
    if name == "l2t_paper":  # L2T cuts documents into seq_len // 4 chunks: 64-token rows leave none
        sets.append("seq_len=256")
    assert main(["run", str(path), *[x for s in sets for x in ("--set", s)], "--no-progress"]) == 0
    _check_evaluator_settings(raw, tmp_path / "run" / "data")
    for arm in raw["arms"]:
        run = tmp_path / "run" / "arms" / arm["name"] / f"seed{raw['seeds'][0]}"
        assert (run / "DONE").is_file(), arm["name"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "unfinished" not in report and "verbatim" in report


@SLOW
def test_compartments_paper_runs_at_micro_scale(tmp_path):
    path = PAPER / "compartments_paper.yaml"
    raw = load_yaml(path)
    sets = [f"out={tmp_path / 'run'}", *MICRO_MODEL, f"corpora.fineweb={STORYBOOK}", "data.base.tokens=20000",
            "data.base.val_tokens=2048", "train.batch_size=16", "train.micro_batch_size=8", "train.val_rows=8",
            "train.log_every=1", "report.sections.similarity.rows=4"]
    sets += [f"arms.{i}.stages.0.{k}" for i in range(len(raw["arms"])) for k in ("tokens=4096", "warmup=2")]
    assert main(["compartments", str(path), *[x for s in sets for x in ("--set", s)], "--no-progress"]) == 0
    for arm in raw["arms"]:
        assert (tmp_path / "run" / "arms" / arm["name"] / "seed0" / "DONE").is_file()
    assert "## Slowdown vs `c1`" in (tmp_path / "run" / "report.md").read_text()
