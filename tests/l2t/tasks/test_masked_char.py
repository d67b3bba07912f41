from preschool.l2t.base import MASKS


def test_exact(run_task):
    p = run_task("masked_char")
    assert p.prompt == ("The q$$$ick brown fox $$$umps $$$$$$er the lazy dog. It was 3 o'$$$$$$ock, a$$$d Mary "
                        "le$$$t the $$$o$$$se! Nob$$$dy s$$$w her go.")
    assert p.completion == "The quick brown fox jumps over the lazy dog. It was 3 o'clock, and Mary left the house! Nobody saw her go."


def _unmask(prompt, completion, mask):
    """Walk both strings; return how many letters the mask replaced (and check the rest is unchanged)."""
    i = j = n = 0
    while j < len(completion):
        if prompt.startswith(mask, i) and (prompt[i] != completion[j] or len(mask) > 1):
            assert completion[j].isalpha() or (completion[j].isalnum() and not completion[j].isdigit())
            i += len(mask)
            n += 1
        else:
            assert prompt[i] == completion[j]
            i += 1
        j += 1
    assert i == len(prompt)
    return n


def test_mask_count_is_15_percent_of_letters(run_task):
    sents = ["Lorem ipsum dolor sit amet, consectetur adipiscing elit.", "Sed do eiusmod tempor 42 incididunt."]
    text = " ".join(sents)
    letters = sum(c.isalnum() and not c.isdigit() for c in text)
    for seed in range(10):
        p = run_task("masked_char", sents, seed=seed)
        assert p.meta["mask"] in MASKS
        assert p.meta["n_masked"] == round(0.15 * letters)
        assert _unmask(p.prompt, p.completion, p.meta["mask"]) == round(0.15 * letters)


def test_no_letters_prompt_equals_completion(run_task):
    p = run_task("masked_char", ["123 456 !!!"])
    assert p.prompt == p.completion == "123 456 !!!"
