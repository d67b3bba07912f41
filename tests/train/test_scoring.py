"""The trainer's validation loss and the ``heldout`` evaluator are one definition: same rows, same number."""

import pytest

from preschool.evals import EVALUATORS
from preschool.evals.runner import load_checkpoint
from preschool.layout import final_checkpoint, read_metrics
from preschool.train.trainer import train


@pytest.mark.parametrize("reset", [False, True])
def test_val_loss_logged_by_the_trainer_equals_the_heldout_evaluator(tmp_path, datasets, micro_cfg, reset):
    # 'synth' has a loss mask and segments and more val rows (16) than val_rows (8): every part of the
    # definition (row selection, mask, document attention) has to agree for the numbers to match
    run = tmp_path / "run"
    cfg = micro_cfg(val=["text", "synth"], val_rows=8, attention_reset_between_docs=reset,
                    stages=[{"name": "pt", "data": {"text": 1.0, "synth": 1.0}, "tokens": 4 * 16 * 4}])
    train(cfg, run, datasets)
    logged = read_metrics(run, event="val")[-1]
    model, tok = load_checkpoint(final_checkpoint(run))
    ev = EVALUATORS.build("heldout", {"sources": {k: str(v) for k, v in datasets.items()}, "max_rows": 8,
                                      "batch_size": 3, "attention_reset_between_docs": reset})
    got = ev.evaluate(model, tok).metrics
    for name in ("text", "synth"):
        assert got[f"loss/{name}"] == pytest.approx(logged[f"val/{name}"], abs=1e-5)
