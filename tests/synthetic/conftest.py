"""Tokenizers for the synthetic tests (trained in-process, no downloads)."""

import pytest

from preschool.data.tokenizer import train_bpe

WORDS = "the cat sat on a mat and then a dog ran to the red ball in the park while birds sang".split()


@pytest.fixture(scope="session")
def number_tokenizer():
    """Byte-level BPE (digits pre-split, as the project default) in which every integer 0..999 is one token,
    like the Llama-3 / SmolLM3 tokenizers verify-ppt relies on."""
    texts = [" ".join(str(i) for i in range(1000)) + " "] * 6 + [" ".join(WORDS)] * 20
    tok = train_bpe(texts, vocab_size=1500, min_frequency=2, split_digits=True)
    for i in range(1000):
        assert len(tok.encode(str(i), add_special_tokens=False).ids) == 1, i
    return tok


@pytest.fixture(scope="session")
def word_tokenizer():
    """A BPE trained on words only: multi-digit numbers split into several tokens."""
    return train_bpe([" ".join(WORDS)] * 50, vocab_size=300, min_frequency=2, split_digits=True)


@pytest.fixture(scope="session")
def gpt2_style_tokenizer():
    """Byte-level BPE without digit splitting: " 12" (space + digits) is one pre-token, as in GPT-2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([" ".join(str(i) for i in range(200)) + " "] * 6, trainer=trainer)
    return tok
