"""The one compatibility shim of the built-in dataset kinds: the flat spec every dataset had before the variants.

Before each way of building a dataset had its own spec variant (``data/builder.py``),
every ``data.<name>`` was one flat spec with every field of every kind. Two things
of that time must keep working, and only for the built-in kinds (corpus, generator,
L2T, derived), which existed then:

- data prepared then stays up to date: a built-in variant records itself in
  ``dataset.json`` (and hashes) in the flat form (:class:`FlatRecord`);
- a config saved then still reads: its ``experiment.yaml`` held every field for
  every dataset, so a field of another kind at its flat default
  (:func:`saved_default`) is what it wrote, and meant nothing then either.

A plug-in's variant records its own fields and reads no flat field.
"""

from __future__ import annotations

from typing import Any

from ..config import to_dict
from .engine import DEFAULT_UNIT_TOKENS

# the flat spec, field by field with its default
FLAT_FIELDS: dict[str, Any] = {
    "corpus": None, "generator": None, "preset": None, "params": {}, "render": "text", "tokens": 0,
    "val_tokens": 0, "val_fraction": 0.02, "pack": "concat", "exact_fill": False, "exclude": [], "l2t": None,
    "unit_tokens": DEFAULT_UNIT_TOKENS, "kind": None, "source": None}
_FLAT_RECORD = [k for k in FLAT_FIELDS if k not in ("kind", "source")]  # derived specs add theirs after these


def saved_default(key: str, value: Any) -> bool:
    """Whether ``key: value`` is the flat spec's default for that field (what a saved config of that time
    wrote for a field its kind does not have)."""
    return key in FLAT_FIELDS and value == FLAT_FIELDS[key]


class FlatRecord:
    """Mixin of the built-in spec variants (before ``DatasetSpec`` in the bases): ``record()`` is the flat spec
    (every :data:`FLAT_FIELDS` field but ``kind``/``source``, another kind's at its default, then the
    variant's own other fields), so ``dataset.json``'s spec and hash stay those of data prepared then."""

    def record(self) -> dict:
        own = to_dict(self)
        flat = {k: own.pop(k) if k in own else to_dict(FLAT_FIELDS[k]) for k in _FLAT_RECORD}
        return {**flat, **own}
