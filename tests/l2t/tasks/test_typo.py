import pytest

from preschool.l2t.base import Skip


def test_exact(run_task):
    p = run_task("typo")
    assert p.prompt == "The quick brown fox jumps over the lazy dog. It was 3 o'cloxk, and Mmry left the aouse! Wobvdy saw her go."
    assert p.completion == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! Nobody saw her go."


def test_only_alnum_changed_with_case_kept(run_task, sents):
    text = " ".join(sents)
    n_alnum = sum(c.isalnum() for c in text)
    for seed in range(30):
        p = run_task("typo", seed=seed)
        assert len(p.prompt) == len(text) and p.completion == text
        diff = [(a, b) for a, b in zip(p.prompt, text) if a != b]
        assert len(diff) <= p.meta["n_typos"]
        assert 1 <= p.meta["n_typos"] <= max(1, round(0.08 * n_alnum))
        for new, old in diff:
            assert old.isalnum() and new.isascii() and new.isalpha()
            assert new.isupper() == old.isupper()


def test_no_alnum_skipped(run_task):
    with pytest.raises(Skip):
        run_task("typo", ["... !!! ???"])
