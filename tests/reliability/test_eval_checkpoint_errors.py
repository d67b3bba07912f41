"""``eval --checkpoint`` of a folder that cannot make a model ends in one line naming it, exit 2 (issue 34,
item 13): a ``config.json`` whose sizes do not match the weights or are impossible (``vocab_size: -1``), a
``tokenizer.json`` that is not one, and a ``pytorch_model.bin`` holding a pickle beyond tensors (refused,
without torch's hint to load it anyway)."""

import json
import shutil

import pytest
import torch

from preschool.cli import main
from preschool.train.trainer import train


@pytest.fixture
def ckpt(tmp_path, datasets, micro_cfg, stop_at):
    """A copy of a trained run's checkpoint folder (outside the run: evaluations go to ``<ckpt>/evals``)."""
    train(micro_cfg(checkpoint_every=2, eval_every=0), tmp_path / "run", datasets, callbacks=[stop_at(2)])
    c = tmp_path / "ckpt"
    shutil.copytree(tmp_path / "run" / "checkpoints" / "step-00000002", c)
    return c


def _eval(ckpt, datasets):
    return main(["eval", "--checkpoint", str(ckpt), "--evaluator", "heldout",
                 "--set", f"sources.t={datasets['text']}"])


def _edit_config(ckpt, **changes):
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg.update(changes)
    (ckpt / "config.json").write_text(json.dumps(cfg))


def test_the_intact_checkpoint_evaluates(ckpt, datasets, capsys):
    assert _eval(ckpt, datasets) == 0, capsys.readouterr().err


@pytest.mark.parametrize("damage, says", [
    ("hidden_size", "config.json"), ("vocab_size", "config.json"),
    ("tokenizer", "tokenizer.json"), ("pickle", "pytorch_model.bin"),
])
def test_a_checkpoint_that_makes_no_model_is_one_line(tmp_path, ckpt, datasets, one_line_error, payload, damage,
                                                       says):
    marker = tmp_path / "PWNED"
    if damage == "hidden_size":
        _edit_config(ckpt, hidden_size=48)  # the weights are 32 wide
    elif damage == "vocab_size":
        _edit_config(ckpt, vocab_size=-1)
    elif damage == "tokenizer":
        (ckpt / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "nonsense"}}')
    else:
        (ckpt / "model.safetensors").unlink()
        torch.save({"w": payload(marker)}, ckpt / "pytorch_model.bin")
    assert _eval(ckpt, datasets) == 2
    err = one_line_error(ckpt, says)
    assert "Traceback" not in err and "weights_only=False" not in err and "can still be loaded" not in err
    assert not marker.exists() and not (ckpt / "evals").exists()


@pytest.mark.parametrize("content", ["payload", "plain"])
def test_a_raw_pickle_is_refused_in_the_one_line_alone(tmp_path, ckpt, datasets, one_line_error, payload, content):
    """Issue 40, item 15: a pytorch_model.bin written by pickle.dump (not torch.save) made torch's weights_only
    unpickler warn about its protocol, two lines before the refusal; only the refusal is shown now."""
    import pickle
    import warnings

    marker = tmp_path / "PWNED"
    (ckpt / "model.safetensors").unlink()
    with open(ckpt / "pytorch_model.bin", "wb") as fh:
        pickle.dump({"w": payload(marker) if content == "payload" else [1, 2]}, fh, protocol=4)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        assert _eval(ckpt, datasets) == 2
    assert [str(w.message) for w in shown] == []
    one_line_error(ckpt, "pytorch_model.bin")
    assert not marker.exists()
