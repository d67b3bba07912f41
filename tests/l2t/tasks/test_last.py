import pytest

from preschool.l2t.base import Skip
from preschool.l2t.tasks.last import LABEL_PAIRS, split_last_phrase
from preschool.l2t.text import STOPWORDS


def test_exact(run_task):
    p = run_task("last")
    assert p.prompt == ("The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house!"
                        "\n\nQuestion: Nobody saw <<>>\n\nOptions:\na. all day.\nb. her go.")
    assert p.completion == "b. her go."


def test_split_last_phrase():
    assert split_last_phrase("Nobody saw her go.", STOPWORDS) == (["Nobody", "saw"], "her go.")
    # attached punctuation blocks the match: "the," is not a stopword token
    assert split_last_phrase("Cats saw the, cat", STOPWORDS) == (["Cats", "saw", "the,"], "cat")
    assert split_last_phrase("Hello world", STOPWORDS) == (["Hello"], "world")


def test_options_and_answer(run_task, sents):
    for seed in range(40):
        p = run_task("last", seed=seed)
        assert p.completion.endswith("her go.")
        label = p.completion[: -len("her go.")]
        assert label == "" or any(label in pair for pair in LABEL_PAIRS)
        assert "her go." in p.prompt and ("all day." in p.prompt or "harbour all day." not in p.prompt)


def test_no_previous_document_skips(run_task):
    with pytest.raises(Skip):
        run_task("last", prev=[])


def test_the_references_18_label_pairs():
    # gucci-j/l2t last_phrase_prediction.py: brackets only around a/b and A/B
    reference = ["[a] /[b] ", "[A] /[B] "] + [f"{s.format(x)}/{s.format(y)}" for s in ("{}. ", "{}: ", "({}) ", "{}) ")
                                              for x, y in (("1", "2"), ("A", "B"), ("a", "b"), ("i", "ii"))]
    assert ["/".join(p) for p in LABEL_PAIRS] == reference
    assert len(set(LABEL_PAIRS)) == 18 and ("[1] ", "[2] ") not in LABEL_PAIRS and ("[i] ", "[ii] ") not in LABEL_PAIRS
