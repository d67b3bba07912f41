"""Recompute a report's token-efficiency table from its committed ``results.json`` (no run folders needed).

A committed study keeps ``results.json`` (every seed's curve on each metric's axis, the PPT tokens charged,
the config) but not its run folders, so ``preschool report`` cannot rebuild it. The efficiency table,
though, needs only those curves: this reruns the report's own computation (analysis/compute.py
``efficiency_rows``, analysis/standard_tables.py ``efficiency_lines``) on them with the crossing rule
asked for, and prints the markdown table, so a README can show the rows the current code gives.

    python scripts/efficiency_from_results.py docs/results/ppt_retrieval/results.json [--crossing stays]

Targets of the form ``baseline@<step>`` need the raw points, which results.json does not keep: such
metrics are left out (a line on stderr says which).
"""

from __future__ import annotations

import argparse
import json
import sys
from types import SimpleNamespace


def main(argv: list[str] | None = None) -> int:
    from preschool.analysis.efficiency import CROSSINGS
    from preschool.analysis.compute import efficiency_rows
    from preschool.analysis.records import SeedResult
    from preschool.analysis.standard_tables import efficiency_lines

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a report's results.json")
    ap.add_argument("--crossing", choices=CROSSINGS, default="stays")
    args = ap.parse_args(argv)
    res = json.load(open(args.results, encoding="utf-8"))
    cfg_report = res["config"]["report"]
    given = (cfg_report.get("efficiency") or {}).get("targets") or {}  # reports before issue #23 had none
    targets = {m: t for m, t in given.items() if not isinstance(t, str)}
    skipped = sorted(set(given) - set(targets))
    if skipped:
        print(f"left out (baseline@<step> targets need the raw points): {', '.join(skipped)}", file=sys.stderr)
    names = [a["name"] for a in res["config"]["arms"]]
    baseline = cfg_report.get("baseline") or names[0]
    cfg = SimpleNamespace(arms=[SimpleNamespace(name=n) for n in names],
                          report=SimpleNamespace(efficiency=SimpleNamespace(targets=targets, crossing=args.crossing)))
    # reports before issue #23 recorded no directions or axes: their headline metrics were the table's columns,
    # losses (val/*) lower-is-better, all on language tokens
    directions = res.get("directions") or {m: "lower" if m.startswith("val/") else "higher" for m in res["table"][0]
                                           if m not in ("arm", "seeds", "done", "total_tokens", "final_stage",
                                                        "stage_ends")}
    metrics = [m for m in directions if m not in skipped]
    # older reports kept the PPT tokens charged per row, not per seed
    charged = {e["arm"]: e.get("ppt_tokens") or 0 for e in res.get("token_efficiency", [])}
    arms = {name: {seed: SeedResult(sd.get("run_dir", ""), ppt_tokens=sd.get("ppt_tokens", charged.get(name, 0)),
                                    curves=sd["curves"])
                   for seed, sd in a["seeds"].items()}
            for name, a in res["arms"].items()}
    axes = {m: res.get("axes", {}).get(m, {}).get("axis", "pt") for m in metrics}
    higher = {m: directions[m] == "higher" for m in metrics}
    rows = efficiency_rows(cfg, arms, baseline, metrics, axes, higher)
    print("\n".join(efficiency_lines(rows, baseline)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
