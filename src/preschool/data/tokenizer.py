"""Tokenizers: train a byte-level BPE on a corpus sample, or load a ``tokenizer.json``.

Every run saves its tokenizer (``tokenizer.json`` + HF files) so checkpoints
are self-contained, and identifies it by the sha256 of its canonical JSON.
Special tokens: ``<|endoftext|>`` (id 0) is EOS, BOS and padding, as in GPT-2
style models; extra reserved tokens can be appended (synthetic symbols).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..config import check
from ..errors import ConfigError, DataError
from ..io import atomic_path

EOS = "<|endoftext|>"


@dataclass
class TokenizerConfig:
    """How a run gets its tokenizer: ``train`` a byte-level BPE or ``load`` one from ``path``."""

    kind: str = "train"  # "train" | "load"
    vocab_size: int = 2048
    path: str | None = None  # tokenizer.json or folder holding one (kind=load)
    sample_documents: int = 20000  # documents read to train the BPE
    min_frequency: int = 2
    split_digits: bool = True  # digits as their own pre-tokens (Llama-style), so integer symbols tokenize predictably

    def validate(self) -> None:
        check(self.kind in ("train", "load"), "kind", f"must be 'train' or 'load', got {self.kind!r}")
        if self.kind == "train":
            check(256 + 1 <= self.vocab_size <= 1 << 20, "vocab_size", f"must be in [257, 2^20], got {self.vocab_size}")
            check(self.sample_documents > 0, "sample_documents", "must be > 0")
        else:
            check(bool(self.path), "path", "required when kind is 'load'")


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2, split_digits: bool = True):
    """Train a byte-level BPE; returns a ``tokenizers.Tokenizer`` with EOS at id 0."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    pres = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if split_digits:
        pres.insert(0, pre_tokenizers.Digits(individual_digits=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(pres)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def tokenizer_hash(tok) -> str:
    """sha256 of the tokenizer's canonical JSON (identifies it in manifests)."""
    canon = json.dumps(json.loads(tok.to_str()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def load_tokenizer(path: str | Path):
    """Load a ``tokenizers.Tokenizer`` from ``tokenizer.json`` or a folder containing it."""
    from tokenizers import Tokenizer

    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise ConfigError("tokenizer.path", f"no tokenizer.json at {path}")
    try:
        return Tokenizer.from_file(str(p))
    except Exception as e:  # tokenizers raises a bare Exception on malformed files
        raise DataError(f"{p}: cannot load tokenizer ({e})") from None


def eos_id(tok) -> int:
    i = tok.token_to_id(EOS)
    if i is None:
        raise DataError(f"tokenizer has no {EOS} token")
    return i


def save_tokenizer(tok, folder: str | Path) -> Path:
    """Write ``tokenizer.json`` plus HF ``PreTrainedTokenizerFast`` files into ``folder`` (atomically)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "tokenizer.json") as tmp:
        tok.save(str(tmp))
    hf = as_hf(tok)
    hf.save_pretrained(str(folder))
    return folder / "tokenizer.json"


def as_hf(tok):
    """Wrap as ``transformers.PreTrainedTokenizerFast`` with EOS = BOS = PAD = ``<|endoftext|>``."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=EOS)


def encode_batch(tok, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def iter_sample(texts: Iterable[str], n: int) -> Iterator[str]:
    for i, t in enumerate(texts):
        if i >= n:
            break
        yield t
