"""The evaluator contract.

An evaluator is a config dataclass + a class registered in ``EVALUATORS``.
``evaluate(model, tokenizer, out_dir)`` scores one checkpoint and returns an
:class:`EvalResult`: flat scalar ``metrics`` (names like ``acc``,
``acc/field/syntax``, ``loss/storybook``) plus optional per-item rows written
to ``out_dir/items.jsonl``. ``version`` changes whenever the evaluator's
semantics change, so cached results from an older version are never reused.

``model`` is a Hugging Face causal LM (fp32, eval mode, on its device);
``tokenizer`` a ``transformers`` fast tokenizer. Evaluators must compute
log-probabilities in fp32 and be independent of batch size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..io import provenance, write_json
from ..registry import Registry

EVALUATORS = Registry("evaluator")


@dataclass
class EvalResult:
    metrics: dict[str, float]
    items: list[dict] | None = None  # per-item rows (written as items.jsonl)
    extra: dict[str, Any] = field(default_factory=dict)  # non-scalar summaries (curves, tables)


class Evaluator:
    registry_name: ClassVar[str] = "?"
    version: ClassVar[str] = "1"

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def evaluate(self, model, tokenizer) -> EvalResult:
        raise NotImplementedError

    def setup(self) -> str:
        """One line naming the setup that produced this evaluator's numbers (a preset, the stimuli),
        printed beside them in reports and summaries; "" when there is nothing to choose."""
        return ""

    def run(self, model, tokenizer, out_dir: str | Path | None = None, checkpoint: str | None = None, **prov: Any) -> dict:
        """Evaluate and (if ``out_dir``) write ``summary.json`` + ``items.jsonl`` atomically."""
        import json

        from ..io import atomic_path

        res = self.evaluate(model, tokenizer)
        summary = {
            "evaluator": self.registry_name,
            "version": self.version,
            "checkpoint": checkpoint,
            "metrics": res.metrics,
            "extra": res.extra,
            "setup": self.setup(),
            **provenance(self.cfg, **prov),
        }
        if out_dir is not None:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
            if res.items is not None:
                with atomic_path(out / "items.jsonl") as tmp, open(tmp, "w", encoding="utf-8") as fh:
                    for row in res.items:
                        fh.write(json.dumps(row) + "\n")
            write_json(out / "summary.json", summary)
        return summary


def max_positions(model) -> int | None:
    """The model's context length from its HF config (``max_position_embeddings`` and aliases), if any."""
    cfg = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "n_ctx"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None
