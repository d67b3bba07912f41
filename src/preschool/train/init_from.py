"""Where a run's weights start: ``init_from`` (a run's start, or a stage's mid-run switch).

``init_from: {path: DIR}`` starts from a local Hugging Face ``save_pretrained`` folder: its
``config.json`` (a registered family, ``train/families/``; no ``auto_map`` code), its weights in
safetensors (``*.bin`` / ``*.pt`` pickles are refused: loading them could run code) and its
tokenizer, which must be the data's. A checkpoint of this toolkit is such a folder too
(``<run>/checkpoints/step-XXXXXXXX``), and then its files are checked against its ``checksums.json``.
Experiments also name an arm of their own (``{arm: NAME, step: N}``, ...); the experiment resolves that
to the arm's checkpoint folder (``path``), so the trainer sees folders only.

On the run (``train.init_from``) the model *is* the folder's: its family and shape (``model:`` is not
used), its embedding rows. On a stage (``stages[i].init_from``) the folder's weights replace the
run's at that stage's start (the same architecture and vocabulary; checked before any work).

``optimizer: reset`` (default): fresh AdamW moments, as any stage with ``reset_optimizer``.
``optimizer: keep``: the AdamW state saved with the source checkpoint continues (only a checkpoint of
this toolkit has one, in ``trainer_state.pt``; the newest ``keep_optimizer_state`` checkpoints of a run
keep it). The stage's schedule is its own either way (from its warm-up); the source's schedule position
(stage, step of the stage, learning rate) is printed and logged as an ``{"event": "init_from"}`` row,
so an anneal from a mid-run step says where the weights and moments came from.

Everything that can be checked is checked before any work (:func:`check_start`): a missing folder, no
``config.json``, code or pickles, a family the trainer cannot train, a tokenizer other than the data's
or fewer embedding rows than the data's ids (one line naming both), another architecture than the
run's (a stage's start), ``keep`` without a saved optimizer state of the same parameter groups.
The run folder records the weights' sha256 (``config.yaml``'s ``start_sha256``): a folder whose
weights changed under the same path is refused on resume, like a rebuilt dataset.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError
from ..layout import CKPT_CHECKSUMS, CKPT_META, CKPT_STATE
from .configs import InitFrom

PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.ckpt")


@dataclass
class Start:
    """A checked start (:func:`check_start`): the folder and what was read from it."""

    where: str  # the config field: "init_from" or "stages[i].init_from"
    init: InitFrom
    folder: Path
    config: dict[str, Any]  # config.json
    family: str
    vocab_rows: int
    weight_files: list[Path]
    sha256: str  # of the weights (weights_sha256)
    toolkit: bool  # a checkpoint of this toolkit (checksums.json)
    position: dict[str, Any] | None  # the source's meta.json (this toolkit's checkpoints)

    def describe_model(self, vocab_size: int) -> dict[str, Any]:
        """:func:`~preschool.train.model.describe` of the folder's model (arithmetic on its config.json)."""
        return describe_config(self.config, self.folder, vocab_size)


def describe_config(config: dict[str, Any], folder: Path | str, vocab_size: int | None = None) -> dict[str, Any]:
    """:func:`~preschool.train.model.describe` of the model a saved ``config.json`` (``config``) makes, at
    ``vocab_size`` embedding rows (default: its own ``vocab_size``); no torch, no transformers."""
    from .families import get_family
    from .model import describe_shape

    kind = config["model_type"]
    shape = get_family(kind).shape_from_hf(config)
    return describe_shape(kind, shape, vocab_size or int(config["vocab_size"]),
                          bool(config.get("tie_word_embeddings", True)), preset=f"(from {folder})")


def describe_folder(init: InitFrom | None) -> dict[str, Any] | None:
    """The run's model as ``preschool plan`` sees it when the run starts from a folder (its config.json,
    unchecked: the trainer checks it); None without one, or when the folder cannot be read yet."""
    if init is None or init.path is None:
        return None
    try:
        config = json.loads((Path(init.path) / "config.json").read_text())
        return describe_config(config, init.path)
    except (OSError, ValueError, KeyError, ConfigError):
        return None


def _fail(field: str, folder: Path | str, why: str) -> ConfigError:
    return ConfigError(f"{field}.path", f"{folder}: {why}")


def weights_sha256(folder: Path, files: list[Path]) -> str:
    """One sha256 for a folder's weights: over each ``*.safetensors`` file's name and sha256 (a checkpoint
    of this toolkit: the hashes its ``checksums.json`` recorded, checked when it is loaded)."""
    from ..io import sha256_file

    recorded = {}
    if (folder / CKPT_CHECKSUMS).is_file():
        recorded = {k: v["sha256"] for k, v in json.loads((folder / CKPT_CHECKSUMS).read_text())["files"].items()}
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}\0{recorded.get(f.name) or sha256_file(f)}\n".encode())
    return h.hexdigest()


def folder_vocab(folder: Path) -> dict[str, int] | None:
    """Token -> id of the tokenizer saved in ``folder`` (added tokens included); None when it holds none."""
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        try:
            return Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab(with_added_tokens=True)
        except Exception as e:  # tokenizers raises a bare Exception on a malformed file
            raise DataError(f"{folder / 'tokenizer.json'}: not a tokenizer this can read ({e})") from None
    if (folder / "tokenizer_config.json").is_file() or (folder / "vocab.json").is_file():
        from transformers import AutoTokenizer

        return dict(AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False).get_vocab())
    return None


def _vocab_difference(a: dict[str, int], b: dict[str, int]) -> str:
    """The first token (by id in ``a``) the two vocabularies disagree on, in words."""
    b_ids = {i: t for t, i in b.items()}
    for tok, i in sorted(a.items(), key=lambda kv: kv[1]):
        if b.get(tok) != i:
            return f"{tok!r} is id {i} there, " + (f"id {b[tok]} in the data's" if tok in b else
                                                   f"absent from the data's (whose id {i} is {b_ids.get(i)!r})")
    return "the data's has tokens it lacks"


def check_start(init: InitFrom, where: str, tokenizer_dir: Path | None, needed_vocab: int) -> Start:
    """Check a start before any work (module docstring: what is checked); ConfigError naming
    ``<where>.path`` and the folder in one line."""
    from ..data.tokenizer import refuse_custom_code
    from .families import FAMILIES

    if init.path is None:
        raise ConfigError(f"{where}.arm", f"names an arm ({init.arm}) of an experiment: `preschool run` resolves it "
                          "to that arm's checkpoint; a trainer run starts from a folder (path:)")
    folder = Path(init.path)
    if not folder.is_dir():
        raise _fail(where, folder, "no such folder")
    if not (folder / "config.json").is_file():
        raise _fail(where, folder, "no config.json: not a Hugging Face save_pretrained folder")
    try:
        refuse_custom_code(folder)
    except DataError as e:
        raise _fail(where, folder, f"refused: {e}") from None
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for pat in PICKLE_WEIGHTS for p in folder.glob(pat))
        why = (f"its weights are pickles ({', '.join(pickles)}), which could run code when loaded; save them as "
               "safetensors (model.save_pretrained(DIR, safe_serialization=True))" if pickles else
               "no *.safetensors weights")
        raise _fail(where, folder, why)
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise _fail(where, folder, f"config.json is not JSON ({e})") from None
    kind = config.get("model_type")
    if not isinstance(kind, str) or kind not in FAMILIES:
        raise _fail(where, folder, f"model_type {kind!r} is not a family the trainer can train "
                    f"(known: {', '.join(FAMILIES.names())})")
    rows = config.get("vocab_size")
    if not isinstance(rows, int) or rows < 1:
        raise _fail(where, folder, f"config.json's vocab_size is {rows!r}")
    if tokenizer_dir is not None:  # a run on shards without a tokenizer compares embedding rows only (below)
        vocab = folder_vocab(folder)
        if vocab is None:
            raise _fail(where, folder, "no tokenizer saved with it, so it cannot be checked against the data's "
                        "(tokenizer.save_pretrained(DIR))")
        data_vocab = folder_vocab(Path(tokenizer_dir))
        if data_vocab is not None and data_vocab != vocab:
            raise _fail(where, folder, f"its tokenizer ({len(vocab):,} tokens) differs from the data's "
                        f"({tokenizer_dir}, {len(data_vocab):,} tokens): {_vocab_difference(vocab, data_vocab)}; "
                        "prepare the data with its tokenizer (tokenizer: {kind: hf, name: DIR})")
    if rows < needed_vocab:
        raise _fail(where, folder, f"its model has {rows:,} embedding rows, but the data uses ids up to "
                    f"{needed_vocab - 1:,} ({needed_vocab:,} ids: the tokenizer's and the datasets' reserved ids)")
    toolkit = (folder / CKPT_CHECKSUMS).is_file()
    if toolkit:
        from .checkpoint import verify_checkpoint

        try:
            verify_checkpoint(folder)
        except DataError as e:
            raise _fail(where, folder, f"damaged checkpoint ({e})") from None
    position = json.loads((folder / CKPT_META).read_text()) if (folder / CKPT_META).is_file() else None
    if init.optimizer == "keep" and not (toolkit and (folder / CKPT_STATE).is_file()):
        raise ConfigError(f"{where}.optimizer", f"keep needs the AdamW state a checkpoint of this toolkit saves "
                          f"({CKPT_STATE}); {folder} has none (only the newest keep_optimizer_state checkpoints of "
                          "a run keep it); use optimizer: reset")
    return Start(where, init, folder, config, kind, rows, files, weights_sha256(folder, files), toolkit, position)


def load_start_model(start: Start):
    """The folder's model in fp32 (SDPA attention), every weight from its files: DataError naming the folder
    when a weight is missing or one is left over (transformers would initialise a missing one at random)."""
    import torch
    from transformers import AutoModelForCausalLM

    from .checkpoint import quiet_hf_logging, quiet_hf_progress

    with torch.random.fork_rng(devices=[]), quiet_hf_logging(), quiet_hf_progress():
        model, info = AutoModelForCausalLM.from_pretrained(
            str(start.folder), trust_remote_code=False, use_safetensors=True, dtype=torch.float32,
            attn_implementation="sdpa", output_loading_info=True)
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    missing = [k for k in info.get("missing_keys", []) if not (tied and k == "lm_head.weight")]
    if missing or info.get("unexpected_keys") or info.get("mismatched_keys"):
        raise DataError(f"{start.folder}: its weights do not make its config's model (missing {missing}, "
                        f"unexpected {info.get('unexpected_keys')}, mismatched {info.get('mismatched_keys')})")
    model.config.use_cache = True  # for generation after training; the trainer passes use_cache=False
    return model


def start_weights(start: Start) -> dict[str, Any]:
    """The folder's weights by name (every ``*.safetensors`` file)."""
    from safetensors.torch import load_file

    out: dict[str, Any] = {}
    for f in start.weight_files:
        out.update(load_file(str(f)))
    return out


def check_same_model(start: Start, model_config: dict[str, Any], vocab_size: int) -> None:
    """A stage's start must be the run's architecture: the same family, shape and embedding rows
    (ConfigError naming the first field that differs)."""
    from .families import get_family

    if start.family != model_config["family"]:
        raise _fail(start.where, start.folder, f"a {start.family} model; the run trains a {model_config['family']}")
    shape = get_family(start.family).shape_from_hf(start.config)
    want = {**model_config["shape"], "vocab_size": vocab_size}
    have = {**shape, "vocab_size": start.vocab_rows}
    for k in sorted(want):
        if k in have and have[k] != want[k]:
            raise _fail(start.where, start.folder, f"its {k} is {have[k]}, the run's model has {want[k]}")


def assign_weights(model, weights: dict[str, Any], folder: Path) -> None:
    """Copy ``weights`` into every parameter of ``model`` (FSDP-sharded or not); DataError naming ``folder``
    when one is missing or of another shape. A tied head is one parameter (its first name)."""
    import torch

    from .parallel import assign_full

    with torch.no_grad():
        for name, p in model.named_parameters():
            w = weights.get(name)
            if w is None or tuple(w.shape) != tuple(p.shape):
                raise DataError(f"{folder}: no weight {name} of shape {tuple(p.shape)} "
                                f"({'missing' if w is None else f'it holds {tuple(w.shape)}'})")
            assign_full(p, w)


def source_optimizer(start: Start) -> tuple[dict[str, Any], str]:
    """The AdamW state of a toolkit checkpoint and its schedule position in words (``optimizer: keep``)."""
    from .checkpoint import read_checkpoint

    _, st = read_checkpoint(start.folder)
    if st["optimizer"] is None:
        raise ConfigError(f"{start.where}.optimizer", f"keep: {start.folder} is an FSDP checkpoint, whose AdamW "
                          "state is sharded (sharded/); keep from it is not supported; use optimizer: reset")
    meta = start.position or {}
    where = (f"step {st['step']} (stage {meta.get('stage', st['stage_index'])!r}, its step {st['stage_step']}, "
             f"schedule position {st['sched_base'] + st['stage_step']})")
    return st["optimizer"], where


def announce(start: Start, what: str, step: int, log) -> dict[str, Any]:
    """Print where a start came from (stderr) and log its ``{"event": "init_from"}`` metrics row at ``step``."""
    meta = start.position or {}
    row = {"event": "init_from", "step": step, "where": start.where, "source": start.init.describe(), "path": str(start.folder),
           "weights_sha256": start.sha256, "optimizer": start.init.optimizer, "loaded": what,
           **{f"source_{k}": meta[k] for k in ("step", "stage", "tokens", "pt_tokens") if k in meta}}
    src = start.init.describe() + (f" ({start.folder})" if start.init.arm is not None else "")
    print(f"[preschool] {start.where}: {what} from {src}", file=sys.stderr, flush=True)
    log(row)
    return row
