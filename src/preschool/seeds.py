"""Seeds: what each one changes, and the named salts of every per-purpose random stream.

Every random choice in ``preschool`` is drawn from
``numpy.random.default_rng([seed, index..., SALT])`` (or a torch generator
seeded from one), where ``SALT`` names the purpose, so two purposes never share
a stream and adding a purpose never shifts another. Salts are defined here and
nowhere else. Most are ``salt("purpose")`` (crc32 of the name); a few small
integers predate this module and keep their values so that existing data and
runs reproduce bit for bit.

What a seed changes:

- an experiment's ``seed`` (data seed): which documents are held out, every
  generated item and L2T exercise, shard order; shared by every arm and
  training seed, so arms see the same data;
- a training seed (one cell of the arm x seed grid, ``seeds: [...]``, written
  to ``arms/<arm>/seed<k>/``; ``TrainConfig.seed``): model initialisation, the
  order in which the mixture draws rows, dropout, re-initialised embeddings,
  plug-in randomness in training (InfoNCE pairs, compartment vectors);
- an evaluator's ``seed``: only that evaluator's sampling (pairs, lists, fine-tune order).
"""

from __future__ import annotations

import zlib

from .errors import ConfigError

#: seeds are numbers in [0, SEED_LIMIT): numpy's SeedSequence refuses a negative one, and torch's
#: generators (seeded with a seed plus a salt or offset) hold at most 64 bits
SEED_LIMIT = 2**63


def check_seed(value, field: str) -> None:
    """ConfigError naming ``field`` unless ``value`` is an int seed in [0, 2^63)."""
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < SEED_LIMIT):
        raise ConfigError(field, f"must be a whole number in [0, 2^63), got {value!r}")


def salt(purpose: str) -> int:
    """The salt of a named random stream: crc32 of its name."""
    return zlib.crc32(purpose.encode("utf-8"))


# data
L2T_ROUTE = salt("l2t-route")  # raw text or L2T exercise, per document
L2T_PACK = salt("l2t-greedy-pack")  # order of rows within a packing bucket
L2T_DOCUMENT = salt("l2t-document")  # one document's exercises
STORYBOOK = salt("storybook")  # storybook stories (minimal pairs: salt(f"storybook/pairs/{paradigm}"))
MIXTURE_LABELS = 1  # data/mixture.py: which source fills each slot of a global batch
VAL_SEED_OFFSET = 1_000_003  # generator seed of the val split = data seed + this (a disjoint stream)
RESERVED_EMBEDDINGS = 7  # synthetic/write.py: the rendering of reserved ids
# training
EMBEDDING_REINIT = 7  # trainer: embeddings_at_start: reinit, per stage
TRAIN_SAMPLING = salt("train-sampling")  # trainer: torch's global RNG at the start of a run (dropout)
COMPARTMENT_VECTORS = 7919  # compartments/model.py: compartment vectors, torch seed = seed + this
COMPARTMENT_PERMUTATION = salt("compartment-permutation")
COMPARTMENT_PLAN = salt("compartment-plan")
INFONCE_PAIRS = salt("infonce-pairs")
# evaluation
VERBATIM_PERMUTE = salt("verbatim-permute")  # (lists: salt(f"verbatim-{kind}"))
QA_FINETUNE = salt("qa-finetune")
