"""Verbatim retrieval: repeat surprisal of a noun list seen earlier in the context.

Paradigm of Armeni, Honey & Linzen (CoNLL 2022; repo
``KristijanArmeni/verbatim-memory-in-NLMs``) as used by verify-ppt
("Synthetic Pre-pretraining Survives Scale, but Not as a Grammatical Prior";
spec synthetic_ppt.md A.6 and C). Each stimulus is

    preface  list 1 .  intervening text  cue  list 2 .

and the model's surprisal on list 2 is compared with its surprisal on list 1.
A model that retrieves the first list verbatim finds the repeated list far
less surprising.

Metrics per stimulus (token-level, verify-ppt):

- ``nll_list1`` / ``nll_list2``: mean next-token NLL (nats) over the BPE
  tokens of list 1 / list 2, after dropping punctuation-only tokens;
- ``x_perc = nll_list2 / nll_list1 * 100`` (100 = no memory, lower = better),
  ``x_del = (l2 - l1) / (l2 + l1)``, ``retrieval_success = [l2 < l1]``.

Armeni's word-level variant is computed from the same forward pass: sub-word
surprisals are *summed* into word surprisal, averaged over list positions per
stimulus, and summarised by the **median** x_perc with a percentile bootstrap
95% CI (10k resamples, seed 12345) and the MAD.

Stimuli come from our own material by default (``resources/verbatim``: noun
categories and vignettes written for this project; lists are 10-noun base
lists circularly shifted so every noun appears in every position, shorter
lists being the first n nouns, as in Armeni et al.), or from the published
noun lists by path (``source: file``, ``lists_path`` = ``categorized_lists.json``
/ ``random_lists.json`` with keys ``n3``/``n5``/``n7``/``n10``), or from Armeni
et al.'s prebuilt input files, the exact verify-ppt inputs (``source:
rnn_inputs``, ``input_files`` = ``categorized_lists_sce{1..5}_repeat.txt``, each
read with its ``*_markers.txt``; see :func:`load_rnn_inputs`).

Presets (``preset``): ``ours`` (default) keeps the fields as given, so with
the defaults the stimuli are our own (offline, no download; numbers are not
comparable with the papers', and reports say so). ``verify_ppt`` is the
paper's setup: the published Armeni input files
``categorized_lists_sce{1,2,3,4,5}_repeat.txt`` (+ markers) from the folder
``inputs_dir`` the user gives (the Armeni repository's
``data/rnn_input_files``), every list (``n_lists: null``), the repeat
condition, no added BOS, all four list lengths; a field left at its default
takes the preset's value. ``setup()`` names the stimuli behind each number.

Departures: the default vignettes are ours, so absolute numbers differ from the
papers'. Text spacing defaults to the reference's NLTK-style spacing (a space
before every punctuation mark, "words : cup , plate ."); ``spacing: natural``
gives ordinary text. Stimuli longer than the model's context are truncated
from the left while list 1 still fits (Armeni use a sliding window); those
that cannot fit are skipped and counted.
"""

from __future__ import annotations

import ast
import bisect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import check
from ..errors import ConfigError, DataError
from ..numerics import bootstrap_ci, mad
from .base import EVALUATORS, EvalResult, Evaluator, max_positions
from ..seeds import VERBATIM_PERMUTE
from ..seeds import salt as seed_salt

RESOURCES = Path(__file__).resolve().parent.parent / "resources" / "verbatim"
PUNCT = frozenset(",.:;!?")
CONDITIONS = ("repeat", "permute", "control")
SHIFTS = 10  # base lists have 10 nouns, circularly shifted 10 times (Armeni et al.)

# marker codes per word (as in Armeni's transformer inputs)
PREFACE, LIST1, INTERVENING, LIST2, PUNCT_MARK = 0, 1, 2, 3, -1

# verify-ppt's verbatim inputs: Armeni et al.'s categorized lists, scenarios 1-5, repeat condition
VERIFY_PPT_STEM = "categorized_lists_sce{}_repeat"
VERIFY_PPT_SCENARIOS = (1, 2, 3, 4, 5)

_WORD_RE = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")


@dataclass
class VerbatimConfig:
    """Stimuli and scoring for the ``verbatim`` evaluator (see module docstring)."""

    preset: str = "ours"  # ours (fields as given; default: our stimuli, offline) | verify_ppt (the paper's inputs)
    inputs_dir: str | None = None  # verify_ppt: folder holding Armeni's categorized_lists_sce{1..5}_repeat(.txt, _markers.txt)
    source: str = "builtin"  # builtin (our nouns + vignettes) | file (published noun lists) | rnn_inputs (Armeni input files)
    lists_path: str | None = None  # JSON with n3/n5/n7/n10, or a folder holding <list_kind>_lists.json
    input_files: list[str] = field(default_factory=list)  # rnn_inputs: *_<condition>.txt files (+ *_markers.txt beside)
    list_kind: str = "categorized"  # categorized (one semantic category per list) | random
    n_base_lists: int = 12  # builtin: 10-noun base lists, each circularly shifted 10 times
    n_lists: int | None = 40  # lists used per length (first n; None = all). 40 = 4 base lists x 10 shifts
    list_lengths: list[int] = field(default_factory=lambda: [3, 5, 7, 10])
    intervening_words: list[int] = field(default_factory=lambda: [0, 25, 50, 100, 200])
    vignettes: list[str] = field(default_factory=lambda: ["anna"])
    vignettes_path: str | None = None  # JSON like resources/verbatim/vignettes.json (default: ours)
    conditions: list[str] = field(default_factory=lambda: ["repeat"])  # first one gives the headline metrics
    spacing: str = "spaced"  # spaced (NLTK-style, as the reference inputs) | natural
    add_bos: bool = False  # prepend BOS (EOS when there is none) unless the tokenizer already adds one
    batch_size: int = 16
    max_length: int | None = None  # context limit in tokens (None: the model's max positions)
    armeni_skip_first: bool = False  # word-level summary over list positions 2..n only
    bootstrap_resamples: int = 10000
    seed: int = 12345

    def __post_init__(self) -> None:
        if self.preset != "verify_ppt":
            return
        # the paper's setup, for every field left at its default (spec synthetic_ppt.md A.6)
        if self.source == "builtin":
            self.source = "rnn_inputs"
        if not self.input_files and self.inputs_dir:
            self.input_files = [str(Path(self.inputs_dir) / f"{VERIFY_PPT_STEM.format(k)}.txt")
                                for k in VERIFY_PPT_SCENARIOS]
        if self.n_lists == 40:
            self.n_lists = None  # all 230 lists of every length

    def validate(self) -> None:
        check(self.preset in ("ours", "verify_ppt"), "preset", f"must be 'ours' or 'verify_ppt', got {self.preset!r}")
        if self.preset == "verify_ppt":
            check(bool(self.input_files), "inputs_dir",
                  "preset verify_ppt reads the published input files: give inputs_dir = the folder holding "
                  "categorized_lists_sce{1..5}_repeat.txt and their _markers.txt (Armeni et al.'s "
                  "verbatim-memory-in-NLMs, data/rnn_input_files)")
            for f in self.input_files:
                check(Path(f).is_file(), "inputs_dir", f"published input file not found: {f}")
        check(self.source in ("builtin", "file", "rnn_inputs"), "source",
              f"must be 'builtin', 'file' or 'rnn_inputs', got {self.source!r}")
        if self.source == "file":
            check(bool(self.lists_path), "lists_path", "required when source is 'file'")
        if self.source == "rnn_inputs":
            check(len(self.input_files) > 0, "input_files", "required when source is 'rnn_inputs'")
        check(self.list_kind in ("categorized", "random"), "list_kind",
              f"must be 'categorized' or 'random', got {self.list_kind!r}")
        check(self.n_base_lists >= 2, "n_base_lists", f"must be >= 2 (control lists come from another base list), got {self.n_base_lists}")
        check(self.n_lists is None or self.n_lists >= 1, "n_lists", f"must be >= 1 or null, got {self.n_lists}")
        check(len(self.list_lengths) > 0, "list_lengths", "must not be empty")
        for i, n in enumerate(self.list_lengths):
            check(1 <= n <= SHIFTS, f"list_lengths[{i}]", f"must be in [1, {SHIFTS}], got {n}")
        check(len(self.intervening_words) > 0, "intervening_words", "must not be empty")
        for i, n in enumerate(self.intervening_words):
            check(n >= 0, f"intervening_words[{i}]", f"must be >= 0, got {n}")
        check(len(self.vignettes) > 0, "vignettes", "must not be empty")
        check(len(self.conditions) > 0, "conditions", "must not be empty")
        for i, c in enumerate(self.conditions):
            check(c in CONDITIONS, f"conditions[{i}]", f"must be one of {list(CONDITIONS)}, got {c!r}")
        check(len(set(self.conditions)) == len(self.conditions), "conditions", "must not repeat a condition")
        check(self.spacing in ("spaced", "natural"), "spacing", f"must be 'spaced' or 'natural', got {self.spacing!r}")
        check(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.max_length is None or self.max_length >= 8, "max_length", f"must be >= 8 or null, got {self.max_length}")
        check(self.bootstrap_resamples >= 1, "bootstrap_resamples", "must be >= 1")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")


# ----------------------------------------------------------------------------- stimulus material


def load_noun_lists(path: str | Path, kind: str = "categorized") -> dict[int, list[list[str]]]:
    """Published noun lists: ``{3: [[...], ...], 5: ..., 7: ..., 10: ...}``.

    ``path`` is a JSON file mapping ``n<len>`` to lists of ``len`` nouns (the
    Armeni et al. ``categorized_lists.json`` / ``random_lists.json``: 230 lists
    per length, 23 base lists x 10 circular shifts), or a folder holding
    ``<kind>_lists.json``.
    """
    p = Path(path)
    if p.is_dir():
        p = p / f"{kind}_lists.json"
    if not p.is_file():
        raise DataError(f"{p}: noun-list file not found")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise DataError(f"{p}: expected an object with keys like 'n3', 'n5'")
    out: dict[int, list[list[str]]] = {}
    for key, lists in data.items():
        m = re.fullmatch(r"n(\d+)", str(key))
        if not m:
            raise DataError(f"{p}: key {key!r} is not of the form n<length>")
        n = int(m.group(1))
        if not isinstance(lists, list) or not lists:
            raise DataError(f"{p}: {key} must be a non-empty list of lists")
        for i, lst in enumerate(lists):
            if not isinstance(lst, list) or len(lst) != n or not all(isinstance(w, str) and w.strip() for w in lst):
                raise DataError(f"{p}: {key}[{i}] must be a list of {n} non-empty strings, got {lst!r:.80}")
        out[n] = [[w.strip() for w in lst] for lst in lists]
    return out


def load_vignettes(path: str | Path | None = None) -> dict[str, dict]:
    """Vignettes ``{name: {preface, cue, intervening: [sentences]}}`` (default: ours)."""
    p = Path(path) if path else RESOURCES / "vignettes.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{p}: vignette file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{p}: not valid JSON ({e})") from None
    out = {}
    for name, v in data.items():
        if name.startswith("_"):
            continue
        if not isinstance(v, dict) or not all(k in v for k in ("preface", "cue", "intervening")):
            raise DataError(f"{p}: vignette {name!r} needs 'preface', 'cue' and 'intervening'")
        if not isinstance(v["intervening"], list) or not all(isinstance(s, str) for s in v["intervening"]):
            raise DataError(f"{p}: vignette {name!r}: 'intervening' must be a list of sentences")
        out[name] = v
    return out


def load_noun_pool(path: str | Path | None = None) -> dict[str, list[str]]:
    """Our noun categories ``{category: [nouns]}``."""
    p = Path(path) if path else RESOURCES / "nouns.json"
    data = json.loads(p.read_text(encoding="utf-8"))
    cats = data.get("categories") if isinstance(data, dict) else None
    if not isinstance(cats, dict) or not cats:
        raise DataError(f"{p}: expected {{'categories': {{name: [nouns]}}}}")
    return {k: list(v) for k, v in cats.items()}


def builtin_lists(kind: str, n_base: int, seed: int) -> list[list[str]]:
    """10-noun lists from our pool: ``n_base`` base lists, each circularly shifted 10 times.

    ``categorized``: each base list holds 10 nouns of one category (categories
    are cycled; a category reused gets a fresh draw). ``random``: 10 nouns from
    10 different categories. Every draw is a pure function of (seed, base index).
    """
    pool = load_noun_pool()
    cats = sorted(pool)
    salt = seed_salt(f"verbatim-{kind}")
    bases = []
    for b in range(n_base):
        rng = np.random.default_rng([seed, b, salt])
        if kind == "categorized":
            nouns = pool[cats[b % len(cats)]]
            base = [nouns[i] for i in rng.choice(len(nouns), size=SHIFTS, replace=False)]
        else:
            chosen = rng.choice(len(cats), size=SHIFTS, replace=False)
            base = [pool[cats[c]][int(rng.integers(len(pool[cats[c]])))] for c in chosen]
        bases.append(base)
    # shift k moves the last k nouns to the front, so noun j sits at position (j + k) % 10
    return [base[SHIFTS - k:] + base[: SHIFTS - k] for base in bases for k in range(SHIFTS)]


@dataclass
class Stimulus:
    sid: int
    text: str
    spans: list[tuple[int, int, int, int]]  # (char start, char end, marker, list position or -1) per word
    vignette: str
    intervening: int  # target word count of the intervening text
    list_len: int
    condition: str
    list_index: int
    list1: list[str]
    list2: list[str]


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text)


def _assemble(parts: list[tuple[list[str], int, bool]], spacing: str) -> tuple[str, list[tuple[int, int, int, int]]]:
    """Join word lists into one string, recording each word's character span and marker."""
    text = ""
    spans = []
    for words, marker, is_list in parts:
        pos = 0
        for w in words:
            is_p = bool(re.fullmatch(r"[^\w\s]", w))
            sep = "" if not text else ("" if (spacing == "natural" and is_p) else " ")
            start = len(text) + len(sep)
            text += sep + w
            if is_p:
                spans.append((start, start + len(w), PUNCT_MARK, -1))
            else:
                spans.append((start, start + len(w), marker, pos if is_list else -1))
                if is_list:
                    pos += 1
    return text, spans


def _list_words(nouns: list[str]) -> list[str]:
    out = []
    for i, n in enumerate(nouns):
        out.append(n)  # one word span per noun, even a multi-word one, so list positions stay aligned
        out.append("," if i < len(nouns) - 1 else ".")
    return out


def intervening_text(sentences: list[str], n_words: int) -> list[str]:
    """Whole sentences, in order, until at least ``n_words`` words (0 -> none)."""
    out: list[str] = []
    count = 0
    for s in sentences:
        if count >= n_words:
            break
        out.append(s)
        count += len(s.split())
    return out


def _second_list(cond: str, lists: list[list[str]], i: int, n: int, seed: int) -> list[str]:
    first = lists[i][:n]
    if cond == "repeat":
        return list(first)
    if cond == "permute":
        rng = np.random.default_rng([seed, i, n, VERBATIM_PERMUTE])
        if len(set(first)) < 2:
            return list(first)
        while True:  # re-permute until the order differs (Armeni et al.)
            perm = [first[j] for j in rng.permutation(n)]
            if perm != first:
                return perm
    # control: the list at the same shift of the next base list, i.e. novel nouns
    j = (i + SHIFTS) % len(lists)
    return list(lists[j][:n])


def load_rnn_inputs(path: str | Path, sid_start: int = 0) -> list[Stimulus]:
    """Stimuli from one of Armeni et al.'s prebuilt input files plus its markers file.

    ``path`` is e.g. ``categorized_lists_sce1_repeat.txt``: one stimulus per line,
    words separated by single spaces (NLTK-tokenized). Beside it,
    ``categorized_lists_sce1_repeat_markers.txt`` is a TSV with header
    ``stimid, markers, list_len, prompt_len``; ``markers`` is a list with one
    code per space-separated word (0 preface, 1 list 1, 2 intervening + cue,
    3 list 2). The text is used exactly as stored. List positions count the
    non-punctuation words of each list. ``vignette`` is the file stem without
    its condition (e.g. ``categorized_lists_sce1``), ``intervening`` the
    ``prompt_len`` key (1-5) and ``condition`` the stem's last part.
    """
    p = Path(path)
    mp = p.with_name(p.stem + "_markers" + p.suffix)
    for f in (p, mp):
        if not f.is_file():
            raise DataError(f"{f}: verbatim input file not found")
    lines = p.read_text(encoding="utf-8").splitlines()
    rows = mp.read_text(encoding="utf-8").splitlines()
    if not rows or rows[0].split("\t")[:4] != ["stimid", "markers", "list_len", "prompt_len"]:
        raise DataError(f"{mp}:1: expected the header 'stimid<TAB>markers<TAB>list_len<TAB>prompt_len'")
    rows = [r for r in rows[1:] if r.strip()]
    lines = [ln for ln in lines if ln.strip()]
    if len(rows) != len(lines):
        raise DataError(f"{mp}: {len(rows)} marker rows for {len(lines)} lines in {p.name}")
    stem = p.stem
    condition = stem.rsplit("_", 1)[-1] if "_" in stem else "repeat"
    vignette = stem.rsplit("_", 1)[0] if "_" in stem else stem
    out = []
    for k, (text, row) in enumerate(zip(lines, rows)):
        where = f"{mp}:{k + 2}"
        cols = row.split("\t")
        try:
            stimid, markers, list_len, prompt_len = int(cols[0]), ast.literal_eval(cols[1]), int(cols[2]), int(cols[3])
        except (ValueError, SyntaxError, IndexError):
            raise DataError(f"{where}: cannot parse marker row {row[:80]!r}") from None
        words = text.split(" ")
        if not isinstance(markers, list) or len(markers) != len(words):
            raise DataError(f"{where}: {len(markers) if isinstance(markers, list) else '?'} markers for "
                            f"{len(words)} words on line {k + 1} of {p.name}")
        spans, pos, at = [], {LIST1: 0, LIST2: 0}, 0
        lists: dict[int, list[str]] = {LIST1: [], LIST2: []}
        for w, m in zip(words, markers):
            m = int(m)
            if w and all(ch in PUNCT for ch in w):
                spans.append((at, at + len(w), PUNCT_MARK, -1))
            elif m in (LIST1, LIST2):
                spans.append((at, at + len(w), m, pos[m]))
                pos[m] += 1
                lists[m].append(w)
            else:
                spans.append((at, at + len(w), m, -1))
            at += len(w) + 1
        if pos[LIST1] != list_len or pos[LIST2] != list_len:
            raise DataError(f"{where}: list_len {list_len} but the markers hold {pos[LIST1]} and {pos[LIST2]} list words")
        out.append(Stimulus(sid_start + k, text, spans, vignette, prompt_len, list_len, condition, stimid,
                            lists[LIST1], lists[LIST2]))
    return out


def build_stimuli(cfg: VerbatimConfig) -> list[Stimulus]:
    """All stimuli for ``cfg``: vignettes x intervening lengths x list lengths x conditions x lists."""
    if cfg.source == "rnn_inputs":
        out: list[Stimulus] = []
        for f in cfg.input_files:
            out += load_rnn_inputs(f, sid_start=len(out))
        out = [s for s in out if s.list_len in cfg.list_lengths]
        if cfg.n_lists is not None:  # first n stimuli per (file, list length, prompt length) group
            seen: dict[tuple, int] = {}
            kept = []
            for s in out:
                key = (s.vignette, s.condition, s.list_len, s.intervening)
                seen[key] = seen.get(key, 0) + 1
                if seen[key] <= cfg.n_lists:
                    kept.append(s)
            out = kept
        return out
    vigs = load_vignettes(cfg.vignettes_path)
    for i, v in enumerate(cfg.vignettes):
        if v not in vigs:
            raise ConfigError(f"vignettes[{i}]", f"unknown vignette {v!r} (known: {', '.join(sorted(vigs))})")
    if cfg.source == "file":
        by_len = load_noun_lists(cfg.lists_path, cfg.list_kind)
        missing = [n for n in cfg.list_lengths if n not in by_len]
        if missing:
            raise DataError(f"{cfg.lists_path}: no lists of length {missing} (has {sorted(by_len)})")
    else:
        ten = builtin_lists(cfg.list_kind, cfg.n_base_lists, cfg.seed)
        by_len = {n: [lst[:n] for lst in ten] for n in cfg.list_lengths}
    out = []
    sid = 0
    for vname in cfg.vignettes:
        v = vigs[vname]
        pre = _words(v["preface"])
        cue = _words(v["cue"])
        for iw in cfg.intervening_words:
            inter = [w for s in intervening_text(v["intervening"], iw) for w in _words(s)]
            for n in cfg.list_lengths:
                lists = by_len[n]
                k = len(lists) if cfg.n_lists is None else min(cfg.n_lists, len(lists))
                for cond in cfg.conditions:
                    for i in range(k):
                        l1 = list(lists[i])
                        l2 = _second_list(cond, lists, i, n, cfg.seed)
                        text, spans = _assemble(
                            [(pre, PREFACE, False), (_list_words(l1), LIST1, True),
                             (inter + cue, INTERVENING, False), (_list_words(l2), LIST2, True)],
                            cfg.spacing,
                        )
                        out.append(Stimulus(sid, text, spans, vname, iw, n, cond, i, l1, l2))
                        sid += 1
    return out


# ----------------------------------------------------------------------------- scoring


def token_nlls(model, batches_of_ids: list[list[int]], batch_size: int, pad_id: int) -> list[np.ndarray]:
    """Next-token NLL (nats, fp32) per token; entry 0 of each sequence is NaN (nothing predicts it).

    Sequences are right-padded within a batch, so every real token sees exactly
    the same context and positions as when scored alone (batch-size independent).
    """
    import torch

    device = next(model.parameters()).device if any(True for _ in model.parameters()) else torch.device("cpu")
    order = sorted(range(len(batches_of_ids)), key=lambda i: -len(batches_of_ids[i]))
    out: list[np.ndarray | None] = [None] * len(batches_of_ids)
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            idx = order[s: s + batch_size]
            L = max(len(batches_of_ids[i]) for i in idx)
            ids = torch.full((len(idx), L), pad_id, dtype=torch.long)
            att = torch.zeros((len(idx), L), dtype=torch.long)
            for r, i in enumerate(idx):
                seq = batches_of_ids[i]
                ids[r, : len(seq)] = torch.tensor(seq, dtype=torch.long)
                att[r, : len(seq)] = 1
            logits = model(input_ids=ids.to(device), attention_mask=att.to(device)).logits
            logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            nll = -logp.gather(-1, ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1).cpu().numpy()
            for r, i in enumerate(idx):
                n = len(batches_of_ids[i])
                out[i] = np.concatenate([[np.nan], nll[r, : n - 1]]).astype(np.float64)
    return out  # type: ignore[return-value]


def _token_words(text: str, spans, offsets) -> list[int]:
    """Word index per token by majority character overlap (-1: no word, e.g. a space or special token).

    Word spans are sorted and disjoint, so each token's candidate words are found
    by bisection; ties go to the earlier word.
    """
    starts = [a for a, _, _, _ in spans]
    res = []
    for a, b in offsets:
        best, best_len = -1, 0
        if b > a:
            w = max(0, bisect.bisect_right(starts, a) - 1)
            while w < len(spans) and spans[w][0] < b:
                ov = min(b, spans[w][1]) - max(a, spans[w][0])
                if ov > best_len:
                    best, best_len = w, ov
                w += 1
        res.append(best)
    return res


def _ratio(l1: float, l2: float) -> tuple[float, float]:
    x_perc = l2 / l1 * 100 if l1 > 0 else math.nan
    x_del = (l2 - l1) / (l2 + l1) if (l2 + l1) > 0 else math.nan
    return x_perc, x_del


def stimulus_metrics(stim: Stimulus, offsets: list[tuple[int, int]], nll: np.ndarray, skip_first: bool = False) -> dict:
    """Token-mean (verify-ppt) and word-sum (Armeni) metrics for one scored stimulus."""
    text = stim.text
    tw = _token_words(text, stim.spans, offsets)
    tok1, tok2, full = [], [], []
    w1 = np.zeros(stim.list_len)
    w2 = np.zeros(stim.list_len)
    c1 = np.zeros(stim.list_len, dtype=int)
    c2 = np.zeros(stim.list_len, dtype=int)
    for t in range(1, len(offsets)):
        a, b = offsets[t]
        piece = text[a:b].strip()
        if not piece or all(ch in PUNCT for ch in piece) or tw[t] < 0 or not math.isfinite(nll[t]):
            continue
        _, _, marker, pos = stim.spans[tw[t]]
        if marker == PUNCT_MARK:
            continue
        full.append(nll[t])
        if marker == LIST1:
            tok1.append(nll[t])
            w1[pos] += nll[t]
            c1[pos] += 1
        elif marker == LIST2:
            tok2.append(nll[t])
            w2[pos] += nll[t]
            c2[pos] += 1
    row: dict[str, Any] = {
        "id": stim.sid, "vignette": stim.vignette, "intervening": stim.intervening, "list_len": stim.list_len,
        "condition": stim.condition, "list_index": stim.list_index,
        "n_tokens_list1": len(tok1), "n_tokens_list2": len(tok2),
    }
    if not tok1 or not tok2:
        row["valid"] = False
        return row
    l1, l2 = float(np.mean(tok1)), float(np.mean(tok2))
    xp, xd = _ratio(l1, l2)
    pos1 = np.where(c1 > 0, w1, np.nan)
    pos2 = np.where(c2 > 0, w2, np.nan)
    sel = slice(1, None) if (skip_first and stim.list_len > 1) else slice(None)
    wl1 = float(np.nanmean(pos1[sel])) if np.isfinite(pos1[sel]).any() else math.nan
    wl2 = float(np.nanmean(pos2[sel])) if np.isfinite(pos2[sel]).any() else math.nan
    wxp, wxd = _ratio(wl1, wl2)
    row.update({
        "valid": True,
        "nll_list1": l1, "nll_list2": l2, "x_perc": xp, "x_del": xd, "retrieval_success": float(l2 < l1),
        "coarse_nll_full": float(np.mean(full)),
        "word_list1": wl1, "word_list2": wl2, "word_x_perc": wxp, "word_x_del": wxd,
        "word_pos_list1": [None if not math.isfinite(x) else float(x) for x in pos1],
        "word_pos_list2": [None if not math.isfinite(x) else float(x) for x in pos2],
    })
    return row


def _nanmean(xs) -> float:
    a = np.asarray([x for x in xs if x is not None], dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else math.nan


def summarise(rows: list[dict], conditions: list[str], resamples: int = 10000, seed: int = 12345) -> tuple[dict, dict]:
    """Scalar metrics and extra tables from per-stimulus rows.

    Headline names (``x_perc``, ``nll_list1``, ...) are for the first condition;
    every condition also gets ``<condition>/...``. Breakdowns: ``x_perc/n<len>``,
    ``x_perc/int<words>``; Armeni word-level: ``armeni/x_perc_median``,
    ``armeni/x_perc_ci_lo``/``_ci_hi``, ``armeni/x_perc_mad``.
    """
    metrics: dict[str, float] = {}
    extra: dict[str, Any] = {"positions": {}, "by_group": []}
    keys = ("nll_list1", "nll_list2", "x_perc", "x_del", "retrieval_success", "coarse_nll_full")
    for ci, cond in enumerate(conditions):
        rs = [r for r in rows if r["condition"] == cond and r.get("valid")]
        prefixes = ([""] if ci == 0 else []) + [f"{cond}/"]
        block: dict[str, float] = {}
        if rs:
            for k in keys:
                block[k] = _nanmean(r[k] for r in rs)
            for n in sorted({r["list_len"] for r in rs}):
                sub = [r for r in rs if r["list_len"] == n]
                block[f"x_perc/n{n}"] = _nanmean(r["x_perc"] for r in sub)
                block[f"retrieval_success/n{n}"] = _nanmean(r["retrieval_success"] for r in sub)
            for iw in sorted({r["intervening"] for r in rs}):
                sub = [r for r in rs if r["intervening"] == iw]
                block[f"x_perc/int{iw}"] = _nanmean(r["x_perc"] for r in sub)
            vigs = sorted({r["vignette"] for r in rs})
            if len(vigs) > 1:
                for vg in vigs:
                    block[f"x_perc/vignette/{vg}"] = _nanmean(r["x_perc"] for r in rs if r["vignette"] == vg)
            wx = np.asarray([r["word_x_perc"] for r in rs], dtype=np.float64)
            wx = wx[np.isfinite(wx)]
            if wx.size:
                block["armeni/x_perc_median"] = float(np.median(wx))
                lo, hi = bootstrap_ci(wx, n_resamples=resamples, seed=seed, stat="median")
                block["armeni/x_perc_ci_lo"], block["armeni/x_perc_ci_hi"] = lo, hi
                block["armeni/x_perc_mad"] = mad(wx)
            block["n_stimuli"] = float(len(rs))
            pos = {}
            for n in sorted({r["list_len"] for r in rs}):
                sub = [r for r in rs if r["list_len"] == n]
                pos[f"n{n}"] = {
                    "list1": [_nanmean(r["word_pos_list1"][p] for r in sub) for p in range(n)],
                    "list2": [_nanmean(r["word_pos_list2"][p] for r in sub) for p in range(n)],
                }
            extra["positions"][cond] = pos
            for n in sorted({r["list_len"] for r in rs}):
                for iw in sorted({r["intervening"] for r in rs}):
                    sub = [r for r in rs if r["list_len"] == n and r["intervening"] == iw]
                    if sub:
                        xs = np.asarray([r["x_perc"] for r in sub], dtype=np.float64)
                        extra["by_group"].append({
                            "condition": cond, "list_len": n, "intervening": iw, "n": len(sub),
                            "x_perc": float(np.nanmean(xs)),
                            "x_perc_sd": float(np.nanstd(xs, ddof=1)) if len(sub) > 1 else None,
                            "retrieval_success": _nanmean(r["retrieval_success"] for r in sub),
                            "nll_list1": _nanmean(r["nll_list1"] for r in sub),
                            "nll_list2": _nanmean(r["nll_list2"] for r in sub),
                        })
        for p in prefixes:
            for k, v in block.items():
                metrics[p + k] = v
    return metrics, extra


@EVALUATORS.register("verbatim", config=VerbatimConfig)
class VerbatimEvaluator(Evaluator):
    """Verbatim retrieval (repeat surprisal) of noun lists, token-mean and Armeni word-sum scores."""

    version = "1"
    # surprisals and the repeat/first-list ratio and difference: lower = more verbatim memory
    lower_is_better = ("*nll*", "*x_perc*", "*x_del*")
    higher_is_better = ("*retrieval_success*",)
    # no verbatim memory: list 2 as surprising as list 1 (x_perc 100, x_del 0, a coin flip on which list is the
    # more surprising). Only about so: list 2 has more context before it; the control condition measures that.
    chance = {**{p: 100.0 for p in ("x_perc", "x_perc/*", "*/x_perc", "*/x_perc/*", "word_x_perc", "*/word_x_perc")},
              **{p: 0.0 for p in ("x_del", "*/x_del")},
              **{p: 0.5 for p in ("retrieval_success", "retrieval_success/*", "*/retrieval_success",
                                  "*/retrieval_success/*")}}

    def setup(self) -> str:
        cfg: VerbatimConfig = self.cfg
        if cfg.source == "rnn_inputs":
            what = "published input files (Armeni et al.)"
        elif cfg.source == "file":
            what = "published noun lists with our vignettes"
        else:
            what = "our own stimuli (offline; not comparable with the papers' numbers)"
        return f"preset {cfg.preset}: {what}"

    def evaluate(self, model, tokenizer) -> EvalResult:
        cfg: VerbatimConfig = self.cfg
        stims = build_stimuli(cfg)
        enc = tokenizer([s.text for s in stims], add_special_tokens=True, return_offsets_mapping=True)
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (bos or 0)
        limit = cfg.max_length or max_positions(model)
        seqs, offs, skipped, truncated = [], [], [], 0
        keep = []
        for k, s in enumerate(stims):
            ids = list(enc["input_ids"][k])
            off = [tuple(o) for o in enc["offset_mapping"][k]]
            if cfg.add_bos and bos is not None and (not ids or ids[0] != bos):
                ids, off = [bos] + ids, [(0, 0)] + off
            if limit is not None and len(ids) > limit:
                # Drop tokens from the left, but only while the first list-1 token keeps some context.
                first_l1 = next(a for a, _, m, _ in s.spans if m == LIST1)
                cut = len(ids) - limit
                first_tok = next(t for t, (a, b) in enumerate(off) if b > first_l1)
                if first_tok - cut < 1:
                    skipped.append(s.sid)
                    continue
                ids, off = ids[cut:], off[cut:]
                truncated += 1
            seqs.append(ids)
            offs.append(off)
            keep.append(s)
        was_training = model.training
        model.eval()
        try:
            nlls = token_nlls(model, seqs, cfg.batch_size, pad)
        finally:
            model.train(was_training)
        rows = [stimulus_metrics(s, o, n, cfg.armeni_skip_first) for s, o, n in zip(keep, offs, nlls)]
        # rnn_inputs files carry their own condition; summarise any the config did not list, after it
        conds = list(cfg.conditions) + sorted({r["condition"] for r in rows} - set(cfg.conditions))
        metrics, extra = summarise(rows, conds, cfg.bootstrap_resamples, cfg.seed)
        metrics["n_skipped"] = float(len(skipped))
        extra.update({"preset": cfg.preset, "setup": self.setup(),
                      "n_stimuli": len(stims), "n_scored": len(rows), "n_truncated": truncated,
                      "skipped_ids": skipped[:100], "example": stims[0].text if stims else None})
        return EvalResult(metrics=metrics, items=rows, extra=extra)
