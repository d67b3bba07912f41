from collections import Counter


def test_exact(run_task):
    p = run_task("shuffle")
    assert p.prompt == "The quick brown fox jumps over the lazy dog. It was 3 go. and Mary left the her Nobody saw house! o'clock,"
    assert p.completion == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! Nobody saw her go."


def test_same_words_pairs_swapped(run_task, sents):
    words = " ".join(sents).split()
    for seed in range(30):
        p = run_task("shuffle", seed=seed)
        got = p.prompt.split(" ")
        assert Counter(got) == Counter(words)
        k = p.meta["n_pairs"]
        assert 1 <= k <= len(words) // 2
        assert sum(a != b for a, b in zip(got, words)) <= 2 * k


def test_words_mode_swaps_fewer(run_task, sents):
    pairs = [run_task("shuffle", sents * 10, seed=s).meta["n_pairs"] for s in range(20)]
    half = [run_task("shuffle", sents * 10, seed=s, count="words").meta["n_pairs"] for s in range(20)]
    assert sum(half) < sum(pairs)
