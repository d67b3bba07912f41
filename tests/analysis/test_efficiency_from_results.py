"""scripts/efficiency_from_results.py: a committed study's token-efficiency table from its results.json alone."""

import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "ppt_retrieval"


def _table(capsys, *args):
    argv = sys.argv
    sys.argv = ["efficiency_from_results.py", str(RESULTS / "results.json"), *args]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(ROOT / "scripts" / "efficiency_from_results.py"), run_name="__main__")
    finally:
        sys.argv = argv
    assert e.value.code == 0
    return {tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[1:-1]]
            for line in capsys.readouterr().out.splitlines() if line.startswith("| dyck") or line.startswith("| control")}


def test_committed_curves_give_the_committed_table_under_first_crossings_and_no_saving_under_the_default(capsys):
    """ppt_retrieval's report (first crossings) printed Dyck "saved +96.4 %" on coarse_nll_full, where the same
    report finds a stable harm; recomputed from the committed curves, the first-crossing rule gives that row
    back and the default rule does not reach the target (issue #31 items 6 and 7)."""
    committed = [line for line in (RESULTS / "report.md").read_text().splitlines()
                 if line.startswith("| dyck | verbatim/coarse_nll_full |")][-1]  # the efficiency table's
    first = _table(capsys, "--crossing", "first")[("dyck", "verbatim/coarse_nll_full")]
    assert first[4] == "first" and [c.strip() for c in committed.split("|")[5:-1]] == first[5:]
    stays = _table(capsys)[("dyck", "verbatim/coarse_nll_full")]
    assert stays[4] == "stays" and stays[5] == "0/3" and stays[-1] == "–"
