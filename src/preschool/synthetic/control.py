"""Control: natural text from the PT source, disjoint from the PT slice by document id, same token budget.

Follows verify-ppt's Control arm (``tokenize_c4_baseline.py``,
``extract_*_baseline.sh``): the "pre-pretraining" stage is trained on text of
the same mixture the PT stage uses, taken from documents PT never sees, for
exactly the PPT token budget, so a synthetic task is compared with "more
natural text" rather than with nothing. verify-ppt carves C4 by row offset
(skip the first 25 %); here disjointness is by document id, which survives
re-ordering and re-chunking of the source.

This is not a symbol generator (it is not in ``GENERATORS``): it is a filter
over :class:`preschool.corpora.Document` streams (anything with ``.id`` and
``.text``, or ``(id, text)`` tuples), and a writer that packs the selection
like PT text (concatenated, EOS between documents, no document masking).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Collection, Iterable, Iterator

import numpy as np

from ..data.packing import Doc, PackStats, pack
from ..data.shards import ShardWriter
from ..errors import ConfigError, DataError


def _id_text(d) -> tuple[str, str]:
    if isinstance(d, tuple):
        return str(d[0]), d[1]
    return str(d.id), d.text


def select_control(
    docs: Iterable,
    pt_ids: Collection[str] | Callable[[str], bool],
    token_budget: int,
    count_tokens: Callable[[str], int],
    stats: dict | None = None,
) -> Iterator:
    """Yield documents not in the PT slice until ``token_budget`` tokens are reached.

    ``pt_ids``: the ids the PT stage trains on (a set, or a predicate
    ``id -> bool``). Ids must be unique in ``docs``. Raises DataError when the
    source runs out before the budget (never silently returns less text).
    ``stats`` (optional) receives ``documents``, ``tokens``, ``skipped_pt`` and
    ``ids_sha256`` (hash of the selected ids in order, for the manifest).
    """
    if token_budget <= 0:
        raise ConfigError("tokens", f"must be > 0, got {token_budget}")
    in_pt = pt_ids if callable(pt_ids) else (lambda i, s=frozenset(pt_ids): i in s)
    st = stats if stats is not None else {}
    st.update(documents=0, tokens=0, skipped_pt=0)
    seen: set[str] = set()
    h = hashlib.sha256()
    for d in docs:
        did, text = _id_text(d)
        if did in seen:
            raise DataError(f"control source: document id {did!r} appears twice; ids must be unique")
        seen.add(did)
        if in_pt(did):
            st["skipped_pt"] += 1
            continue
        st["documents"] += 1
        st["tokens"] += int(count_tokens(text))
        h.update(did.encode() + b"\n")
        st["ids_sha256"] = h.hexdigest()
        yield d
        if st["tokens"] >= token_budget:
            return
    raise DataError(f"control source ran out: {st['tokens']} of {token_budget} tokens from {st['documents']} "
                    f"documents outside the PT slice ({st['skipped_pt']} PT documents skipped)")


def write_control_shards(
    docs: Iterable,
    pt_ids: Collection[str] | Callable[[str], bool],
    out: str | Path,
    tokenizer,
    n_rows: int,
    row_len: int,
    eos_id: int,
    progress: bool = False,
) -> dict:
    """Pack Control text into ``n_rows`` rows of ``row_len`` (the PPT stage's budget) and write shards.

    ``tokenizer`` is a ``tokenizers.Tokenizer`` (the run's). Packing is
    ``concat`` with EOS, as PT text. The manifest records the selected
    documents' id hash and how many PT documents were skipped.
    """
    budget = n_rows * row_len
    st: dict = {}
    last: dict = {}

    def count(text: str) -> int:  # tokenize once: select_control counts, encoded() reuses the ids
        last["ids"] = tokenizer.encode(text, add_special_tokens=False).ids
        return len(last["ids"]) + 1  # + EOS

    def encoded() -> Iterator[Doc]:
        for _ in select_control(docs, pt_ids, budget, count, st):
            yield Doc(np.asarray(last["ids"], np.int64))

    stats = PackStats()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=budget, unit="tok", unit_scale=True, desc="generate control")
    try:
        with ShardWriter(out, row_len, tokenizer.get_vocab_size(with_added_tokens=True),
                         arrays=["loss_mask", "segments"]) as w:
            written = 0
            for block in pack(encoded(), row_len, eos_id, mode="concat", stats=stats, chunk_rows=max(1, min(1024, n_rows))):
                take = min(len(block["tokens"]), n_rows - written)
                w.add_rows(block["tokens"][:take], loss_mask=block["loss_mask"][:take],
                           segments=block["segments"][:take])
                written += take
                if bar:
                    bar.update(take * row_len)
                if written >= n_rows:
                    break
            return w.close(source={"kind": "control", "documents": st["documents"], "skipped_pt": st["skipped_pt"],
                                   "ids_sha256": st.get("ids_sha256")}, render="text", eos_id=eos_id)
    finally:
        if bar:
            bar.close()
