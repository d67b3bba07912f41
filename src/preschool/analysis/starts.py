"""Where each arm's runs started, in words, from what their run folders record (issue #47).

A run that starts from other weights (``init_from``: another arm's checkpoint, or a folder) records the
start in its ``config.yaml`` (the resolved ``init_from`` and the weights' ``start_sha256``); a run that
continued another arm's shared prefix has a ``branch.json``. The report names both in its Arms section
and keeps the words in ``results.json`` (``starts``), so a re-render from ``results.json`` alone says the
same. The token axes of a run count its own training from its start: what the start checkpoint had
trained before (its ``meta.json``) is stated, not added. A branch's checkpoints up to its branch point
are its parent's and count from step 0, as the same arm trained from scratch would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import yaml

from .. import layout


def _start_words(init: dict[str, Any], sha: str | None) -> str:
    """One start (an ``init_from`` mapping as config.yaml records it) in words."""
    path = Path(str(init.get("path") or ""))
    meta = path / layout.CKPT_META
    step = json.loads(meta.read_text()).get("step") if meta.is_file() else None
    if init.get("arm"):
        at = f"end of stage {init['stage']}" if init.get("stage") else \
            f"its first checkpoint with {init['pt_tokens']:,} PT tokens" if init.get("pt_tokens") is not None else None
        words = f"arm {init['arm']}'s step {step if step is not None else path.name}" + (f" ({at})" if at else "")
    else:
        words = f"the folder {path}" + (f" (weights sha256 {sha[:16]})" if sha else "")
    if init.get("optimizer") == "keep":
        words += ", AdamW state kept"
    if meta.is_file():
        m = json.loads(meta.read_text())
        words += (f"; the {m.get('tokens', 0):,} tokens ({m.get('pt_tokens', 0):,} PT) trained before it are not "
                  "on this arm's token axes")
    return words


def run_start_words(run_dir: Path) -> str | None:
    """Where the run in ``run_dir`` started, in words (None: from a fresh model, not a branch)."""
    bits = []
    cfg_path = layout.run_config_path(run_dir)
    if cfg_path.is_file():
        rec = yaml.safe_load(cfg_path.read_text()) or {}
        train, shas = rec.get("train") or {}, rec.get("start_sha256") or {}
        if train.get("init_from"):
            bits.append("starts from " + _start_words(train["init_from"], shas.get("init_from")))
        for i, st in enumerate(train.get("stages") or []):
            if st.get("init_from"):
                bits.append(f"stage {st.get('name')} starts from "
                            + _start_words(st["init_from"], shas.get(f"stages[{i}].init_from")))
    branch = Path(run_dir) / "branch.json"
    if branch.is_file():
        b = json.loads(branch.read_text())
        parent = Path(b["parent"])  # <out>/[rungs/<rung>/]arms/<arm>/seed<k>
        bits.append(f"its steps up to {b['step']} are arm {parent.parent.name}'s (a shared prefix, trained once)")
    return "; ".join(bits) or None


def arm_starts(runs: Sequence) -> dict[str, str]:
    """arm -> the words of its first run (in ``runs``' order) that has a start or a branch."""
    out: dict[str, str] = {}
    for rec in runs:
        if rec.arm not in out and (words := run_start_words(rec.run_dir)):
            out[rec.arm] = words
    return out
