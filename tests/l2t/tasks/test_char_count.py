from preschool.l2t.format import count_instructions


def test_exact(run_task, sents):
    p = run_task("char_count")
    text = " ".join(sents)
    assert p.completion == "106" == str(len(text))
    assert p.prompt == text + "\n\nCompute how many characters (letters, digits, spaces and punctuation) occur in the passage."


def test_instruction_placed_before_or_after(run_task, sents):
    text = " ".join(sents)
    places = set()
    for seed in range(40):
        p = run_task("char_count", seed=seed)
        head, _, tail = p.prompt.partition("\n\n")
        assert text in (head, tail)
        instr = tail if head == text else head
        assert instr in count_instructions("characters")
        places.add(head == text)
        assert p.completion == str(len(text))
    assert places == {True, False}


def test_unicode_counts_code_points(run_task):
    p = run_task("char_count", ["Café naïve 😀."])
    assert p.completion == str(len("Café naïve 😀."))


def test_twenty_paraphrases():
    assert len(set(count_instructions("characters"))) == 20
