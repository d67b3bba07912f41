import numpy as np
import pytest

from preschool.errors import ConfigError
from preschool.synthetic import GENERATORS
from preschool.synthetic.stack import simulate


def test_reference_simulation_on_the_paper_example():
    ops = [1, 2, 0, 3]  # push A, push B, pop, push C
    assert simulate(ops, fifo=False) == [3, 1]  # stack, top first: C A
    assert simulate(ops, fifo=True) == [2, 3]  # queue, front first: B C


def test_vocabulary_and_layout_follow_procedural_pretraining():
    g = GENERATORS.build("stack", {})
    assert (g.cfg.n_symbols, g.cfg.n_ops, g.cfg.length, g.vocab_size) == (100, 64, 128, 102)
    it = g.item(0)
    s = it.symbols
    assert s[64] == 100  # separator after 64 ops
    n = it.meta["answer_len"]
    assert np.all(s[65 + n:] == 101)  # PAD
    assert it.loss_mask.sum() == n and it.loss_mask[65: 65 + n].all()


@pytest.mark.parametrize("name", ["stack", "queue"])
def test_schedule_and_answers(name):
    g = GENERATORS.build(name, {"n_symbols": 12, "n_ops": 30, "length": 60})
    pushes_early, pushes_late = [], []
    for it in g.items(0, 60):
        g.check(it)
        ops = it.symbols[:30]
        pushes_early.append(np.mean(ops[2:20] > 0))
        pushes_late.append(np.mean(ops[20:29] > 0))
        assert ops[0] > 0  # first op is always a push
    assert np.mean(pushes_early) > 0.6 > 0.45 > np.mean(pushes_late)


def test_answer_order_options():
    kw = {"n_symbols": 30, "n_ops": 20, "length": 40}
    for name, first, last in (("stack", "top_first", "bottom_first"), ("queue", "front_first", "back_first")):
        a = GENERATORS.build(name, {**kw, "answer_order": first}).item(2)
        b = GENERATORS.build(name, {**kw, "answer_order": last}).item(2)
        (x, y), = a.meta["answer_spans"]
        assert a.symbols[:x].tolist() == b.symbols[:x].tolist()
        assert a.symbols[x:y].tolist() == b.symbols[x:y][::-1].tolist()
        ops = a.symbols[:20].tolist()
        assert a.symbols[x:y].tolist() == simulate(ops, fifo=name == "queue")


def test_stack_and_queue_differ_only_in_pop_semantics():
    # same distinct-symbol schedule rules, different memory: answers disagree somewhere
    kw = {"n_symbols": 50, "n_ops": 40, "length": 80}
    s, q = GENERATORS.build("stack", kw), GENERATORS.build("queue", kw)
    assert any(simulate(s.item(i).symbols[:40].tolist(), True) != simulate(s.item(i).symbols[:40].tolist(), False)
               for i in range(5))
    with pytest.raises(ConfigError):
        GENERATORS.build("queue", {"answer_order": "top_first"})
    q.check(q.item(0))


@pytest.mark.parametrize("params, field", [
    ({"n_ops": 64, "length": 100}, "length"), ({"n_symbols": 999}, "n_symbols"), ({"n_symbols": 2}, "n_symbols")])
def test_bad_parameters(params, field):
    with pytest.raises(ConfigError) as e:
        GENERATORS.build("stack", params)
    assert e.value.field == field
