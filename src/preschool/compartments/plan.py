"""The row -> compartment plan, and writing a compartmented shard set from a plain one.

Follows Howe & Wingate (vinhowe/compartmentalization ``src/weights.py``,
``src/assignments.py``): every training row belongs to exactly one category,
either "plain row in compartment i" or "translation row i -> j" (ordered pair,
i != j). Category masses:

- plain compartment i: ``(1 - tr) * w_i`` with ``w`` = ``equal`` (1/c each),
  ``unequal`` (proportional to i + 1, as the paper) or an explicit list;
- translation: ``tr`` spread over unordered pairs i < j proportionally to
  ``w_i * w_j``, half to i -> j and half to j -> i.

``tr`` follows the two conventions of the paper (spec B.4):
``absolute`` - the fraction of rows that are translation rows (preferred);
``compartment`` (legacy) - raw ``tr`` means "as much translation as one
compartment": the reference gives the plain compartments mass ``c`` and
translation mass ``tr``, so the effective fraction is ``tr / (c + tr)``
(equal to ``tr / (c + 1)`` only at ``tr = 1``). Manifests record both.

Counts per category use largest-remainder rounding, so they are exact for the
requested number of rows, and the order is a seeded shuffle
(``default_rng([seed, n_rows, salt])``; the paper uses an affine permutation -
any seeded bijection gives the same marginals). The plan is computed once,
stored beside the shards (``plan.npy``, checksummed in the manifest) and is a
pure function of (config, n_rows), so runs are reproducible and resumable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ..config import check, to_dict
from ..errors import DataError
from ..io import atomic_path, sha256_file
from ..seeds import COMPARTMENT_PLAN

_SALT = COMPARTMENT_PLAN
PLAN_FILE = "plan.npy"


@dataclass
class PlanConfig:
    """Which compartment (or translation pair) each row goes to."""

    n_compartments: int = 2
    shares: str | list[float] = "equal"  # "equal" | "unequal" | explicit weights (normalised)
    translation_fraction: float = 0.0
    translation_mode: Literal["absolute", "compartment"] = "absolute"
    seed: int = 0

    def validate(self) -> None:
        check(self.n_compartments >= 1, "n_compartments", f"must be >= 1, got {self.n_compartments}")
        if isinstance(self.shares, str):
            check(self.shares in ("equal", "unequal"), "shares",
                  f"must be 'equal', 'unequal' or a list of weights, got {self.shares!r}")
        else:
            check(len(self.shares) == self.n_compartments, "shares",
                  f"needs {self.n_compartments} weights (one per compartment), got {len(self.shares)}")
            check(all(w >= 0 for w in self.shares) and sum(self.shares) > 0, "shares",
                  "weights must be >= 0 with a positive sum")
        check(self.translation_fraction >= 0, "translation_fraction", f"must be >= 0, got {self.translation_fraction}")
        check(self.effective_translation_fraction < 1, "translation_fraction",
              f"leaves no plain rows (effective fraction {self.effective_translation_fraction:.3f} >= 1)")
        if self.translation_fraction > 0:
            check(self.n_compartments >= 2, "translation_fraction", "translation rows need n_compartments >= 2")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")

    @property
    def effective_translation_fraction(self) -> float:
        if self.translation_mode == "compartment":
            # The reference normalises masses c (plain) and tr (translation): tr / (c + tr).
            return self.translation_fraction / (self.n_compartments + self.translation_fraction)
        return self.translation_fraction

    def weights(self) -> np.ndarray:
        c = self.n_compartments
        if self.shares == "equal":
            w = np.ones(c)
        elif self.shares == "unequal":
            w = np.arange(1, c + 1, dtype=np.float64)
        else:
            w = np.asarray(self.shares, dtype=np.float64)
        return w / w.sum()


@dataclass
class Plan:
    """``src[r]``: compartment of row r (source side for translation rows);
    ``dst[r]``: target compartment of a translation row, -1 for plain rows."""

    src: np.ndarray
    dst: np.ndarray
    categories: list[tuple[int, int]] = field(default_factory=list)  # (src, dst) per category, dst=-1 plain
    counts: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.src)

    @property
    def is_translation(self) -> np.ndarray:
        return self.dst >= 0

    def summary(self) -> dict:
        return {
            "n_rows": len(self),
            "plain_rows_per_compartment": np.bincount(self.src[~self.is_translation],
                                                      minlength=max(self.src.max(initial=0) + 1, 1)).tolist(),
            "translation_rows": int(self.is_translation.sum()),
            "categories": [{"src": s, "dst": d, "rows": n} for (s, d), n in zip(self.categories, self.counts)],
        }


def largest_remainder(probs: np.ndarray, total: int) -> np.ndarray:
    """Integer counts summing to ``total``, each floor(p*total) plus one for the largest remainders.

    Ties go to the lower index, so the result is deterministic.
    """
    probs = np.asarray(probs, dtype=np.float64)
    probs = probs / probs.sum()
    exact = probs * total
    base = np.floor(exact).astype(np.int64)
    short = total - int(base.sum())
    order = np.lexsort((np.arange(len(probs)), -(exact - base)))  # largest remainder first, then index
    base[order[:short]] += 1
    return base


def category_probs(cfg: PlanConfig) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Categories (src, dst) and their probabilities (see module docstring)."""
    w = cfg.weights()
    tr = cfg.effective_translation_fraction
    cats = [(i, -1) for i in range(cfg.n_compartments)]
    probs = list((1 - tr) * w)
    if tr > 0:
        pairs = [(i, j) for i in range(cfg.n_compartments) for j in range(i + 1, cfg.n_compartments)]
        pw = np.array([w[i] * w[j] for i, j in pairs])
        if pw.sum() <= 0:
            raise DataError("translation rows need at least two compartments with positive share")
        pw = pw / pw.sum()
        for (i, j), p in zip(pairs, pw):
            cats += [(i, j), (j, i)]
            probs += [tr * p / 2, tr * p / 2]
    return cats, np.asarray(probs)


def make_plan(cfg: PlanConfig, n_rows: int) -> Plan:
    """The plan for ``n_rows`` rows: exact largest-remainder counts, seeded order."""
    if n_rows < 0:
        raise DataError(f"n_rows must be >= 0, got {n_rows}")
    cats, probs = category_probs(cfg)
    counts = largest_remainder(probs, n_rows)
    cat_of_row = np.repeat(np.arange(len(cats)), counts)
    order = np.random.default_rng([cfg.seed, n_rows, _SALT]).permutation(n_rows)
    cat_of_row = cat_of_row[order]
    table = np.asarray(cats, dtype=np.int16).reshape(-1, 2)
    return Plan(table[cat_of_row, 0].copy(), table[cat_of_row, 1].copy(), cats, counts.tolist())


def save_plan(plan: Plan, path: str | Path) -> str:
    """Write ``(n_rows, 2)`` int16 [src, dst] as .npy atomically; returns its sha256."""
    arr = np.stack([plan.src, plan.dst], axis=1).astype(np.int16)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, arr)
    return sha256_file(path)


def load_plan(path: str | Path, sha256: str | None = None) -> Plan:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: compartment plan missing")
    if sha256 is not None and sha256_file(path) != sha256:
        raise DataError(f"{path}: checksum mismatch (plan is corrupt)")
    arr = np.load(path)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise DataError(f"{path}: expected an (n, 2) array, got shape {arr.shape}")
    return Plan(arr[:, 0].copy(), arr[:, 1].copy())


def plan_manifest(cfg: PlanConfig, plan: Plan) -> dict:
    return {"config": to_dict(cfg), "effective_translation_fraction": cfg.effective_translation_fraction,
            **plan.summary()}
