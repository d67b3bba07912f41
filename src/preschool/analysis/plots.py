"""Report figures: metric-vs-tokens curves, per-phenomenon bars, verbatim position curves.

All figures use matplotlib's non-interactive Agg backend (no display needed)
and are written atomically as PNG, so a crash never leaves a truncated image
under the final name. Each function returns the path it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, DataError
from ..io import atomic_path


def new_figure(figsize=(6.4, 4.0)):
    """A bare Agg figure: the one figure helper of the project (reports, compartments, audit)."""
    # An Agg canvas attached to a bare Figure (no pyplot): the caller's global backend and
    # pyplot figure list are never touched, and figures are freed with their last reference.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, path: str | Path) -> Path:
    """Lay out and write ``fig`` as PNG at ``path`` atomically; returns ``path``."""
    path = Path(path)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    return path


def _is_pair_list(x: Any) -> bool:
    """A single curve: a (possibly empty) sequence of (tokens, value) pairs."""
    if len(x) == 0:
        return True
    first = x[0]
    return np.ndim(first) == 1 and len(first) == 2 and np.ndim(first[0]) == 0


def _seed_curves(arm: str, curve: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """Normalise one arm's curve(s) to a list of sorted (tokens, values) arrays, one per seed."""
    seeds = [curve] if _is_pair_list(curve) else list(curve)
    out = []
    for i, c in enumerate(seeds):
        if len(c) == 0:
            continue
        if not _is_pair_list(c):
            raise DataError(f"curves[{arm!r}][{i}]: expected a list of (tokens, value) pairs")
        arr = np.asarray(c, dtype=np.float64)
        arr = arr[np.argsort(arr[:, 0], kind="stable")]
        out.append((arr[:, 0], arr[:, 1]))
    return out


def plot_metric_vs_tokens(
    curves: Mapping[str, Any],
    path: str | Path,
    title: str = "",
    ylabel: str = "",
    xlabel: str = "tokens",
    band: str = "minmax",
    logx: bool = False,
    ylim: tuple[float, float] | None = None,
    chance: float | None = None,
) -> Path:
    """One line per arm; with several seeds the line is the seed mean and a band spans the seeds.

    ``ylim`` fixes the value axis (e.g. to keep the first, very high losses from
    flattening the part of the curves where arms differ). ``chance``: the metric's
    chance level, drawn as a dashed grey line (an accuracy at it has learnt nothing).

    ``curves``: ``{arm: [(tokens, value), ...]}`` or ``{arm: [[(tokens, value), ...], ...]}``
    (one list per seed). At each token count the seeds that have it are pooled.
    ``band``: ``minmax`` (range over seeds), ``sd`` (mean ± SD) or ``none``.
    """
    if band not in ("minmax", "sd", "none"):
        raise ConfigError("band", f"must be 'minmax', 'sd' or 'none', got {band!r}")
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    drawn = 0
    for arm, curve in curves.items():
        seeds = _seed_curves(arm, curve)
        if not seeds:
            continue
        xs = np.unique(np.concatenate([t for t, _ in seeds]))
        grid = np.full((len(seeds), xs.size), np.nan)
        for i, (t, v) in enumerate(seeds):
            grid[i, np.searchsorted(xs, t)] = v
        mean = np.nanmean(grid, axis=0)
        (line,) = ax.plot(xs, mean, marker="o" if xs.size <= 30 else None, ms=3, label=f"{arm} (n={len(seeds)})"
                          if len(seeds) > 1 else arm)
        if len(seeds) > 1 and band != "none":
            if band == "minmax":
                lo, hi = np.nanmin(grid, axis=0), np.nanmax(grid, axis=0)
            else:
                sd = np.nanstd(grid, axis=0, ddof=0)
                lo, hi = mean - sd, mean + sd
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        drawn += 1
    if drawn == 0:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    if chance is not None:
        ax.axhline(chance, color="grey", linewidth=0.8, linestyle="--", label=f"chance ({chance:g})")
    if logx:
        ax.set_xscale("log")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_phenomenon_bars(
    acc: Mapping[str, Mapping[str, Any]],
    path: str | Path,
    title: str = "",
    ylabel: str = "accuracy",
    chance: float | None = 0.5,
) -> Path:
    """Grouped bars: phenomena on the x axis, one bar per arm.

    ``acc``: ``{arm: {phenomenon: accuracy}}``; a value may also be a list of
    per-seed accuracies, drawn as the mean with a min-max error bar.
    ``chance`` draws a dashed reference line (None: none).
    """
    arms = list(acc)
    phen = sorted({p for a in arms for p in acc[a]})
    fig = new_figure(figsize=(max(6.4, 0.55 * len(phen) * max(1, len(arms)) / 2 + 2), 4.5))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(arms))
    x = np.arange(len(phen))
    for j, arm in enumerate(arms):
        means, lo, hi = [], [], []
        for p in phen:
            v = acc[arm].get(p)
            vals = np.atleast_1d(np.asarray(v if v is not None else np.nan, dtype=np.float64))
            m = float(np.nanmean(vals)) if np.isfinite(vals).any() else np.nan
            means.append(m)
            lo.append(m - np.nanmin(vals) if np.isfinite(vals).any() else 0.0)
            hi.append(np.nanmax(vals) - m if np.isfinite(vals).any() else 0.0)
        has_err = any(e > 0 for e in lo + hi)
        ax.bar(x + (j - (len(arms) - 1) / 2) * width, means, width, label=arm,
               yerr=[lo, hi] if has_err else None, capsize=2 if has_err else 0)
    if chance is not None:
        ax.axhline(chance, color="gray", linestyle="--", linewidth=1)
    ax.set_xticks(x)
    ax.set_xticklabels(phen, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if arms:
        ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def plot_verbatim_positions(
    positions: Mapping[str, Mapping[str, Sequence[float]]],
    path: str | Path,
    title: str = "",
    ylabel: str = "surprisal (nats)",
) -> Path:
    """Surprisal by list position: list 1 dashed, list 2 solid, one colour per arm.

    ``positions``: ``{arm: {"list1": [...], "list2": [...]}}``, the per-position
    mean word surprisal the ``verbatim`` evaluator stores in
    ``extra["positions"]["n<len>"]`` (x = list position, 1-based). A drop from
    the dashed to the solid line is verbatim retrieval.
    """
    fig = new_figure()
    ax = fig.add_subplot(1, 1, 1)
    drawn = 0
    for arm, curves in positions.items():
        if "list1" not in curves or "list2" not in curves:
            raise DataError(f"positions[{arm!r}]: needs 'list1' and 'list2' per-position values")
        l1 = np.asarray(curves["list1"], dtype=np.float64)
        l2 = np.asarray(curves["list2"], dtype=np.float64)
        (line,) = ax.plot(np.arange(1, l2.size + 1), l2, marker="o", ms=3, label=f"{arm}: list 2")
        ax.plot(np.arange(1, l1.size + 1), l1, linestyle="--", marker="x", ms=3, color=line.get_color(),
                label=f"{arm}: list 1")
        drawn += 1
    if drawn == 0:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("list position")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
    return save_figure(fig, path)
