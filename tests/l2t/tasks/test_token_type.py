from preschool.l2t.tasks.token_type import KINDS, count_kind
from preschool.l2t.text import STOPWORDS
from preschool.l2t.format import count_instructions


def test_exact(run_task):
    p = run_task("token_type")
    assert p.prompt.endswith("\n\nReturn the number of punctuation marks in the text below.")
    assert p.completion == "5"


def test_counts_by_hand():
    t = "The cat, the dog and 2 birds sat on 10 mats! Don't"
    assert count_kind(t, "digits", STOPWORDS) == 3
    assert count_kind(t, "punctuation", STOPWORDS) == 3  # , ! '
    # stopwords: The the and on  ("cat," is not; "Don't" lowercases to "don't", a stopword)
    assert count_kind(t, "stopwords", STOPWORDS) == 5
    # content: alnum and not stopword: cat? no ("cat," has a comma) -> dog 2 birds sat 10 = 5 ("mats!" has "!")
    assert count_kind(t, "content_words", STOPWORDS) == 5
    # the paper's reading strips punctuation first
    assert count_kind(t, "content_words", STOPWORDS, strip=True) == 7


def test_every_kind_drawn_and_counted(run_task, sents):
    text = " ".join(sents)
    seen = set()
    for seed in range(60):
        p = run_task("token_type", seed=seed)
        kind = p.meta["kind"]
        seen.add(kind)
        assert p.completion == str(count_kind(text, kind, STOPWORDS))
        assert any(i in p.prompt for i in count_instructions(kind))
    assert seen == set(KINDS)
