import pytest

from preschool.data.shards import ShardSet
from preschool.data.tokenizer import eos_id
from preschool.errors import ConfigError, DataError
from preschool.synthetic.control import select_control, write_control_shards

DOCS = [(f"d{i}", " ".join(["the cat sat"] * (i % 5 + 1))) for i in range(100)]


def test_selection_is_disjoint_from_pt_and_meets_the_budget():
    pt = {f"d{i}" for i in range(0, 100, 2)}
    st = {}
    out = list(select_control(DOCS, pt, token_budget=60, count_tokens=lambda t: len(t.split()), stats=st))
    ids = [d[0] for d in out]
    assert not set(ids) & pt
    assert st["tokens"] >= 60 and st["tokens"] - len(out[-1][1].split()) < 60  # stops as soon as it is met
    assert ids == sorted(ids, key=lambda x: int(x[1:]))  # source order kept


def test_predicate_and_corpus_documents():
    from preschool.corpora import Document, is_validation

    docs = [Document(i, t) for i, t in DOCS]
    out = list(select_control(docs, lambda i: not is_validation(i, 0.3), 20, lambda t: len(t.split())))
    assert out and all(is_validation(d.id, 0.3) for d in out)


def test_errors():
    with pytest.raises(DataError, match="ran out"):
        list(select_control(DOCS, set(), 10**6, lambda t: 1))
    with pytest.raises(DataError, match="twice"):
        list(select_control(DOCS + DOCS[:1], set(), 10**6, lambda t: 1))
    with pytest.raises(ConfigError):
        list(select_control(DOCS, set(), 0, lambda t: 1))


def test_write_control_shards(tmp_path, number_tokenizer):
    pt = {f"d{i}" for i in range(50)}
    m = write_control_shards(DOCS, pt, tmp_path / "ctl", number_tokenizer, n_rows=6, row_len=33,
                             eos_id=eos_id(number_tokenizer))
    s = ShardSet(tmp_path / "ctl")
    assert len(s) == 6 and m["source"]["kind"] == "control" and m["source"]["skipped_pt"] == 50
    text = number_tokenizer.decode(s.row(0).tolist())
    assert "the cat sat" in text
