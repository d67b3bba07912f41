"""Minimal-pair acceptability (BLiMP format): does the model prefer the good sentence?

Follows BLiMP (Warstadt et al. 2020, TACL): each pair is scored by the
**summed log-probability of each full sentence**, and the pair is correct when
the good sentence scores higher. Data is BLiMP-format JSONL (one object per
line with ``sentence_good``, ``sentence_bad`` and, for grouping, ``UID``,
``pairID``, ``field``, ``linguistics_term``), read from a file, a folder of
paradigm files, or the HF hub dataset ``nyu-mll/blimp`` (one config per
paradigm; needs network).

Scoring contract (each point answers a known bug in peer scorers; see
spec style_and_peers.md part 2):

- **fp32 log-softmax**: logits are cast to float32 before normalising, whatever
  the model's dtype, and per-token log-probs are summed in float64.
- **explicit BOS** (``bos``):
  ``"prepend"`` (default) conditions on the tokenizer's BOS token (EOS when it
  has none) and scores *every* sentence token, the behaviour of
  lm-eval-harness's BLiMP task (empty context, prefix token). As in lm-eval, a
  sentence whose encoding already starts with that token is not given a second
  one: its first token becomes the context. ``"none"`` feeds the sentence
  alone and scores it from its 2nd token; the 1st token is unscored (Hu et al.
  2025's ``eval_checkpoint.py``). A one-token sentence then scores 0 over 0
  tokens.
- **presets** (``preset``): ``lm_eval`` (default; what both papers ran, the
  lm-evaluation-harness ``blimp`` task) scores ``" " + sentence`` after the
  prefix token (lm-eval's multiple-choice ``target_delimiter``; with a
  byte-level BPE this changes the first word's token) and counts a tie as
  correct (lm-eval's argmax picks the good sentence, index 0) only when it is
  exact (``tie_tolerance`` 0: argmax has no tolerance), so it reproduces
  lm-eval's numbers exactly (tests/evals/test_lm_eval.py).
  ``preschool`` scores the sentence as written (how a document starts after
  EOS in our packed training data) and gives a tie (within 1e-5 nats) 0.5
  credit instead of a win (babylm-2025 #34). ``sentence_prefix``, ``ties`` and
  ``tie_tolerance`` set explicitly override
  the preset; ``setup()`` names what was used, and reports print it.
- **ties are counted**: ``|logp_good - logp_bad| <= tie_tolerance`` is a tie,
  counted in ``ties`` whatever credit it gets. A pair whose two sentences are the
  same string ties for every model: it is a **structural tie**, counted apart in
  ``ties_structural`` (and flagged ``identical`` in its item row), never in
  ``ties``, and decided as the preset decides any tie (correct under ``lm_eval``,
  as lm-eval's argmax; half under ``preschool``). Full BLiMP has 7 (passive_1 324
  and 810; principle_A_case_2 105, 287, 372, 816 and 967).
- **two decisions**: by summed log-prob (``acc*``, the BLiMP/lm-eval metric)
  and by token-mean log-prob (``acc_tokmean*``), which removes the length bias
  of sums when the two sentences tokenize to different lengths.
- **and their margins**, the continuous proxies beside them (issue #30; DataDecide,
  Magnusson et al. 2025: at small compute accuracy sits at chance while the
  likelihood already moves): ``margin`` = logp(good) - logp(bad), summed nats,
  and ``margin_tokmean`` = the difference of the token-mean log-probs (nats per
  token), each averaged exactly as its accuracy is. Higher is better; 0 is
  indifference.
- **batch-size independent**: sentences are right-padded with an attention
  mask and sorted by length into buckets; padding never changes a causal
  model's log-probs of real tokens, so results match batch size 1 to ~1e-6.

Metrics: ``acc`` is the macro mean over paradigms (UIDs), ``acc_micro`` the
mean over pairs (they coincide on full BLiMP, 1000 pairs per paradigm);
``acc/uid/<UID>``, ``acc/term/<linguistics_term>``, ``acc/field/<field>``
(BLiMP's own 4 fields) and ``acc/field3/<field>`` (the L2T paper's 3 fields,
after Shah et al. 2024: binding and control/raising under syntax; by
phenomenon, :data:`FIELDS3`) (group scores are macro means over their
paradigms); the same family with the
``acc_tokmean``, ``margin`` and ``margin_tokmean`` prefixes; ``ties``, ``ties_tokmean`` (ties other than the
structural ones), ``ties_structural``, ``n_pairs``, ``n_paradigms``. Per-pair rows go to ``items.jsonl``.

Departure from Hu et al.: they divide by a fixed 67,000; we divide by the
pairs actually scored, so a subset (``max_pairs_per_paradigm``) gives a true
accuracy.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Literal, NamedTuple, Sequence

import numpy as np

from ..config import check
from ..corpora.sources import LONE_SURROGATE
from ..errors import ConfigError, DataError
from ..io import sha256_file
from ..registry import Registry
from .base import EVALUATORS, EvalResult, Evaluator
from .prefix_tree import TREE_MODEL_TYPES, score_token_ids_tree, supports_prefix_tree

BosMode = Literal["prepend", "none"]
REQUIRED_FIELDS = ("sentence_good", "sentence_bad")
HUB_DATASET = "nyu-mll/blimp"

# BLiMP's released data labels three paradigms inconsistently with the paper's
# 12 phenomena x 4 fields: animate_subject_{passive,trans} say "s-selection"
# (the paper files them under argument structure) and principle_A_case_2 says
# field "syntax/semantics" (every other binding paradigm: "syntax_semantics").
# Grouped metrics would otherwise report 13 phenomena and 5 fields.
LABEL_FIXES = {
    "linguistics_term": {"s-selection": "argument_structure"},
    "field": {"syntax/semantics": "syntax_semantics"},
}


# The L2T paper's 3-field grouping (Yamaguchi et al. 2026, Table 2, after Shah et al. 2024):
# by phenomenon, with binding and control/raising under syntax (BLiMP's own `field` puts them,
# and two NPI paradigms, under syntax_semantics).
FIELDS3 = {
    "anaphor_agreement": "morphology", "determiner_noun_agreement": "morphology", "irregular_forms": "morphology",
    "subject_verb_agreement": "morphology",
    "argument_structure": "syntax", "binding": "syntax", "control_raising": "syntax", "ellipsis": "syntax",
    "filler_gap_dependency": "syntax", "island_effects": "syntax", "s-selection": "syntax",
    "npi_licensing": "semantics", "quantifiers": "semantics",
}

@dataclass(frozen=True)
class ScoringPreset:
    """A named scoring setup (``preset``): the values the config's unset scoring fields take."""

    sentence_prefix: str
    ties: Literal["correct", "half"]
    tie_tolerance: float

    def fields(self) -> dict[str, Any]:
        return {"sentence_prefix": self.sentence_prefix, "ties": self.ties, "tie_tolerance": self.tie_tolerance}


# scoring setups by name: the two below, or a plug-in's `minimal_pairs_presets` module (one registry style)
PRESETS = Registry("minimal-pairs preset", packages=("preschool.evals.minimal_pairs",),
                   plugin_module="minimal_pairs_presets")
# lm_eval = lm-evaluation-harness's blimp task (both papers): its tie is exact (argmax)
PRESETS.register("lm_eval")(ScoringPreset(sentence_prefix=" ", ties="correct", tie_tolerance=0.0))
# preschool = ours: a tie allows for batch-size rounding (~1e-6 nats, module docstring)
PRESETS.register("preschool")(ScoringPreset(sentence_prefix="", ties="half", tie_tolerance=1e-5))


@dataclass
class MinimalPairsConfig:
    """Where the pairs come from and how sentences are scored."""

    preset: str = "lm_eval"  # a PRESETS name; lm_eval: " " + sentence, tie = correct (papers); preschool: bare, tie = 0.5
    path: str | None = None  # JSONL file or folder of *.jsonl; None -> the HF hub dataset `hub`
    hub: str = HUB_DATASET  # used only when path is None (needs network)
    bos: BosMode = "prepend"  # "prepend": BOS/EOS then score all tokens (lm-eval); "none": score from token 2 (Hu et al.)
    batch_size: int = 128  # sentences per forward pass; results do not depend on it (beyond ~1e-6 nats)
    prefix_tree: bool | None = None  # share token prefixes across sentences (prefix_tree.py); None = when the model supports it
    row_tokens: int = 128  # prefix-tree mode: trie nodes per batch row
    max_pairs_per_paradigm: int | None = None  # fast subset: first N pairs by pairID in each paradigm
    paradigms: list[str] | None = None  # only these UIDs (default: all found)
    tie_tolerance: float | None = None  # |logp_good - logp_bad| at or below this (nats) is a tie; None = the preset's (0 / 1e-5)
    sentence_prefix: str | None = None  # text put before every sentence; None = the preset's (" " lm_eval, "" preschool)
    ties: Literal["correct", "half"] | None = None  # a tie's credit: 1 (lm-eval's argmax) or 0.5; None = the preset's
    normalize_labels: bool = True  # map BLiMP's stray labels onto the paper's 12 phenomena / 4 fields (LABEL_FIXES)
    write_items: bool = True  # per-pair rows in items.jsonl

    def __post_init__(self) -> None:
        # fields left unset take the preset's value, so the stored config says what was run
        preset = PRESETS[self.preset] if self.preset in PRESETS else None  # unknown: validate() says so
        for k, v in (preset.fields() if preset is not None else {}).items():
            if getattr(self, k) is None:
                setattr(self, k, v)

    def validate(self) -> None:
        PRESETS.get(self.preset, "preset")  # unknown -> ConfigError naming the known ones
        check(self.ties in ("correct", "half"), "ties", f"must be 'correct' or 'half', got {self.ties!r}")
        check(self.bos in ("prepend", "none"), "bos", f"must be 'prepend' or 'none', got {self.bos!r}")
        check(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.row_tokens >= 2, "row_tokens", f"must be >= 2, got {self.row_tokens}")
        check(self.max_pairs_per_paradigm is None or self.max_pairs_per_paradigm >= 1,
              "max_pairs_per_paradigm", f"must be >= 1 (or null for all), got {self.max_pairs_per_paradigm}")
        check(self.tie_tolerance is not None and self.tie_tolerance >= 0, "tie_tolerance", f"must be >= 0, got {self.tie_tolerance}")
        check(self.paradigms is None or len(self.paradigms) > 0, "paradigms", "must be a non-empty list or null")
        if self.path is not None:
            check(Path(self.path).exists(), "path", f"no such file or folder: {self.path}")
        else:
            check(bool(self.hub), "hub", "give a hub dataset name or a local path")


class MinimalPair(NamedTuple):
    """One pair; ``source`` is ``file:line`` (1-based) for error messages and provenance."""

    uid: str
    pair_id: str
    good: str
    bad: str
    field: str
    term: str
    source: str


# ---------------------------------------------------------------- data loading


def _pair_sort_key(pair_id: str) -> tuple:
    # BLiMP pairIDs are decimal strings: order "2" before "10"; anything else after, lexically.
    return (0, int(pair_id), "") if pair_id.isdigit() else (1, 0, pair_id)


_ABSENT = object()  # a label field the object does not have (JSON null is a value, and refused)


def _pair_from_obj(obj: Any, where: str, default_uid: str, default_id: str, normalize: bool = True,
                   escaped: bool = True) -> MinimalPair:
    """A pair from one parsed JSON object; DataError naming ``where`` for a field that is missing or not text.
    ``escaped``: the object may hold ``\\u`` escapes (False only when its JSON text has none, so it
    cannot hold a lone surrogate and that check is skipped)."""
    if not isinstance(obj, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    good, bad = obj.get("sentence_good"), obj.get("sentence_bad")
    if type(good) is not str or type(bad) is not str or not good.strip() or not bad.strip():
        for f in REQUIRED_FIELDS:
            if f not in obj:
                raise DataError(f"{where}: missing field {f!r} (a minimal pair needs {', '.join(REQUIRED_FIELDS)})")
            if not isinstance(obj[f], str) or not obj[f].strip():
                raise DataError(f"{where}: field {f!r} must be a non-empty string, got {obj[f]!r}")
    labels = [obj.get(f, _ABSENT) for f in ("UID", "pairID", "field", "linguistics_term")]
    for f, v in zip(("UID", "pairID", "field", "linguistics_term"), labels):
        if v is not _ABSENT and not isinstance(v, (str, int)):
            raise DataError(f"{where}: field {f!r} must be a string, got {v!r}")
    if escaped:
        for f in (*REQUIRED_FIELDS, "UID", "pairID", "field", "linguistics_term"):
            # JSON may escape half a UTF-16 pair alone; the tokenizer then fails on the text with a TypeError
            if isinstance(obj.get(f), str) and (lone := LONE_SURROGATE.search(obj[f])) is not None:
                raise DataError(f"{where}: field {f!r} holds a lone surrogate \\u{ord(lone.group()):04x} (half of a "
                                "UTF-16 pair), which is not text")
    uid, pair_id, field, term = (str(v) if v is not _ABSENT else d
                                 for v, d in zip(labels, (default_uid, default_id, "unknown", "unknown")))
    if normalize:
        field = LABEL_FIXES["field"].get(field, field)
        term = LABEL_FIXES["linguistics_term"].get(term, term)
    return MinimalPair(uid, pair_id, good, bad, field, term, where)


def read_jsonl_pairs(path: str | Path, normalize_labels: bool = True, keep: int | None = None) -> list[MinimalPair]:
    """Parse one BLiMP-format JSONL file. ``UID`` defaults to the file stem, ``pairID`` to the line index.

    ``keep``: build (and check field by field) only the pairs among each UID's first ``keep`` by pairID, ties at
    the cut included, so a pairID repeated there is still found as a duplicate by :func:`load_pairs`. Every
    line is parsed either way: a line that is not JSON is refused wherever it is."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read ({e})") from None
    name, stem = str(path), path.stem
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    try:  # the whole file as one JSON array: one parser call instead of one per line
        objs = json.loads("[" + ",".join(line for _, line in numbered) + "]")
    except json.JSONDecodeError:
        objs = None
    if objs is None or len(objs) != len(numbered):  # a bad line (or a line of two values): find and name it
        objs = []
        for n, line in numbered:
            try:
                objs.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DataError(f"{name}:{n}: not valid JSON ({e.msg})") from None
    entries = list(zip(numbered, objs))
    if keep is not None:
        entries = _first_by_pair_id(entries, stem, keep)
    return [_pair_from_obj(obj, f"{name}:{n}", stem, str(n - 1), normalize_labels, escaped="\\u" in line)
            for (n, line), obj in entries]


def _first_by_pair_id(entries: list, stem: str, keep: int) -> list:
    """The parsed lines among each UID's first ``keep`` by pairID (ties at the cut kept), in file order, and
    every line whose UID or pairID cannot be read (kept, so that building it names the problem)."""
    keyed = []
    for (n, line), obj in entries:
        labels = (obj.get("UID", stem), obj.get("pairID", str(n - 1))) if isinstance(obj, dict) else None
        if labels is None or not all(isinstance(v, (str, int)) for v in labels):
            keyed.append(None)
        else:
            keyed.append((str(labels[0]), _pair_sort_key(str(labels[1]))))
    by_uid: dict[str, list] = {}
    for k in keyed:
        if k is not None:
            by_uid.setdefault(k[0], []).append(k[1])
    cut = {uid: sorted(keys)[keep - 1] for uid, keys in by_uid.items() if len(keys) > keep}
    return [e for e, k in zip(entries, keyed) if k is None or k[0] not in cut or k[1] <= cut[k[0]]]


def _hub_pairs(name: str, uids: Sequence[str] | None, normalize: bool = True) -> list[MinimalPair]:
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - datasets is a core dependency
        raise DataError(f"loading {name} from the hub needs `datasets` ({e})") from None
    try:
        configs = list(uids) if uids else datasets.get_dataset_config_names(name)
        pairs = []
        for uid in configs:
            ds = datasets.load_dataset(name, uid, split="train")
            for i, row in enumerate(ds):
                pairs.append(_pair_from_obj(dict(row), f"hub:{name}/{uid}[{i}]", uid, str(i), normalize))
    except DataError:
        raise
    except Exception as e:  # network, offline mode, missing config: say what to do instead
        raise DataError(f"cannot load {name} from the HF hub ({type(e).__name__}: {e}); "
                        "give a local copy with path=<folder of BLiMP .jsonl files>") from None
    return pairs


def load_pairs(
    path: str | Path | None,
    paradigms: Iterable[str] | None = None,
    max_pairs_per_paradigm: int | None = None,
    hub: str = HUB_DATASET,
    normalize_labels: bool = True,
) -> tuple[list[MinimalPair], list[dict]]:
    """Load pairs from a JSONL file, a folder of ``*.jsonl`` files, or the hub (``path=None``).

    Returns ``(pairs, sources)``: pairs grouped by UID (UIDs sorted) and ordered
    by pairID inside each, truncated to the first ``max_pairs_per_paradigm``;
    ``sources`` lists the files read with their sha256 (provenance).
    ``normalize_labels`` applies :data:`LABEL_FIXES` to ``field`` / ``linguistics_term``.
    Raises DataError on malformed lines (naming file and line) or duplicate
    ``(UID, pairID)``, and ConfigError for requested paradigms that are absent.
    """
    wanted = list(paradigms) if paradigms else None
    sources: list[dict] = []
    if path is None:
        pairs = _hub_pairs(hub, wanted, normalize_labels)
        sources.append({"hub": hub})
    else:
        p = Path(path)
        files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
        if not files:
            raise DataError(f"{p}: no *.jsonl files in this folder")
        if wanted is not None and p.is_dir() and all((p / f"{u}.jsonl").is_file() for u in wanted):
            files = [p / f"{u}.jsonl" for u in wanted]  # BLiMP layout (file stem = UID): skip the other files
        pairs = []
        for f in files:
            pairs.extend(read_jsonl_pairs(f, normalize_labels, keep=max_pairs_per_paradigm or None))
            sources.append({"file": str(f), "sha256": sha256_file(f)})
    by_uid: dict[str, list[MinimalPair]] = {}
    seen: dict[tuple[str, str], str] = {}
    for pr in pairs:
        key = (pr.uid, pr.pair_id)
        if key in seen:
            raise DataError(f"{pr.source}: duplicate pair UID={pr.uid!r} pairID={pr.pair_id!r} (first at {seen[key]})")
        seen[key] = pr.source
        by_uid.setdefault(pr.uid, []).append(pr)
    if wanted is not None:
        missing = [u for u in wanted if u not in by_uid]
        if missing:
            raise ConfigError("paradigms", f"not found in the data: {missing} (found {len(by_uid)} paradigms)")
        by_uid = {u: by_uid[u] for u in wanted}
    out: list[MinimalPair] = []
    for uid in sorted(by_uid):
        group = sorted(by_uid[uid], key=lambda pr: _pair_sort_key(pr.pair_id))
        out.extend(group[:max_pairs_per_paradigm] if max_pairs_per_paradigm else group)
    if not out:
        raise DataError(f"{path or hub}: no minimal pairs found")
    return out, sources


def _combined_sha256(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}\0{sha256_file(f)}\0".encode())
    return h.hexdigest()


# ---------------------------------------------------------------- scoring


def prefix_token_id(tokenizer) -> int:
    """The token sentences are conditioned on in ``bos='prepend'`` mode: BOS, else EOS."""
    tid = getattr(tokenizer, "bos_token_id", None)
    if tid is None:
        tid = getattr(tokenizer, "eos_token_id", None)
    if tid is None:
        raise ConfigError("bos", "tokenizer has neither a BOS nor an EOS token; use bos='none'")
    return int(tid)


def encode_for_scoring(tokenizer, sentences: Sequence[str], bos: BosMode, prefix: str = "") -> list[list[int]]:
    """Token ids fed to the model; every position after the first is a scored target."""
    texts = [prefix + s for s in sentences]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # a fast tokenizer: the Rust batch call gives the same ids without the per-item wrapper
        enc = [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    else:
        enc = tokenizer(texts, add_special_tokens=False)["input_ids"]
    if bos == "none":
        return [list(ids) for ids in enc]
    pre = prefix_token_id(tokenizer)
    # Like lm-eval: a sentence that already begins with the prefix token is not given a second one.
    return [list(ids) if ids and ids[0] == pre else [pre, *ids] for ids in enc]


def _model_device(model):
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        import torch

        return torch.device("cpu")


def score_token_ids(model, seqs: Sequence[Sequence[int]], batch_size: int = 64,
                    pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Summed log-prob of tokens 2..L of each sequence given its prefix, and the count scored.

    ``model(input_ids=, attention_mask=)`` must return logits (B, T, V) (HF causal
    LM call signature; an object with ``.logits`` or a bare tensor). Sequences
    are sorted by length into batches of ``batch_size`` and right-padded, so a
    batch holds similar lengths and padding never precedes a real token.
    """
    import torch

    n = len(seqs)
    logp = np.zeros(n, dtype=np.float64)
    counts = np.array([max(len(s) - 1, 0) for s in seqs], dtype=np.int64)
    order = sorted((i for i in range(n) if counts[i] > 0), key=lambda i: (-len(seqs[i]), i))
    device = _model_device(model)
    with torch.inference_mode():
        for b in range(0, len(order), batch_size):
            idx = order[b:b + batch_size]
            width = len(seqs[idx[0]])  # longest first within the sorted order
            ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, :len(seqs[i])] = torch.as_tensor(seqs[i], dtype=torch.long)
                mask[r, :len(seqs[i])] = 1
            ids, mask = ids.to(device), mask.to(device)
            out = model(input_ids=ids, attention_mask=mask)
            logits = (out.logits if hasattr(out, "logits") else out)[:, :-1].float()  # fp32 whatever the model dtype
            targets = ids[:, 1:]
            tok_lp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
            tok_lp = tok_lp.double() * mask[:, 1:].double()  # zero the padded targets, sum in float64
            logp[idx] = tok_lp.sum(-1).cpu().numpy()
    return logp, counts


def use_prefix_tree(model, prefix_tree: bool | None) -> bool:
    """Resolve the ``prefix_tree`` option: None = whenever the model supports it; True on an
    unsupported model is an error rather than silently wrong numbers."""
    ok = supports_prefix_tree(model)
    if prefix_tree and not ok:
        raise ConfigError("prefix_tree", f"{type(model).__name__} is not a supported model for prefix-tree scoring "
                          f"(needs an HF model of type {sorted(TREE_MODEL_TYPES)} with eager/sdpa attention); "
                          "set prefix_tree: false")
    return ok if prefix_tree is None else bool(prefix_tree)


def score_sentences(model, tokenizer, sentences: Sequence[str], bos: BosMode = "prepend",
                    batch_size: int = 128, prefix: str = "", prefix_tree: bool | None = None,
                    row_tokens: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """``(summed log-prob, scored-token count)`` per sentence under the BOS rule ``bos``."""
    seqs = encode_for_scoring(tokenizer, sentences, bos, prefix)
    pad = getattr(tokenizer, "pad_token_id", None)
    pad_id = 0 if pad is None else int(pad)
    if use_prefix_tree(model, prefix_tree):
        return score_token_ids_tree(model, seqs, batch_size, row_tokens, pad_id=pad_id)
    return score_token_ids(model, seqs, batch_size, pad_id=pad_id)


# ---------------------------------------------------------------- decisions and summary


def decide(a: float, b: float, tol: float, tie_credit: float = 0.5) -> float:
    """1 if a > b, 0 if a < b, ``tie_credit`` when within ``tol`` (a tie)."""
    if abs(a - b) <= tol:
        return tie_credit
    return 1.0 if a > b else 0.0


def score_pairs(model, tokenizer, pairs: Sequence[MinimalPair], bos: BosMode = "prepend",
                batch_size: int = 128, tie_tolerance: float = 1e-5, prefix: str = "",
                prefix_tree: bool | None = None, row_tokens: int = 128, ties: str = "half") -> list[dict]:
    """One row per pair: log-probs, token counts, tie flags and both decisions.

    ``ties``: a tie's credit, ``"half"`` (0.5) or ``"correct"`` (1, lm-eval's argmax).
    """
    credit = 1.0 if ties == "correct" else 0.5
    # Score each distinct sentence once (BLiMP repeats some across pairs).
    uniq = sorted({s for pr in pairs for s in (pr.good, pr.bad)})
    lp, nt = score_sentences(model, tokenizer, uniq, bos, batch_size, prefix, prefix_tree, row_tokens)
    where = {s: i for i, s in enumerate(uniq)}
    rows = []
    for pr in pairs:
        g, b = where[pr.good], where[pr.bad]
        mg = lp[g] / nt[g] if nt[g] else 0.0
        mb = lp[b] / nt[b] if nt[b] else 0.0
        rows.append({
            "UID": pr.uid, "pairID": pr.pair_id, "field": pr.field, "linguistics_term": pr.term,
            "logp_good": float(lp[g]), "logp_bad": float(lp[b]),
            "n_tokens_good": int(nt[g]), "n_tokens_bad": int(nt[b]),
            "correct": decide(lp[g], lp[b], tie_tolerance, credit),
            "correct_tokmean": decide(mg, mb, tie_tolerance, credit),
            # the decisions' continuous versions: how far apart the two sentences are, not just which wins
            "margin": float(lp[g] - lp[b]),
            "margin_tokmean": float(mg - mb),
            "tie": bool(abs(lp[g] - lp[b]) <= tie_tolerance),
            "tie_tokmean": bool(abs(mg - mb) <= tie_tolerance),
            "identical": pr.good == pr.bad,  # a structural tie: the same string twice ties for every model
        })
    return rows


# per-pair row key -> metric family; each family is averaged the same way (macro over paradigms, then groups)
FAMILIES = (("correct", "acc"), ("correct_tokmean", "acc_tokmean"), ("margin", "margin"),
            ("margin_tokmean", "margin_tokmean"))


def summarize(rows: Sequence[dict]) -> tuple[dict[str, float], dict[str, Any]]:
    """Metrics (flat floats) and a per-paradigm table from per-pair rows (rows without the margins,
    as older items.jsonl files have, give the accuracies only)."""
    metrics: dict[str, float] = {}
    table: dict[str, dict] = {}
    by_uid: dict[str, list[dict]] = {}
    for r in rows:
        by_uid.setdefault(r["UID"], []).append(r)
    for key, prefix in FAMILIES:
        if not all(key in r for r in rows):
            continue
        per_uid = {u: float(np.mean([r[key] for r in rs])) for u, rs in by_uid.items()}
        metrics[prefix] = float(np.mean(list(per_uid.values())))
        metrics[f"{prefix}_micro"] = float(np.mean([r[key] for r in rows]))
        for kind, group_of in (("term", lambda r: r["linguistics_term"]), ("field", lambda r: r["field"]),
                               ("field3", lambda r: FIELDS3.get(r["linguistics_term"]))):
            groups: dict[str, list[float]] = {}
            for u, rs in by_uid.items():
                g = group_of(rs[0])
                if g is not None:  # field3: only BLiMP's phenomena have a place in the paper's grouping
                    groups.setdefault(g, []).append(per_uid[u])
            for g, accs in sorted(groups.items()):
                metrics[f"{prefix}/{kind}/{g}"] = float(np.mean(accs))
        for u in sorted(per_uid):
            metrics[f"{prefix}/uid/{u}"] = per_uid[u]
    for key, tie_key, name in (("correct", "tie", "ties"), ("correct_tokmean", "tie_tokmean", "ties_tokmean")):
        metrics[name] = float(sum(1 for r in rows if r.get(tie_key, r[key] == 0.5) and not r.get("identical")))
    metrics["ties_structural"] = float(sum(1 for r in rows if r.get("identical")))
    metrics["n_pairs"] = float(len(rows))
    metrics["n_paradigms"] = float(len(by_uid))
    for u, rs in sorted(by_uid.items()):
        table[u] = {
            "field": rs[0]["field"], "linguistics_term": rs[0]["linguistics_term"], "n": len(rs),
            **{prefix: metrics[f"{prefix}/uid/{u}"] for _, prefix in FAMILIES if f"{prefix}/uid/{u}" in metrics},
            "ties": sum(1 for r in rs if r.get("tie", r["correct"] == 0.5) and not r.get("identical")),
            "ties_structural": sum(1 for r in rs if r.get("identical")),
        }
    return metrics, table


@EVALUATORS.register("minimal_pairs", config=MinimalPairsConfig)
class MinimalPairs(Evaluator):
    """BLiMP-style minimal-pair accuracy by fp32 summed (and token-mean) sentence log-prob."""

    # presets and tie credit are config fields, so they are in the cache key; 2: log-prob margins beside accuracy;
    # 3: identical-sentence pairs counted apart (ties_structural), no longer in ties
    version: ClassVar[str] = "3"
    plain_decoder: ClassVar[bool] = True  # log-probabilities only: the runner may skip transformers
    headline_metrics: ClassVar[tuple[str, ...]] = ("acc", "acc_micro", "acc_tokmean", "margin", "margin_tokmean",
                                                   "ties", "n_pairs")
    higher_is_better: ClassVar[tuple[str, ...]] = ("acc", "acc_*", "acc/*", "margin", "margin_*", "margin/*")
    chance: ClassVar[dict[str, float]] = {"acc": 0.5, "acc_*": 0.5, "acc/*": 0.5}  # a two-way forced choice

    def setup(self) -> str:
        """``preset lm_eval`` / ``preset preschool``, plus any field set against the preset."""
        cfg = self.cfg
        own = [f"{k}={getattr(cfg, k)!r}" for k, v in PRESETS[cfg.preset].fields().items() if getattr(cfg, k) != v]
        return f"preset {cfg.preset}" + (f" ({', '.join(own)})" if own else "")

    @classmethod
    def data_fingerprint(cls, cfg: MinimalPairsConfig) -> str | None:
        """sha256 over the JSONL files read (runner cache key); None for the hub (pinned by name only)."""
        if cfg.path is None:
            return None
        p = Path(cfg.path)
        files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
        return _combined_sha256(files)

    def evaluate(self, model, tokenizer) -> EvalResult:
        cfg = self.cfg
        pairs, sources = load_pairs(cfg.path, cfg.paradigms, cfg.max_pairs_per_paradigm, cfg.hub,
                                    cfg.normalize_labels)
        tree = use_prefix_tree(model, cfg.prefix_tree)
        rows = score_pairs(model, tokenizer, pairs, cfg.bos, cfg.batch_size, cfg.tie_tolerance,
                           cfg.sentence_prefix, tree, cfg.row_tokens, cfg.ties)
        metrics, table = summarize(rows)
        extra = {
            "preset": cfg.preset,
            "setup": self.setup(),
            "ties_credit": cfg.ties,
            "bos": cfg.bos,
            "sentence_prefix": cfg.sentence_prefix,
            "prefix_token_id": prefix_token_id(tokenizer) if cfg.bos == "prepend" else None,
            "prefix_tree": tree,
            "paradigms": table,
            "sources": sources,
            "subset": cfg.max_pairs_per_paradigm is not None,
        }
        return EvalResult(metrics=metrics, items=rows if cfg.write_items else None, extra=extra)


@EVALUATORS.register("blimp", config=MinimalPairsConfig)
class Blimp(MinimalPairs):
    """Alias of ``minimal_pairs`` under the name people look for (same config, same scoring)."""
