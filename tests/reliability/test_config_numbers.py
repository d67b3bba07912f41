"""A number field of a config holds a finite number (issue 40, item 12): YAML's ``.inf`` / ``.nan`` for a ladder's
``ratio``, a rung's ``multiplier`` or ``synthetic.fraction`` ended in an ``OverflowError`` traceback when the
budgets were computed. Every float field of every config is now checked in one place, as it is read, and a
non-finite value is refused in one line naming the field."""

from pathlib import Path

import pytest
import yaml

from preschool.cli import main
from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.train.configs import TrainConfig

LADDER = Path(__file__).parents[1] / "ladder_micro.yaml"


def _ladder(tmp_path, edit) -> Path:
    data = yaml.safe_load(LADDER.read_text())
    edit(data["ladder"])
    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _per_param(ratio):
    def edit(ladder):
        ladder["tokens"] = {"rule": "per_param", "ratio": ratio}
        for rung in ladder["rungs"]:
            rung.pop("multiplier")
    return edit


def _multiplier(value):
    def edit(ladder):
        ladder["rungs"][1]["multiplier"] = value
    return edit


def _fraction(value):
    def edit(ladder):
        ladder["synthetic"]["fraction"] = value
    return edit


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("edit, field", [
    (_per_param, "ladder.tokens.ratio"),
    (_multiplier, "ladder.rungs[1].multiplier"),
    (_fraction, "ladder.synthetic.fraction"),
])
@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_non_finite_ladder_number_is_one_line_naming_the_field(tmp_path, one_line_error, command, edit, field,
                                                                 value):
    path = _ladder(tmp_path, edit(value))
    out = tmp_path / "out"
    args = ["plan", str(path), "--cpu"] if command == "plan" else ["run", str(path), "--out", str(out)]
    assert main(args) == 2
    err = one_line_error(field)
    assert "Traceback" not in err
    assert not out.exists()


def test_the_finite_ladder_still_plans(tmp_path, capsys):
    assert main(["plan", str(_ladder(tmp_path, _per_param(20.0))), "--cpu"]) == 0


@pytest.mark.parametrize("raw", [".inf", "-.inf", ".nan", "1e400"])
@pytest.mark.parametrize("key, field", [
    ("lr", "lr"), ("grad_clip", "grad_clip"), ("betas", "betas[1]"), ("data", "stages[0].data.d"),
])
def test_every_float_field_is_finite_on_load(raw, key, field):
    value = yaml.safe_load(raw)
    stage = {"name": "pt", "data": "d", "tokens": 64}
    data = {"betas": [0.9, value]} if key == "betas" else {key: value}
    if key == "data":
        stage, data = {**stage, "data": {"d": value}}, {}
    with pytest.raises(ConfigError, match="finite") as e:
        from_dict(TrainConfig, {"stages": [stage], **data})
    assert e.value.field == field


def test_a_non_finite_set_value_is_refused(tiny_experiment, one_line_error):
    out = tiny_experiment.parent / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--set", "train.lr=.inf"]) == 2
    one_line_error("train.lr", "finite")
    assert not out.exists()
