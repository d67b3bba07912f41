import numpy as np
import pytest
import torch
import torch.nn.functional as F

from preschool.compartments.model import attach_compartment_embedding, copy_compartment_init
from preschool.compartments.similarity import compartment_losses, cross_compartment_similarity
from preschool.train.model import ModelConfig, build_model

V, C = 16, 3


def _model():
    m = build_model(ModelConfig(preset="micro", tie_embeddings=False), C * V + 1, seed=1)
    attach_compartment_embedding(m, C, V, init_std=0.3)
    return m


def test_losses_per_compartment_match_direct_computation():
    m = _model()
    rows = np.random.default_rng(0).integers(0, V, (5, 9))
    mask = np.ones_like(rows)
    mask[:, :4] = 0
    res = compartment_losses(m, rows, C, V, loss_mask=mask, batch_size=2)
    ids = torch.as_tensor(rows) + 2 * V
    with torch.no_grad():
        logits = m(ids[:, :-1]).logits
    nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")[:, 3:]
    assert res["loss/c2"] == pytest.approx(nll.mean().item(), rel=1e-5)
    assert res["loss/mean"] == pytest.approx(np.mean([res[f"loss/c{i}"] for i in range(C)]))


def test_similarity_one_after_copy_init_and_lower_otherwise():
    m = _model()
    base = np.random.default_rng(1).integers(0, V, (4, 8))
    before = cross_compartment_similarity(m, base, C, V, layer=1)
    copy_compartment_init(m, C, V)
    after = cross_compartment_similarity(m, base, C, V, layer=1)
    assert after["mean"] == pytest.approx(1.0, abs=1e-5)  # identical blocks -> identical states
    assert before["mean"] < 0.9
    assert np.allclose(np.diag(after["matrix"]), 1.0) and after["layer"] == 1
