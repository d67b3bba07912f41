"""The evaluator contract.

An evaluator is a config dataclass + a class registered in ``EVALUATORS``.
``evaluate(model, tokenizer)`` scores one checkpoint and returns an
:class:`EvalResult`: flat scalar ``metrics`` (names like ``acc``,
``acc/field/syntax``, ``loss/storybook``) plus optional per-item rows;
``run(model, tokenizer, out_dir)`` calls it and writes ``summary.json`` and the
rows as ``items.jsonl`` into ``out_dir``. ``version`` changes whenever the evaluator's
semantics change, so cached results from an older version are never reused.

Each metric's direction is the evaluator's to declare, not the report's to
guess from its name: :meth:`Evaluator.direction` reads the class's
``lower_is_better`` and ``higher_is_better`` patterns (True: higher is better,
False: lower, None: the evaluator declares none), overridden per metric by
``EvalResult.higher_is_better`` when the scoring tool knows it (lm-eval does).
A metric without a declared direction is shown in a report, never judged (no
difference verdict, no token efficiency). Where a metric has a chance level (a
two-way forced choice: 0.5), :meth:`Evaluator.chance_level` gives it from the
class's ``chance`` patterns and the evaluator's params; a report then calls a
comparison whose arms are all within noise of it "not testable at this scale".
:meth:`Evaluator.reported` picks the metrics a report headlines (default:
top-level names, no bookkeeping counts). ``summary.json`` records the direction
(``higher_is_better``: true, false or null) and ``reported`` per metric.

``model`` is a Hugging Face causal LM (fp32, eval mode, on its device);
``tokenizer`` a ``transformers`` fast tokenizer; an evaluator that declares ``plain_decoder`` may get
their plain-PyTorch stand-ins instead (:mod:`._plain_decoder`, the same log-probabilities).
Evaluators must compute log-probabilities in fp32 and be independent of batch size.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..io import atomic_path, provenance, write_json
from ..layout import EVAL_ITEMS, EVAL_SUMMARY
from ..registry import Registry

EVALUATORS = Registry("evaluator", packages=("preschool.evals",), plugin_module="evals")


@dataclass
class EvalResult:
    metrics: dict[str, float]
    items: list[dict] | None = None  # per-item rows (written as items.jsonl)
    extra: dict[str, Any] = field(default_factory=dict)  # non-scalar summaries (curves, tables)
    higher_is_better: dict[str, bool] = field(default_factory=dict)  # per metric, where the scorer knows it


class Evaluator:
    registry_name: ClassVar[str] = "?"
    version: ClassVar[str] = "1"
    # fnmatch patterns of the metrics where lower / higher is better (lower is read first); a metric neither
    # names has no declared direction: reports show it and judge nothing on it
    lower_is_better: ClassVar[tuple[str, ...]] = ()
    higher_is_better: ClassVar[tuple[str, ...]] = ()
    # fnmatch pattern -> the metric's chance level (a two-way forced choice's accuracy: 0.5); none by default
    chance: ClassVar[dict[str, float]] = {}
    # bookkeeping (pair counts, ties, micro-averages beside a macro one): recorded, never compared
    bookkeeping: ClassVar[tuple[str, ...]] = ("n_*", "n", "ties*", "*_micro", "tokens/*")
    # fnmatch patterns of the metrics a report headlines; None: every top-level name (no "/")
    report_patterns: ClassVar[tuple[str, ...] | None] = None
    # True when evaluate() uses only the model's logits (model(input_ids=, attention_mask=, position_ids=,
    # logits_to_keep=).logits, model.config.model_type) and the tokenizer's backend_tokenizer and special ids:
    # the runner may then hand it the checkpoint in plain PyTorch (evals/_plain_decoder.py), without transformers
    plain_decoder: ClassVar[bool] = False

    def __init__(self, cfg: Any):
        self.cfg = cfg

    @classmethod
    def direction(cls, metric: str) -> bool | None:
        """Whether higher is better for ``metric`` by the class's declarations (``lower_is_better`` first, then
        ``higher_is_better``); None when neither names it (``EvalResult.higher_is_better`` overrides both)."""
        if any(fnmatch.fnmatchcase(metric, p) for p in cls.lower_is_better):
            return False
        if any(fnmatch.fnmatchcase(metric, p) for p in cls.higher_is_better):
            return True
        return None

    @classmethod
    def chance_level(cls, metric: str, params: dict[str, Any] | None = None) -> float | None:
        """``metric``'s chance level given the evaluator's ``params`` (as the experiment's ``evals`` entry writes
        them), or None when it has none (a loss): the first of the class's ``chance`` patterns that matches.
        An evaluator whose chance depends on its setup (DEPO: the number of nodes) overrides this."""
        return next((float(v) for p, v in cls.chance.items() if fnmatch.fnmatchcase(metric, p)), None)

    @classmethod
    def metric_source(cls, metric: str) -> str | None:
        """The data source one of this evaluator's metrics scores (a held-out set, by the name the config
        gave it), or None when the metric spans no single source. A report draws a metric whose source
        names a synthetic dataset against that dataset's own tokens, as it draws ``val/<dataset>``."""
        return None

    @classmethod
    def reported(cls, metric: str) -> bool:
        """Whether a report headlines ``metric`` (a table column, plot, gain and efficiency row):
        the names matching ``report_patterns`` (default: top-level names), bookkeeping never."""
        if any(fnmatch.fnmatchcase(metric, p) for p in cls.bookkeeping):
            return False
        if cls.report_patterns is None:
            return "/" not in metric
        return any(fnmatch.fnmatchcase(metric, p) for p in cls.report_patterns)

    def evaluate(self, model, tokenizer) -> EvalResult:
        raise NotImplementedError

    def setup(self) -> str:
        """One line naming the setup that produced this evaluator's numbers (a preset, the stimuli),
        printed beside them in reports and summaries; "" when there is nothing to choose."""
        return ""

    def run(self, model, tokenizer, out_dir: str | Path | None = None, checkpoint: str | None = None, **prov: Any) -> dict:
        """Evaluate and (if ``out_dir``) write ``summary.json`` + ``items.jsonl`` atomically."""
        res = self.evaluate(model, tokenizer)
        summary = {
            "evaluator": self.registry_name,
            "version": self.version,
            "checkpoint": checkpoint,
            "metrics": res.metrics,
            "higher_is_better": {m: recorded_direction(res.higher_is_better.get(m, self.direction(m)))
                                 for m in res.metrics},
            "reported": [m for m in res.metrics if self.reported(m)],
            "extra": res.extra,
            "setup": self.setup(),
            **provenance(self.cfg, **prov),
        }
        if out_dir is not None:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
            if res.items is not None:
                with atomic_path(out / EVAL_ITEMS) as tmp, open(tmp, "w", encoding="utf-8") as fh:
                    for row in res.items:
                        fh.write(json.dumps(row) + "\n")
            write_json(out / EVAL_SUMMARY, summary)
        return summary


def recorded_direction(value: Any) -> bool | None:
    """A direction as ``summary.json`` records it: true, false or null (none declared)."""
    return None if value is None else bool(value)


def max_positions(model) -> int | None:
    """The model's context length from its HF config (``max_position_embeddings`` and aliases), if any."""
    cfg = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "n_ctx"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None
