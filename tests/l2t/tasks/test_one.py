def test_exact(run_task, sents):
    p = run_task("one")
    assert p.prompt == "The"
    assert p.completion == " ".join(sents)


def test_completion_starts_with_prompt(run_task):
    for sents in (["Alpha beta gamma."], ["  Lead spaces stay in the chunk."], ["Single"]):
        p = run_task("one", sents)
        text = " ".join(sents)
        assert p.completion == text
        assert p.prompt == text.split(" ", 1)[0]
        assert p.completion.startswith(p.prompt)
