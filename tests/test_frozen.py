"""preschool/frozen.py: a frozen config refuses every change, reads and compares like the original, shares
nothing with it, and what is built from it (replace, copies, pickles) is the builder's own to change."""

import copy
import dataclasses
import pickle

import pytest

from preschool.config import overlay, to_dict
from preschool.frozen import freeze, is_frozen
from preschool.train.configs import StageConfig, TrainConfig


def _train() -> TrainConfig:
    return TrainConfig(stages=[StageConfig(name="pt", data={"a": 1.0, "b": 2.0}, tokens=64)], seed=3, val=["a"])


def test_a_frozen_config_refuses_every_change_and_its_original_is_untouched():
    plain = _train()
    frozen = freeze(plain)
    changes = [lambda: setattr(frozen, "lr", 1.0), lambda: delattr(frozen, "lr"),
               lambda: setattr(frozen.stages[0], "tokens", 1), lambda: setattr(frozen.stages[0].schedule, "warmup", 0.5),
               lambda: frozen.stages.append(frozen.stages[0]), lambda: frozen.stages.__setitem__(0, None),
               lambda: frozen.stages[0].data.update(c=1.0), lambda: frozen.stages[0].data.pop("a"),
               lambda: frozen.val.extend(["b"]), lambda: frozen.model.overrides.setdefault("x", 1)]
    for change in changes:
        with pytest.raises((TypeError, dataclasses.FrozenInstanceError)):
            change()
    assert frozen == plain and plain == frozen and to_dict(frozen) == to_dict(plain)
    plain.stages[0].tokens = 5  # the original stays the caller's, and the copy shares nothing with it
    assert frozen.stages[0].tokens == 64 and frozen != plain


def test_a_frozen_config_is_of_its_own_class_and_the_class_stays_changeable():
    frozen = freeze(_train())
    assert type(frozen) is TrainConfig and type(frozen.stages[0]) is StageConfig and is_frozen(frozen)
    assert isinstance(frozen.stages, list) and isinstance(frozen.stages[0].data, dict)
    other = _train()
    other.lr = 0.5  # another instance of the class is as changeable as before
    assert other.lr == 0.5 and not is_frozen(other)


def test_what_is_built_from_a_frozen_config_is_the_builders_own():
    frozen = freeze(_train())
    for mine in (dataclasses.replace(frozen, progress=False), overlay(frozen, {"model": {"overrides": {"x": 1}}}),
                 copy.deepcopy(frozen), pickle.loads(pickle.dumps(frozen))):
        mine.lr = 0.25
        assert mine.lr == 0.25 and frozen.lr != 0.25
    mine = copy.deepcopy(frozen)
    mine.stages.append(mine.stages[0])
    mine.stages[0].tokens = 1
    assert len(frozen.stages) == 1 and frozen.stages[0].tokens == 64
    assert overlay(frozen, {"model": {"overrides": {"x": 1}}}).model.overrides == {"x": 1}


def test_freezing_twice_is_the_same_value():
    frozen = freeze(_train())
    assert freeze(frozen) is frozen and freeze((1, [2])) == (1, [2]) and is_frozen(freeze((1, [2]))[1])
