"""Values no build or run can use are refused when the config loads, before anything is written
(issue 34, item 9): a ``seq_len`` whose row is longer than a dataset's token budget, and seeds that are
negative, too large or given twice."""

import pytest
import yaml

from preschool.cli import main
from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.train.configs import TrainConfig


@pytest.mark.parametrize("setting, field", [
    ("seq_len=8192", "data.pt.tokens"),  # 2000 tokens never fill a row of 8193
    ("seq_len=100", "data.pt.val_tokens"),  # 2000 tokens fill 19 rows, 64 val tokens none
])
@pytest.mark.parametrize("command", ["prepare", "run"])
def test_a_row_longer_than_a_dataset_is_refused_before_any_write(tmp_path, tiny_experiment, one_line_error,
                                                                  command, setting, field):
    out = tmp_path / "o"
    assert main([command, str(tiny_experiment), "--out", str(out), "--set", setting]) == 2
    assert "row" in one_line_error(field)
    assert not out.exists()


@pytest.mark.parametrize("setting, field", [
    ("seeds=[-1]", "seeds[0]"), ("seeds=[0, 9223372036854775808]", "seeds[1]"), ("seeds=[3, 3]", "seeds[1]"),
    ("seed=-1", "seed"), ("minimal_pairs.seed=-1", "minimal_pairs.seed"),
])
def test_a_bad_seed_is_refused_before_any_write(tmp_path, tiny_experiment, one_line_error, setting, field):
    out = tmp_path / "o"
    (out / "arms" / "a" / "seed-1").mkdir(parents=True)  # a folder the seed -1 run would take over
    assert main(["run", str(tiny_experiment), "--out", str(out), "--set", setting]) == 2
    one_line_error(field)
    assert [p.relative_to(out).as_posix() for p in sorted(out.rglob("*"))] == ["arms", "arms/a", "arms/a/seed-1"]


def test_train_refuses_a_negative_seed_in_its_config(tmp_path, micro_cfg, datasets, one_line_error):
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump({"train": micro_cfg(seed=-1), "datasets": {"text": str(datasets["text"])}}))
    out = tmp_path / "run"
    assert main(["train", str(cfg), "--out", str(out)]) == 2
    one_line_error("seed")
    assert not out.exists()


def test_every_seed_field_is_checked_on_load():
    with pytest.raises(ConfigError, match=r"^seed: must be .*0.*2\^63"):
        from_dict(TrainConfig, {"seed": -3, "stages": [{"name": "pt", "data": "x", "tokens": 16}]})
