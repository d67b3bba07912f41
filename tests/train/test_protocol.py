"""train/protocol.py is the trainer as callbacks and checkpoint.py see it: the Trainer has every name it
lists, and the callbacks (built-in and the plug-in's) use no name it does not list."""

import re
import typing
from pathlib import Path

from preschool.train.callbacks import Callback
from preschool.train.protocol import CheckpointedTrainer, TrainerView
from preschool.train.trainer import train

SRC = Path(__file__).resolve().parents[2] / "src" / "preschool"


def _names(proto) -> set[str]:
    return {n for c in proto.__mro__ if c not in (object, typing.Protocol, typing.Generic)
            for n in (*vars(c), *getattr(c, "__annotations__", {})) if not n.startswith("_")}


def test_the_trainer_has_every_name_the_protocols_list(tmp_path, datasets, micro_cfg):
    missing = {}

    class Probe(Callback):
        def on_train_start(self, trainer):
            missing["view"] = sorted(n for n in _names(TrainerView) if not hasattr(trainer, n))
            missing["ckpt"] = sorted(n for n in _names(CheckpointedTrainer) if not hasattr(trainer, n))

    train(micro_cfg(stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 2}]), tmp_path / "r", datasets,
          callbacks=[Probe()])
    assert missing == {"view": [], "ckpt": []}


def test_callbacks_use_only_what_the_view_lists():
    allowed = _names(TrainerView)
    files = [*(SRC / "train" / "callbacks").glob("*.py"), SRC / "compartments" / "callbacks.py",
             SRC / "compartments" / "infonce.py", SRC / "compartments" / "model_callback.py"]
    used = {m for f in files for m in re.findall(r"\btrainer\.(?!py\b)([A-Za-z_]\w*)", f.read_text(encoding="utf-8"))}
    assert used - allowed == set()
    assert {"step", "log", "model", "cfg"} <= used  # the scan does see the callbacks' uses
