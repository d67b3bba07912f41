"""train/train_module.py: a micro-batch's loss is the summed cross-entropy of its label tokens times the caller's
scale, the same through the fused loss path as on the logits, plus each callback's extra loss times the
micro-batch's share of the step; padding rows are masked."""

import pytest
import torch
import torch.nn.functional as F

from preschool.data.mixture import IGNORE_INDEX
from preschool.train.callbacks import Callback
from preschool.train.loss import FusedLoss
from preschool.train.model import ModelConfig, build_model
from preschool.train.train_module import TrainModule

VOCAB = 64


class _Extra(Callback):
    """An extra loss of exactly 2.0 that keeps the graph (what a callback such as InfoNCE adds)."""

    def extra_loss(self, model, mb, out):
        return 2.0 + 0.0 * out.logits.sum() if out.logits is not None else torch.tensor(2.0)


def _module(model, callbacks=(), fused=None):
    return TrainModule(model, model, callbacks, device=torch.device("cpu"), amp_dtype=None,
                       fused_loss=FusedLoss(model, fused) if fused else None, doc_attention=False,
                       needs_hidden=False)


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (2, 12), generator=g)
    labels = ids.clone()
    labels[:, :3] = IGNORE_INDEX  # a prompt: no loss there
    return {"input_ids": ids, "labels": labels}


def test_the_loss_is_the_scaled_summed_cross_entropy_fused_or_not():
    model = build_model(ModelConfig(preset="micro"), VOCAB, seed=0)
    mb = _batch()
    with torch.no_grad():
        logits = model(input_ids=mb["input_ids"]).logits
    want = F.cross_entropy(logits.float().reshape(-1, VOCAB), mb["labels"].reshape(-1), ignore_index=IGNORE_INDEX,
                           reduction="sum")
    loss, ce = _module(model).loss(mb, scale=0.5, share=1.0)
    assert ce.item() == pytest.approx(want.item(), rel=1e-5) and loss.item() == pytest.approx(0.5 * want.item(), rel=1e-5)
    loss, ce = _module(model, fused="chunked").loss(mb, scale=0.5, share=1.0)
    assert ce.item() == pytest.approx(want.item(), rel=1e-4) and loss.requires_grad


def test_callbacks_extra_losses_are_weighted_by_the_micro_batchs_share():
    model = build_model(ModelConfig(preset="micro"), VOCAB, seed=0)
    mb = _batch()
    base, ce = _module(model).loss(mb, scale=1.0, share=0.25)
    with_extra, ce2 = _module(model, [_Extra()]).loss(mb, scale=1.0, share=0.25)
    assert ce2.item() == pytest.approx(ce.item()) and with_extra.item() == pytest.approx(base.item() + 0.5, rel=1e-6)


def test_padding_is_masked_by_the_attention_mask():
    """A padded row (the QA fine-tune's, padded on the left here) scores the same whatever stands in its padding;
    without the mask the tokens after the padding would attend to it."""
    model = build_model(ModelConfig(preset="micro"), VOCAB, seed=0)
    mb = _batch()
    mask = torch.ones_like(mb["input_ids"])
    mask[1, :4] = 0  # the second row's first four positions are padding
    mb["labels"][1, :4] = IGNORE_INDEX
    other = dict(mb, input_ids=mb["input_ids"].clone())
    other["input_ids"][1, :4] = (other["input_ids"][1, :4] + 7) % VOCAB
    _, ce_a = _module(model).loss({**mb, "attention_mask": mask}, 1.0, 1.0)
    _, ce_b = _module(model).loss({**other, "attention_mask": mask}, 1.0, 1.0)
    assert ce_a.item() == pytest.approx(ce_b.item(), rel=1e-5)
    _, unmasked_a = _module(model).loss(mb, 1.0, 1.0)
    _, unmasked_b = _module(model).loss(other, 1.0, 1.0)
    assert unmasked_a.item() != pytest.approx(unmasked_b.item(), rel=1e-5)  # the mask is what made them equal
