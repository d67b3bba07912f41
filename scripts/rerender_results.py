"""Re-render every committed study under docs/results/ from its results.json (no training, no run folders).

Each folder holding a ``report.md`` gets ``report.md``, ``results.json`` and its plots written again by
``preschool report --from-results <folder>/results.json``: the stored curves read with today's report rules.
A study that cannot be re-rendered (no results.json; the retired compartments runner's format; a report
section that reads the run folders and whose results.json predates its stored inputs) is listed with the
reason and left as it is.

    python scripts/rerender_results.py [ROOT]        # ROOT defaults to docs/results; `make rerender` runs this

Exits 0 when every study was either re-rendered or refused for a stated reason (1 on any other error,
which propagates).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "docs" / "results"


def main(argv: list[str] | None = None) -> int:
    from preschool.rerender import rerender_tree

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=str(ROOT), help=f"folder searched for studies (default: {ROOT})")
    args = ap.parse_args(argv)
    for folder, why in rerender_tree(args.root):
        print(f"re-rendered  {folder}" if why is None else f"left as is  {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
