"""Issue #39 item 1: an experiment resolves once to frozen run records (rung x arm x seed) that every part
reads; nothing outside experiment/runs.py merges a TrainConfig or resolves an arm's datasets."""

import ast
import dataclasses
import importlib.util
from pathlib import Path

import pytest

from preschool import layout
from preschool.experiment import load_experiment, resolve_runs

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "preschool"
BUILDER = SRC / "experiment" / "runs.py"
LADDER_DYCK = ROOT / "examples" / "ladder_dyck.yaml"

# the merge and the resolution (functions of runs.py), and the config methods that used to do them (a method
# call: the fine-tune's own train_config(cfg, data, device) of train/finetune.py is another function)
_RESOLVING = {"_merge_train_config", "_merged_train_config", "_resolve_datasets"}
_RESOLVING_METHODS = {"train_config", "arm_datasets"}


def _resolving_calls(root: Path) -> list[str]:
    """``path:line name`` of every call of a resolving function or config method outside runs.py."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == BUILDER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in _RESOLVING or isinstance(f, ast.Attribute) and name in _RESOLVING_METHODS:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return found


def test_only_the_records_module_merges_train_configs_or_resolves_datasets():
    assert _resolving_calls(SRC) == []


def test_the_walk_sees_a_config_method_call_and_a_private_merge_call(tmp_path):
    (tmp_path / "plan.py").write_text("def f(cfg, arm):\n    return cfg.train_config(arm, 0)\n\n"
                                      "def g(cfg, data):\n    return train_config(cfg, data, 'cpu')\n")
    (tmp_path / "x.py").write_text("from .runs import _merged_train_config\n\n"
                                   "def g(cfg):\n    return _merged_train_config(cfg, 1, 2, '')\n")
    assert _resolving_calls(tmp_path) == ["plan.py:2 train_config", "x.py:4 _merged_train_config"]


def test_a_ladder_resolves_to_one_frozen_record_per_rung_arm_seed(tmp_path):
    cfg = load_experiment(LADDER_DYCK, [f"out={tmp_path}"])
    runs = resolve_runs(cfg)
    assert [(r.rung, r.arm, r.seed) for r in runs] == [
        (rung, arm, seed) for rung in ("r0", "r1", "r2", "r3") for arm in ("pt_only", "ppt_dyck") for seed in (0, 1, 2)]
    for r in runs:
        assert r.run_dir == layout.run_dir(tmp_path, r.arm, r.seed, r.rung)
        assert r.train.seed == r.seed and r.where == f"arms[{[a.name for a in cfg.arms].index(r.arm)}]"
        view = cfg.at_rung(r.rung)
        assert r.train == view.train_config(cfg.arms[r.arm_index], r.seed)  # what the config's reader gives
        assert set(r.stage_datasets) <= set(r.datasets) and r.evals == tuple(cfg.evals)
    first = runs[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.seed = 5
    with pytest.raises(TypeError):
        first.datasets["pt"] = tmp_path  # read-only mapping: a step cannot change what the next one reads
    # a rung's view is that rung's grid, and the report reads the view's own grid
    view = cfg.at_rung("r1")
    assert resolve_runs(view) == view.run_records() == tuple(r for r in runs if r.rung == "r1")


def _config_reach():
    spec = importlib.util.spec_from_file_location("config_reach", ROOT / "scripts" / "config_reach.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_config_reach_follows_the_config_through_views_and_methods(tmp_path):
    pkg = tmp_path / "preschool"
    (pkg / "experiment").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "experiment" / "__init__.py").write_text("from .runner import run_experiment\n")
    (pkg / "experiment" / "runner.py").write_text(
        "from ..helpers import step, unrelated\n\n"
        "class ExperimentConfig:\n    def at_rung(self, r):\n        return self\n\n"
        "    def other(self):\n        pass\n\n"
        "def run_experiment(cfg):\n    view = cfg.at_rung('r')\n    step(view)\n    unrelated(cfg.name)\n")
    (pkg / "helpers.py").write_text("def step(c):\n    deeper(c)\n\ndef deeper(c):\n    pass\n\n"
                                    "def unrelated(name):\n    pass\n")
    got = _config_reach().reach(pkg)
    runner = "preschool.experiment.runner"
    assert set(got) == {(runner, "run_experiment"), (runner, "ExperimentConfig.at_rung"),
                        ("preschool.helpers", "step"), ("preschool.helpers", "deeper")}


def test_run_experiments_config_reaches_at_most_60_functions():
    # the bound on "following run_experiment's cfg through the calls that pass it on" (93 stops by the
    # reviewer's count at 19dd346); scripts/config_reach.py states how this count is taken
    assert len(_config_reach().reach(SRC)) <= 60
