"""The equivalence margins of a report (``report.equivalence``): how large a difference must be to matter.

"No difference" is a claim too, and it needs a margin chosen before the runs (spec statistics.md): two
one-sided tests (:func:`~preschool.analysis.stats.equivalence`) call an arm *equivalent* to the baseline on a
metric when the 90 % t interval of its per-seed effect lies inside ±margin. Each metric's margin is
``report.equivalence.margins[metric]``, else ``report.equivalence.default``; either is an absolute margin in the
metric's units (``0.05`` nats) or a share of the baseline's final value (``"2%"``).

The default, 2 % of the baseline's final value, is in every metric's own units and scale, and it is a third of
the largest headline effect among the papers this toolkit replicates that is stated as a relative change (NCA
pre-pretraining: "up to 6 %" better language modelling): an equivalence claim at the default rules out effects
that small. It is a default, not the smallest effect that matters to your question: set the margin per metric
(the paper's reported gain, or the harm another arm showed) before the runs, and the report names the margin
each row used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import check

DEFAULT_MARGIN = "2%"


def _valid(value) -> bool:
    if isinstance(value, str):
        head = value[:-1]
        try:
            return value.endswith("%") and float(head) > 0
        except ValueError:
            return False
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and math.isfinite(value)


@dataclass
class EquivalenceSpec:
    """``report.equivalence``: the margin of each metric's equivalence test (module docstring)."""

    default: float | str = DEFAULT_MARGIN  # an absolute margin, or "<p>%" of the baseline's final value
    margins: dict[str, float | str] = field(default_factory=dict)  # per metric, the same forms

    def validate(self) -> None:
        check(_valid(self.default), "default", f"must be a number > 0 or a percentage like '2%', got {self.default!r}")
        for m, v in self.margins.items():
            check(_valid(v), f"margins.{m}", f"must be a number > 0 or a percentage like '2%', got {v!r}")

    def margin(self, metric: str, baseline_value: float | None) -> tuple[float | None, str]:
        """``(margin, how it was set)`` for ``metric`` given the baseline's final seed mean; None (with the reason)
        for a share of a baseline value that is missing or 0."""
        spec = self.margins.get(metric, self.default)
        src = "report.equivalence." + (f"margins.{metric}" if metric in self.margins else "default")
        if not isinstance(spec, str):
            return float(spec), f"{spec:g} ({src})"
        share = float(spec[:-1]) / 100
        if baseline_value is None or not math.isfinite(baseline_value) or baseline_value == 0:
            return None, f"{spec} of the baseline's final value, which is {baseline_value} ({src})"
        return share * abs(baseline_value), f"{spec} of the baseline's final {baseline_value:.4g} ({src})"
