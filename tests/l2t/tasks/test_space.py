import pytest
from hypothesis import given, settings, strategies as st

from preschool.l2t.base import Skip


def test_exact(run_task):
    p = run_task("space")
    assert p.prompt == "Thequickbrownfoxjumpsoverthelazydog.Itwas3o'clock,andMaryleftthehouse!Nobodysawhergo."
    assert p.completion == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! Nobody saw her go."


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=5))
def test_output_without_spaces_is_input(run_task, sentences):
    p = run_task("space", sentences)
    assert p.completion.replace(" ", "") == p.prompt
    assert " " not in p.prompt


def test_short_chunk_skipped(run_task):
    with pytest.raises(Skip) as e:
        run_task("space", ["Too short."], min_num_words=20)
    assert e.value.reason == "short_chunk"
