"""Tokenizers: train a byte-level BPE, load a ``tokenizer.json``, or use any Hugging Face tokenizer.

A run's tokenizer is one of two kinds of object, and every helper here takes either:

- a ``tokenizers.Tokenizer`` (``kind: train``, our byte-level BPE, or ``kind: load``, a
  ``tokenizer.json``): ``<|endoftext|>`` (id 0 in our BPE) is EOS, BOS and padding, as in
  GPT-2 style models;
- a ``transformers`` fast tokenizer (``kind: hf``, a hub name such as
  ``HuggingFaceTB/SmolLM3-3B`` or a local ``save_pretrained`` folder): its own BOS, EOS and
  PAD ids (PAD = EOS when it has none), optionally renamed by ``eos_token`` /
  ``bos_token`` / ``pad_token`` (verify-ppt ends documents with SmolLM3's
  ``<|end_of_text|>``, not its chat ``eos_token``).

:func:`special_ids` gives those ids, :func:`backend` the ``tokenizers.Tokenizer`` that
encodes (workers receive it as JSON) and :func:`tokenizer_size` the size of its id space
(``len(tokenizer)``), after which synthetic symbols get their reserved ids.
Every run saves its tokenizer (``tokenizer.json`` + HF files) so checkpoints are
self-contained, and identifies it by :func:`tokenizer_hash`: the sha256 of its canonical
JSON, plus the special ids for an HF tokenizer.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..config import check
from ..errors import ConfigError, DataError
from ..io import atomic_path

EOS = "<|endoftext|>"


DEFAULT_BPE_VOCAB = 2048
SPECIAL_FIELDS = ("eos_token", "bos_token", "pad_token")


@dataclass
class TokenizerConfig:
    """How a run gets its tokenizer: ``train`` a byte-level BPE, ``load`` one from ``path``, or
    ``hf``: any Hugging Face fast tokenizer by hub ``name`` or local folder."""

    kind: str = "train"  # "train" | "load" | "hf"
    # train: the BPE's size (default 2048). hf: the tokenizer's len(), checked when it is loaded; lets
    # `preschool plan` size the model before the tokenizer is fetched
    vocab_size: int | None = None
    path: str | None = None  # tokenizer.json or folder holding one (kind=load)
    name: str | None = None  # kind=hf: hub name (HuggingFaceTB/SmolLM3-3B) or a save_pretrained folder
    eos_token: str | None = None  # kind=hf: the token that ends documents, when not the tokenizer's eos_token
    bos_token: str | None = None  # kind=hf: the start token (L2T samples, minimal pairs), when not its bos_token
    pad_token: str | None = None  # kind=hf: padding, when not its pad_token (default: its pad_token, else EOS)
    sample_documents: int = 20000  # documents read to train the BPE
    min_frequency: int = 2
    split_digits: bool = True  # digits as their own pre-tokens (Llama-style), so integer symbols tokenize predictably

    def validate(self) -> None:
        check(self.kind in ("train", "load", "hf"), "kind", f"must be 'train', 'load' or 'hf', got {self.kind!r}")
        if self.kind == "train":
            check(256 + 1 <= self.bpe_vocab_size <= 1 << 20, "vocab_size",
                  f"must be in [257, 2^20], got {self.vocab_size}")
            check(self.sample_documents > 0, "sample_documents", "must be > 0")
        elif self.kind == "load":
            check(bool(self.path), "path", "required when kind is 'load'")
        else:
            check(bool(self.name), "name", "required when kind is 'hf' (a hub name or a local tokenizer folder)")
            check(self.path is None, "path", "kind 'hf' reads 'name' (a hub name or a local folder), not 'path'")
            check(self.vocab_size is None or self.vocab_size >= 2, "vocab_size", f"must be >= 2, got {self.vocab_size}")
        if self.kind != "hf":
            for f in SPECIAL_FIELDS:
                check(getattr(self, f) is None, f, "only kind 'hf' renames special tokens "
                      "(our BPE and tokenizer.json files use <|endoftext|>)")

    @property
    def bpe_vocab_size(self) -> int:
        return DEFAULT_BPE_VOCAB if self.vocab_size is None else self.vocab_size


@dataclass(frozen=True)
class SpecialIds:
    """The ids a run treats as special: ``eos`` ends every document, ``pad`` fills padded rows,
    ``bos`` (None when the tokenizer has none) starts L2T samples and conditions minimal pairs."""

    eos: int
    bos: int | None
    pad: int

    @property
    def prefix(self) -> int:
        """The token a sequence is conditioned on when it needs a start: BOS, else EOS (lm-eval's rule)."""
        return self.eos if self.bos is None else self.bos

    def as_dict(self) -> dict:
        return {"bos": self.bos, "eos": self.eos, "pad": self.pad}


def is_hf(tok) -> bool:
    """Whether ``tok`` is a ``transformers`` tokenizer (else a ``tokenizers.Tokenizer``)."""
    return hasattr(tok, "backend_tokenizer")


def backend(tok):
    """The ``tokenizers.Tokenizer`` that encodes for ``tok`` (``tok`` itself when it is one)."""
    return tok.backend_tokenizer if is_hf(tok) else tok


def tokenizer_size(tok) -> int:
    """The size of ``tok``'s id space, added tokens included (``len(tokenizer)``): reserved ids start here."""
    return int(backend(tok).get_vocab_size(with_added_tokens=True))


def special_ids(tok) -> SpecialIds:
    """BOS/EOS/PAD of ``tok``: an HF tokenizer's own (PAD = EOS when it has none); ``<|endoftext|>`` for
    all three in a ``tokenizers.Tokenizer`` (our BPE)."""
    if not is_hf(tok):
        i = eos_id(tok)
        return SpecialIds(eos=i, bos=i, pad=i)
    eos = tok.eos_token_id
    if eos is None:
        raise ConfigError("tokenizer.eos_token", f"tokenizer {tok.name_or_path!r} has no EOS token; "
                          "name the token that ends documents with tokenizer.eos_token")
    pad = tok.pad_token_id
    return SpecialIds(eos=int(eos), bos=None if tok.bos_token_id is None else int(tok.bos_token_id),
                      pad=int(eos) if pad is None else int(pad))


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
    """sha256 identifying the tokenizer in manifests: its canonical JSON, plus the special ids of an
    HF tokenizer (the same encoder with another EOS writes other data)."""
    canon = json.dumps(json.loads(backend(tok).to_str()), sort_keys=True, separators=(",", ":"))
    if is_hf(tok):
        canon += "\0" + json.dumps(special_ids(tok).as_dict(), sort_keys=True)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def files_hash(folder: str | Path) -> str:
    """sha256 over the names and contents of the files of a saved tokenizer folder."""
    from ..io import sha256_file

    h = hashlib.sha256()
    for f in sorted(p for p in Path(folder).iterdir() if p.is_file()):
        h.update(f"{f.name}\0{sha256_file(f)}\0".encode())
    return h.hexdigest()


#: the files of a model or tokenizer folder whose ``auto_map`` names Python classes in the folder itself
CODE_NAMING_FILES = ("config.json", "tokenizer_config.json")


def refuse_custom_code(folder: str | Path) -> None:
    """DataError naming the file when the local folder ``folder`` (a checkpoint, a saved tokenizer)
    names code of its own for transformers to import (``auto_map`` in :data:`CODE_NAMING_FILES`).

    transformers asks on stdin whether to run such code, and one "y" imports the folder's module:
    a downloaded checkpoint would run anything. Every load also passes ``trust_remote_code=False``
    (which makes transformers refuse such a folder too, in a longer error, and a hub name's code);
    this check names the file first. A file nested too deeply to read is refused here too (whether it
    names code cannot be told, and every reader after this one would stop in a RecursionError); any other
    file that is not a JSON object is left to the loader's error.
    """
    for name in CODE_NAMING_FILES:
        path = Path(folder) / name
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except RecursionError:
            raise DataError(f"{path}: JSON nested too deeply to read (deeper than Python's recursion "
                            "limit); refused, since whether it names code of its own cannot be checked") from None
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict) and obj.get("auto_map"):
            raise DataError(f"{path}: names its own Python code (auto_map: {sorted(obj['auto_map'])}); preschool "
                            "never runs code from a checkpoint or tokenizer folder: use a folder without auto_map")


def load_hf_tokenizer(name: str | Path, eos_token: str | None = None, bos_token: str | None = None,
                      pad_token: str | None = None, vocab: int | None = None, field: str = "tokenizer.name"):
    """A ``transformers`` fast tokenizer by hub name or local folder (``AutoTokenizer.from_pretrained``;
    offline it reads the local cache), with special tokens renamed as given; ``vocab``: its expected size."""
    from transformers import AutoTokenizer

    renames = {k: v for k, v in zip(SPECIAL_FIELDS, (eos_token, bos_token, pad_token)) if v is not None}
    if Path(str(name)).is_dir():
        refuse_custom_code(name)
    try:
        tok = (from_saved_files(name) if _holds_model(name)
               else AutoTokenizer.from_pretrained(str(name), trust_remote_code=False))
    except Exception as e:  # OSError (not found / offline), ValueError, or a parse error of a damaged file
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        hint = (" (HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache: load it once with network, "
                "or give a local folder)" if offline and not Path(str(name)).exists() else "")
        raise ConfigError(field, f"cannot load tokenizer {str(name)!r}: {first}{hint}") from None
    if not is_hf(tok):
        raise ConfigError(field, f"tokenizer {str(name)!r} has no fast (tokenizers) backend; "
                          "preschool encodes with the Rust tokenizer")
    for k, v in renames.items():
        # checked before renaming: transformers would add an unknown name to the vocabulary as a new token
        if backend(tok).token_to_id(v) is None:
            raise ConfigError(field.rsplit(".", 1)[0] + f".{k}", f"{v!r} is not a token of {str(name)!r}")
        setattr(tok, k, v)
    if vocab is not None and tokenizer_size(tok) != vocab:
        raise ConfigError(field.rsplit(".", 1)[0] + ".vocab_size",
                          f"{vocab} given, but tokenizer {str(name)!r} has {tokenizer_size(tok)} tokens")
    return tok


def _holds_model(folder) -> bool:
    p = Path(str(folder))
    return all((p / f).is_file() for f in ("config.json", "tokenizer.json", "tokenizer_config.json"))


def from_saved_files(folder: str | Path):
    """The HF tokenizer of a folder exactly as its ``tokenizer.json`` + ``tokenizer_config.json`` say. In a
    checkpoint (a ``config.json`` beside them) ``AutoTokenizer`` picks the model type's class instead, whose
    defaults can add tokens (Qwen2Tokenizer: a PAD ``<|endoftext|>`` after the vocabulary when there is none)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder), trust_remote_code=False)


def open_tokenizer(cfg: TokenizerConfig, folder: str | Path):
    """The tokenizer a run saved in ``folder``, as the kind ``cfg`` asks for (HF object for ``hf``)."""
    if cfg.kind == "hf":
        return load_hf_tokenizer(folder, field="tokenizer")
    return load_tokenizer(folder)


def load_saved(path: str | Path):
    """A saved tokenizer given by path (a command's ``--tokenizer``): a folder with HF files as its HF
    tokenizer (its own special ids; a run's ``data/tokenizer`` of any kind), else the ``tokenizer.json``."""
    p = Path(path)
    if p.is_dir() and (p / "tokenizer_config.json").is_file() and (p / "tokenizer.json").is_file():
        return load_hf_tokenizer(p, field="tokenizer")
    return load_tokenizer(p)


def load_special_ids(folder: str | Path) -> SpecialIds:
    """The special ids of a saved tokenizer folder: its HF files' (``tokenizer_config.json``), else
    ``<|endoftext|>`` of its ``tokenizer.json`` (a bare file of our BPE)."""
    folder = Path(folder)
    if (folder / "tokenizer_config.json").is_file():
        return special_ids(load_hf_tokenizer(folder, field="tokenizer"))
    return special_ids(load_tokenizer(folder))


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
    """The id that ends documents: :func:`special_ids` ``.eos``."""
    if is_hf(tok):
        return special_ids(tok).eos
    i = tok.token_to_id(EOS)
    if i is None:
        raise DataError(f"tokenizer has no {EOS} token")
    return i


def save_tokenizer(tok, folder: str | Path) -> Path:
    """Write ``tokenizer.json`` plus HF ``PreTrainedTokenizerFast`` files into ``folder`` (atomically for our
    BPE; an HF tokenizer writes its own files with ``save_pretrained``: the caller's ``atomic_dir``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if is_hf(tok):
        tok.save_pretrained(str(folder))
        return folder / "tokenizer.json"
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
    return [e.ids for e in backend(tok).encode_batch(texts, add_special_tokens=False)]


def iter_sample(texts: Iterable[str], n: int) -> Iterator[str]:
    for i, t in enumerate(texts):
        if i >= n:
            break
        yield t
