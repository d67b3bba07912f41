def test_exact(run_task):
    p = run_task("deletion")
    assert p.prompt == ("The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! "
                        "The boats stayed in the harbour all day. Nobody saw her go.")
    assert p.completion == "The boats stayed in the harbour all day."


PREV = ["A storm came in from the west.", "The boats stayed in the harbour all day."]


def test_one_intruder_from_previous_document(run_task, sents):
    answers = set()
    for seed in range(40):
        p = run_task("deletion", seed=seed, prev=PREV)
        at = p.meta["position"]
        intruder = [s for s in PREV if s in p.prompt]
        assert len(intruder) == 1
        assert p.prompt == " ".join(sents[:at] + intruder + sents[at:])
        assert p.completion in (" ".join(sents), intruder[0])
        answers.add(p.meta["answer"])
    assert answers == {"clean", "intruder"}
