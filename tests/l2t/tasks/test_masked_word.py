from preschool.l2t.base import MASKS


def test_exact(run_task):
    p = run_task("masked_word")
    assert p.prompt == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, (()) Mary ___ the house! (()) saw her go."
    assert p.completion == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! Nobody saw her go."


def test_mask_count_and_rest_unchanged(run_task, sents):
    words = " ".join(sents).split()
    for seed in range(20):
        p = run_task("masked_word", seed=seed)
        got = p.prompt.split(" ")
        assert len(got) == len(words)
        changed = [i for i, (a, b) in enumerate(zip(got, words)) if a != b]
        assert all(got[i] in MASKS for i in changed)
        assert p.meta["n_masked"] == round(0.15 * len(words))
        assert len(changed) <= p.meta["n_masked"]


def test_completion_verbatim_not_normalised(run_task):
    p = run_task("masked_word", ["Two  spaces   here and more words to mask."])
    assert p.completion == "Two  spaces   here and more words to mask."
