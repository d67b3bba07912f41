"""TrainStep: the package's one optimisation step (the trainer and the QA fine-tune both use it)."""

import re
from pathlib import Path

import torch

from preschool.train.step import TrainStep

SRC = Path(__file__).resolve().parents[2] / "src" / "preschool"


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)


def _sum_loss(model):
    def fn(mb):
        x, y = mb
        s = ((model(x) - y) ** 2).sum()
        return s / 8, s  # the step's objective is the batch mean; report the sum
    return fn


def test_micro_batches_accumulate_to_the_whole_batch_step():
    x, y = _data()
    a, b = _model(), _model()
    step_a = TrainStep(a, torch.optim.AdamW(a.parameters()), grad_clip=0.0)
    step_b = TrainStep(b, torch.optim.AdamW(b.parameters()), grad_clip=0.0)
    ra = step_a([(x, y)], _sum_loss(a), lr=0.1)
    rb = step_b([(x[:4], y[:4]), (x[4:], y[4:])], _sum_loss(b), lr=0.1)
    assert ra.applied and rb.applied
    assert torch.allclose(ra.loss, rb.loss) and torch.allclose(ra.grad_norm, rb.grad_norm)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6) and pa.grad is None and pb.grad is None
    assert step_a.optimizer.param_groups[0]["lr"] == 0.1


def test_clipping_bounds_the_update_and_reports_the_norm_before_it():
    x, y = _data()
    m = _model()
    before = [p.detach().clone() for p in m.parameters()]
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    res = TrainStep(m, opt, grad_clip=1e-3)([(x, y * 100)], _sum_loss(m), lr=1.0)
    moved = torch.cat([(p.detach() - q).flatten() for p, q in zip(m.parameters(), before)]).norm()
    assert res.grad_norm > 1.0 and abs(float(moved) - 1e-3) < 1e-5  # SGD at lr 1 moves by the clipped gradient


def test_a_nonfinite_loss_is_not_applied():
    x, y = _data()
    m = _model()
    before = [p.detach().clone() for p in m.parameters()]
    step = TrainStep(m, torch.optim.AdamW(m.parameters()), grad_clip=1.0)
    res = step([(x, y * float("nan"))], _sum_loss(m), lr=0.1)
    assert not res.applied and not torch.isfinite(res.loss)
    assert all(torch.equal(p, q) and p.grad is None for p, q in zip(m.parameters(), before))
    assert step.optimizer.state == {} or all(not s for s in step.optimizer.state.values())


def test_one_training_loop_in_the_package():
    """Backward, clipping and optimizer steps are written once, in train/step.py."""
    pat = re.compile(r"\.backward\(|clip_grad_norm_\(|(?:opt|optimizer)\.step\(")
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if pat.search(p.read_text(encoding="utf-8")))
    assert found == ["train/step.py"]
