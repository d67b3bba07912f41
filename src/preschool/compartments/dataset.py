"""Write compartmented shard sets from a plain shard set (training rows + per-compartment val).

``write_compartmented`` turns a shard set over a base vocabulary V into the
compartmented training set of Howe & Wingate: output row r reads source row
``r mod S`` (sequentially, as the paper's loader, so plain rows of different
compartments carry *different* text), and the plan decides whether it becomes a
plain row in compartment i (every id shifted, loss mask and segments kept) or a
translation row i -> j built from that row's first tokens
(``compartments.translation``). The output folder is an ordinary shard set
(vocabulary ``pres.vocab_size``) plus ``plan.npy``; the manifest's
``compartments`` block records the presentation, plan config, counts, the plan's
sha256 and how many passes over the source were made.

``write_compartment_val`` writes one val shard set per compartment with the
*same* rows in each, so per-compartment losses are directly comparable.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ..config import check, to_dict, validate as validate_config
from ..data.shards import ShardSet, ShardWriter
from ..errors import DataError
from ..io import read_json, sha256_file, write_json
from ..layout import MANIFEST
from .presentation import PRESENTATIONS, Presentation, PresentationConfig
from .plan import PLAN_FILE, PlanConfig, load_plan, make_plan, plan_manifest, save_plan
from .translation import TranslationConfig, min_row_len, span_length, translation_rows


@dataclass
class CompartmentsConfig:
    """A compartmented presentation of one dataset (the ``compartments:`` block of a YAML)."""

    n_compartments: int = 2
    presentation: Literal["offset", "permute"] = "offset"
    shares: str | list[float] = "equal"
    translation: TranslationConfig = field(default_factory=TranslationConfig)
    seed: int = 0

    def validate(self) -> None:
        check(self.n_compartments >= 1, "n_compartments", f"must be >= 1, got {self.n_compartments}")
        self.plan_config()  # validates shares / translation fraction

    def plan_config(self) -> PlanConfig:
        cfg = PlanConfig(self.n_compartments, self.shares, self.translation.fraction, self.translation.mode, self.seed)
        validate_config(cfg)
        return cfg

    def record(self) -> dict:
        """Plain dict for manifests and cache keys (``to_dict``, with the translation block's own
        record, so a standard-format config records exactly what it did before row formats existed)."""
        d = to_dict(self)
        d["translation"] = self.translation.record()
        return d

    def build_presentation(self, base_vocab: int) -> Presentation:
        return PRESENTATIONS.build(self.presentation, {"n_compartments": self.n_compartments,
                                                       "base_vocab": base_vocab, "seed": self.seed},
                                   field="presentation")


def _read_rows(src: ShardSet, idx: np.ndarray, name: str) -> np.ndarray:
    """Rows ``idx`` (sorted or not) of array ``name`` as int64 (vectorised per shard)."""
    out = np.empty((len(idx), src.row_len), np.int64)
    starts = src._starts
    shard_of = np.searchsorted(starts, idx, side="right") - 1
    for k in np.unique(shard_of):
        sel = shard_of == k
        shard = src._shards[int(k)]
        out[sel] = shard.arrays[name][idx[sel] - shard.start]
    return out


def write_compartmented(src: str | Path | ShardSet, out: str | Path, cfg: CompartmentsConfig,
                        n_rows: int | None = None, chunk_rows: int = 8192, progress: bool = False) -> dict:
    """Write the compartmented training set of ``src`` to ``out``; returns the manifest."""
    src = src if isinstance(src, ShardSet) else ShardSet(src)
    S = len(src)
    if S == 0:
        raise DataError(f"{src.path}: source shard set has no rows")
    n = S if n_rows is None else int(n_rows)
    pres = cfg.build_presentation(src.vocab_size)
    pcfg = cfg.plan_config()
    tcfg = cfg.translation
    if pcfg.effective_translation_fraction > 0 and src.row_len < min_row_len(tcfg.row_format, tcfg.chunk_size):
        raise DataError(f"{src.path}: row_len {src.row_len} too short for translation rows"
                        + ("" if tcfg.row_format == "standard" else
                           f" (interleaved, chunk_size {tcfg.chunk_size}: needs >= "
                           f"{min_row_len(tcfg.row_format, tcfg.chunk_size)})"))
    plan = make_plan(pcfg, n)
    has_mask = src.has_loss_mask
    has_seg = "segments" in src.array_names
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, unit="row", desc=f"compartments c={cfg.n_compartments}")
    out = Path(out)
    with ShardWriter(out, src.row_len, pres.vocab_size, arrays=["loss_mask", "segments"]) as w:
        for a in range(0, n, chunk_rows):
            b = min(n, a + chunk_rows)
            idx = np.arange(a, b) % S
            base = _read_rows(src, idx, "tokens")
            mask = _read_rows(src, idx, "loss_mask").astype(np.uint8) if has_mask else np.ones_like(base, np.uint8)
            seg = _read_rows(src, idx, "segments").astype(np.uint16) if has_seg else np.zeros_like(base, np.uint16)
            ps, pd = plan.src[a:b], plan.dst[a:b]
            toks = np.empty_like(base)
            for i in range(cfg.n_compartments):
                sel = (ps == i) & (pd < 0)
                if sel.any():
                    toks[sel] = pres.encode(base[sel], i)
            tsel = pd >= 0
            if tsel.any():
                m = span_length(src.row_len, tcfg.row_format, tcfg.chunk_size)
                t_toks, t_mask = translation_rows(base[tsel, :m], pres, ps[tsel], pd[tsel], src.row_len,
                                                  tcfg.loss_on, tcfg.row_format, tcfg.chunk_size)
                toks[tsel], mask[tsel], seg[tsel] = t_toks, t_mask, 0
            w.add_rows(toks, loss_mask=mask, segments=seg)
            if bar is not None:
                bar.update(b - a)
        if bar is not None:
            bar.close()
        manifest = w.close(
            source={"kind": "compartments", "path": str(src.path), "n_rows": S,
                    "manifest_sha256": _manifest_hash(src)},
            compartments={
                "config": cfg.record(),
                "presentation": pres.manifest(),
                "plan": plan_manifest(pcfg, plan),
                "plan_file": PLAN_FILE,
                "plan_sha256": _plan_sha(plan),
                "source_passes": n / S,
            },
        )
    save_plan(plan, out / PLAN_FILE)
    return manifest


def _plan_sha(plan) -> str:
    arr = np.stack([plan.src, plan.dst], axis=1).astype(np.int16)
    return hashlib.sha256(arr.tobytes()).hexdigest()


def _manifest_hash(src: ShardSet) -> str:
    return sha256_file(src.path / MANIFEST)


def read_plan(shard_dir: str | Path):
    """The plan stored with a compartmented shard set, verified against the manifest."""
    shard_dir = Path(shard_dir)
    man = read_json(shard_dir / MANIFEST)
    info = man.get("compartments")
    if not info:
        raise DataError(f"{shard_dir}: not a compartmented shard set (no 'compartments' in manifest)")
    plan = load_plan(shard_dir / info["plan_file"])
    if _plan_sha(plan) != info["plan_sha256"]:
        raise DataError(f"{shard_dir / info['plan_file']}: plan does not match the manifest checksum")
    return plan


def write_compartment_val(src: str | Path | ShardSet, out_dir: str | Path, cfg: CompartmentsConfig,
                          max_rows: int | None = None) -> dict[str, Path]:
    """One val shard set per compartment (``out_dir/c<i>``), each the same rows shifted; returns name -> path."""
    src = src if isinstance(src, ShardSet) else ShardSet(src)
    pres = cfg.build_presentation(src.vocab_size)
    n = len(src) if max_rows is None else min(len(src), max_rows)
    if n == 0:
        raise DataError(f"{src.path}: val shard set has no rows")
    idx = np.arange(n)
    base = _read_rows(src, idx, "tokens")
    mask = _read_rows(src, idx, "loss_mask").astype(np.uint8) if src.has_loss_mask else np.ones_like(base, np.uint8)
    seg = (_read_rows(src, idx, "segments").astype(np.uint16) if "segments" in src.array_names
           else np.zeros_like(base, np.uint16))
    paths = {}
    for i in range(cfg.n_compartments):
        p = Path(out_dir) / f"c{i}"
        with ShardWriter(p, src.row_len, pres.vocab_size, arrays=["loss_mask", "segments"]) as w:
            w.add_rows(pres.encode(base, i), loss_mask=mask, segments=seg)
            w.close(source={"kind": "compartment_val", "path": str(src.path), "compartment": i},
                    compartments={"config": cfg.record(), "presentation": pres.manifest(), "compartment": i})
        paths[f"c{i}"] = p
    write_json(Path(out_dir) / "compartments.json",
               {"presentation": pres.manifest(), "sets": {k: str(v) for k, v in paths.items()}})
    return paths


def write_translation_val(src: str | Path | ShardSet, out: str | Path, cfg: CompartmentsConfig,
                          max_rows: int | None = None) -> Path:
    """Val set of translation rows (loss on the target side only): row r uses ordered pair r mod c(c-1).

    Scores the translation task itself (the paper's ``loss_target_compartment_i > compartment_j``),
    averaged over all ordered pairs, in the arm's ``translation.row_format`` (interleaved: loss on
    the compartment-j chunks).
    """
    src = src if isinstance(src, ShardSet) else ShardSet(src)
    c = cfg.n_compartments
    if c < 2:
        raise DataError("translation val rows need n_compartments >= 2")
    pres = cfg.build_presentation(src.vocab_size)
    n = len(src) if max_rows is None else min(len(src), max_rows)
    pairs = np.array([(i, j) for i in range(c) for j in range(c) if i != j])
    pick = pairs[np.arange(n) % len(pairs)]
    tcfg = cfg.translation
    base = _read_rows(src, np.arange(n), "tokens")[:, :span_length(src.row_len, tcfg.row_format, tcfg.chunk_size)]
    toks, mask = translation_rows(base, pres, pick[:, 0], pick[:, 1], src.row_len, "target",
                                  tcfg.row_format, tcfg.chunk_size)
    with ShardWriter(out, src.row_len, pres.vocab_size, arrays=["loss_mask", "segments"]) as w:
        w.add_rows(toks, loss_mask=mask, segments=np.zeros_like(toks, np.uint16))
        w.close(source={"kind": "translation_val", "path": str(src.path)},
                compartments={"config": cfg.record(), "presentation": pres.manifest(), "loss_on": "target"})
    return Path(out)


__all__ = ["write_translation_val", "CompartmentsConfig", "PresentationConfig", "write_compartmented", "write_compartment_val", "read_plan"]
