from preschool.l2t.text import word_pool


def test_exact(run_task):
    p = run_task("random")
    assert p.prompt == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Cloud left the house! Nobody cloud her go."
    assert p.completion == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! Nobody saw her go."


def test_replacements_from_pool_with_case(run_task, sents):
    words = " ".join(sents).split()
    pool = {"apple", "river", "stone", "cloud"}
    for seed in range(20):
        p = run_task("random", seed=seed)
        got = p.prompt.split(" ")
        assert len(got) == len(words)
        for a, b in zip(got, words):
            if a != b:
                assert a.lower() in pool
                assert a[0].isupper() == b[0].isupper()
        assert 1 <= p.meta["n_replaced"] <= max(1, round(0.10 * len(words)))


def test_packaged_pool_is_offline_and_sorted():
    pool = word_pool("gcide")
    assert len(pool) > 50_000 and list(pool) == sorted(pool)
    assert all(w.isalpha() and w.islower() for w in pool[:1000])
