"""Fixtures shared with tests/train (tiny learnable datasets, micro train config), loaded from there
rather than copied: ``datasets``, ``micro_cfg``, ``write_dataset``."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_train_fixtures", Path(__file__).parents[1] / "train" / "conftest.py")
_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_train)

datasets = _train.datasets
micro_cfg = _train.micro_cfg
write_dataset = _train.write_dataset
