import pytest

from preschool.l2t.base import Skip
from preschool.l2t.tasks.fill_middle import MARKERS


def test_exact(run_task):
    p = run_task("fill_middle")
    assert p.prompt == "(1) The quick brown fox jumps over the\n(3) Mary left the house! Nobody saw her go."
    assert p.completion == "lazy dog. It was 3 o'clock, and"


def test_thirds_reconstruct_chunk(run_task):
    sents = [f"word{i} " * 9 + "end." for i in range(8)]
    text = " ".join(sents)
    for seed in range(20):
        p = run_task("fill_middle", sents, seed=seed, min_num_words=20)
        first, third = p.prompt.split("\n")
        if first.split(" ", 1)[0] in {m[0].split(" ")[0] for m in MARKERS} and not first.startswith("word"):
            marker = next(m for m in MARKERS if first.startswith(m[0] + " "))
            first, third = first[len(marker[0]) + 1:], third[len(marker[1]) + 1:]
        assert " ".join([first, p.completion, third]) == text
        assert len(first.split(" ")) == len(p.completion.split(" ")) == len(text.split(" ")) // 3


def test_each_third_needs_min_words(run_task):
    with pytest.raises(Skip):
        run_task("fill_middle", ["one two three four five six seven eight nine ten."] * 5, min_num_words=20)


def test_the_references_24_marker_pairs():
    # gucci-j/l2t passage_completion.py (none of our earlier invented ones: Part 1:, Top:, Head:, I., ...)
    assert set(MARKERS) == {
        ("[1]", "[3]"), ("[A]", "[C]"), ("[a]", "[c]"), ("[i]", "[iii]"), ("[First]", "[Third]"),
        ("[Opening]", "[Closing]"), ("1.", "3."), ("A.", "C."), ("a.", "c."), ("i.", "iii."), ("1:", "3:"),
        ("A:", "C:"), ("a:", "c:"), ("i:", "iii:"), ("First:", "Third:"), ("Opening:", "Closing:"),
        ("(1)", "(3)"), ("(A)", "(C)"), ("(a)", "(c)"), ("(i)", "(iii)"), ("1)", "3)"), ("A)", "C)"),
        ("a)", "c)"), ("i)", "iii)")}
    assert len(MARKERS) == 24
