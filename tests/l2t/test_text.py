from preschool.l2t.text import (STOPWORDS, chunk_sentences, corpus_pool, estimate_tokens, split_blingfire,
                                split_rules, split_sentences)


def test_stopwords_are_nltk_english():
    assert len(STOPWORDS) == 198
    assert {"the", "and", "don't", "she's", "ourselves"} <= STOPWORDS
    assert "cat" not in STOPWORDS


def test_blingfire_splits_and_drops_empty_lines():
    text = 'Mr. Smith went home. "Was it late?" she asked.\n\n\nThen it rained!'
    assert split_blingfire(text) == ['Mr. Smith went home.', '"Was it late?"', 'she asked.', 'Then it rained!']
    assert split_blingfire("") == [] and split_blingfire("   \n\n ") == []
    assert split_blingfire("a\x00b. C d.")  # NUL does not truncate the document


def test_rules_splitter():
    text = 'Mr. Smith met J. Jones at 5 p.m. today. "Hello!" said he. It was 3.5 km away.\n\nNew paragraph here'
    assert split_rules(text) == ['Mr. Smith met J. Jones at 5 p.m. today.', '"Hello!" said he.',
                                 'It was 3.5 km away.', 'New paragraph here']
    assert split_sentences("One. Two.", "rules") == ["One.", "Two."]


def test_loose_chunking_reference_rule():
    s = [f"s{i}" for i in range(10)]
    # count 1100 -> n = 1100 // 512 + 1 = 3 blocks of ceil(10/3) = 4 sentences
    assert chunk_sentences(s, 1100) == [s[0:4], s[4:8], s[8:10]]
    # fine (Fill Middle): n = 2 * 2 + 1 = 5 blocks of 2
    assert chunk_sentences(s, 1100, fine=True) == [s[i:i + 2] for i in range(0, 10, 2)]
    # fewer sentences than blocks: one sentence per block
    assert chunk_sentences(s[:2], 5000) == [["s0"], ["s1"]]
    assert chunk_sentences(s, 100) == [s]
    assert chunk_sentences([], 100) == []


def test_estimate_and_corpus_pool():
    assert estimate_tokens("one two three") == 4
    pool = corpus_pool(["the cat sat", "the cat ran", "The dog? the cat"], min_count=2)
    assert pool == ("cat", "the")
