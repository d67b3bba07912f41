from hypothesis import given, settings, strategies as st


def test_exact(run_task):
    p = run_task("half")
    assert p.prompt == "The quick brown fox jumps over the lazy dog. It was"
    assert p.completion == " 3 o'clock, and Mary left the house! Nobody saw her go."


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30).filter(lambda s: s.split()), min_size=2, max_size=5))
def test_input_plus_output_reconstructs(run_task, sentences):
    words = " ".join(sentences).split()
    if len(words) < 2:
        return
    p = run_task("half", sentences)
    assert p.completion.startswith(" ")
    assert (p.prompt + p.completion).split() == words
    assert (p.prompt + p.completion) == " ".join(words)
