"""The ``generator`` dataset builder: items of a registered generator (``generator:``, ``preset:``, ``params:``).

It lives here, not in ``data/builders/``, because synthetic builds on ``data`` (shards, packing,
tokenizer) and never the reverse; ``DATASET_BUILDERS`` finds it all the same (data/builder.py).

Text render: the items' symbols are written as text and tokenized by the run's
tokenizer; reserved render: each symbol gets its own id after the tokenizer's
vocabulary. Held-out items come from a disjoint seed stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..config import check
from ..data.builder import DATASET_BUILDERS, BuildContext, TokenizedBuilder, TokenizedSpec
from ..data.flat_spec import FlatRecord
from ..data.tokenizer import backend, special_ids, tokenizer_hash, tokenizer_size
from ..seeds import VAL_SEED_OFFSET
from .base import GENERATOR_PRESETS, GENERATORS
from .write import SymbolEncoder, fit_generator, write_generator_shards


@dataclass(kw_only=True)
class GeneratorSpec(FlatRecord, TokenizedSpec):
    """``data.<name>: {generator: <name>, preset: ..., params: {...}, tokens: ...}``: synthetic items.

    ``params`` are the generator's config (its registered dataclass; ``preschool generate --list``), over
    the named ``preset``'s when one is given. Held-out items (``val_tokens``) come from a disjoint seed
    stream, so there is no ``val_fraction``."""

    named_by = "generator"
    generator: str  # registered generator name (see ``preschool generate --list``)
    preset: str | None = None  # named generator parameter set
    params: dict[str, Any] = field(default_factory=dict)  # the generator's config, over the preset's
    render: Literal["text", "reserved"] = "text"  # symbols as text for the tokenizer, or ids after its vocabulary
    pack: Literal["concat", "pad"] = "concat"
    exact_fill: bool = False  # fit its length so one document + EOS is exactly one row (verified)

    def validate(self) -> None:
        super().validate()
        GENERATORS.get(self.generator, "generator")
        if self.preset is not None:
            preset = GENERATOR_PRESETS.get(self.preset, "preset").cls  # unknown: the closest names
            check(preset.generator == self.generator, "preset",
                  f"preset {self.preset!r} is for generator {preset.generator!r}")
        GENERATORS.build_config(self.generator, generator_params(self), "params")


@DATASET_BUILDERS.register("generator", config=GeneratorSpec)
class GeneratorBuilder(TokenizedBuilder):
    """Items of a registered generator (see ``preschool generate --list``)."""

    def build(self, name: str, spec, key: dict, h: str, ctx: BuildContext, tmp: Path, final: Path) -> dict:
        m = write_generator(spec, ctx.tok, ctx.row_len, ctx.seed, tmp, ctx.workers, ctx.progress, final)
        return self.entry(spec, key, h, m)


def generator_params(spec: GeneratorSpec) -> dict:
    """The generator's params of ``spec``: its preset's (when named), updated by its own ``params``."""
    base = dict(GENERATOR_PRESETS[spec.preset].params) if spec.preset is not None else {}
    return {**base, **spec.params}


def write_generator(spec: GeneratorSpec, tok, row_len: int, seed: int, out: Path, workers: int,
                     progress: bool, final: Path) -> dict:
    base_vocab = tokenizer_size(tok)  # reserved symbols start after every id of the tokenizer (len(tokenizer))
    special = special_ids(tok)
    eos = special.eos
    if spec.render == "text":
        enc = SymbolEncoder("text", tokenizer_json=backend(tok).to_str())
    else:
        enc = SymbolEncoder("reserved", reserved_offset=base_vocab)
    params = generator_params(spec)
    params.setdefault("seed", seed)
    # Held-out items come from a disjoint seed stream (seed + a large odd offset).
    splits = {"train": (params, spec.tokens), "val": ({**params, "seed": params["seed"] + VAL_SEED_OFFSET}, spec.val_tokens)}
    manifests = {}
    for split, (p, tokens) in splits.items():
        if tokens // row_len == 0:
            continue
        if spec.exact_fill:  # one document (+ EOS) is exactly one row: the generator's length is fitted
            gen = fit_generator(spec.generator, p, enc, row_len, eos)
        else:
            gen = GENERATORS.build(spec.generator, p, "params")
        vocab = base_vocab if spec.render == "text" else base_vocab + gen.vocab_size
        extra = {"tokenizer_sha256": tokenizer_hash(tok), "split": split,
                 "reserved_ids": [base_vocab, vocab] if spec.render == "reserved" else None}
        manifests[split] = write_generator_shards(
            gen, enc, out / split, tokens // row_len, row_len, vocab, eos, workers=workers, pack_mode=spec.pack,
            pad_id=special.pad, progress=progress, manifest_extra=extra, exact_fill=spec.exact_fill,
            unit_tokens=spec.unit_tokens, resume_as=final.parent / f"{final.name}-{split}",
        )
    return manifests
