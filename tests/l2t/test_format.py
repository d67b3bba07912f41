import numpy as np

from preschool.l2t.format import ANSWER_PREFIXES, join, with_instruction


def test_join_rules():
    assert join("P", "C", None).text == "P\n\nC"
    f = join("P", "C", None)
    assert f.text[f.answer_start:] == "C"


def test_prefix_spacing():
    seen = set()
    for seed in range(100):
        f = join("Q", "ans", np.random.default_rng(seed))
        head, ans = f.text[:f.answer_start], f.text[f.answer_start:]
        assert ans == "ans" and head.startswith("Q\n\n")
        prefix = head[3:]
        seen.add(prefix.rstrip(" "))
        assert prefix == "" or prefix.endswith(" ")
        g = join("Q", " lead", np.random.default_rng(seed))  # completion starting with a space: no extra space
        assert not g.text[: g.answer_start].endswith(" ")
    assert seen == set(ANSWER_PREFIXES)


def test_instruction_both_sides():
    sides = {with_instruction("T", "I", np.random.default_rng(s)) for s in range(20)}
    assert sides == {"I\n\nT", "T\n\nI"}
