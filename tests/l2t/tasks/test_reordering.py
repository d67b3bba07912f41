from collections import Counter


def test_exact(run_task):
    p = run_task("reordering")
    assert p.prompt == "The quick brown fox jumps over the lazy dog. Nobody saw her go. It was 3 o'clock, and Mary left the house!"
    assert p.completion == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! Nobody saw her go."


def test_same_multiset_of_sentences(run_task):
    sents = [f"Sentence number {i} is here." for i in range(7)]
    for seed in range(20):
        p = run_task("reordering", sents, seed=seed)
        perm = p.meta["perm"]
        assert sorted(perm) == list(range(7))
        assert p.prompt == " ".join(sents[i] for i in perm)
        assert Counter(s.rstrip(".") for s in p.prompt.split(". ")) == Counter(s.rstrip(".") for s in p.completion.split(". "))
        assert p.completion == " ".join(sents)
