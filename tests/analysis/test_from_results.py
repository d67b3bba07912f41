"""``preschool report --from-results``: a study's report re-rendered from its results.json alone (issue #41 item 4).

The committed studies under docs/results/ keep their results.json, not their run folders; each report.md there
must be what today's report rules make of its stored curves, so a rule change shows up as a failing test
until ``make rerender`` is run and the re-rendered reports are committed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
# every committed study the report pipeline wrote; ppt_retrieval runs in the default test run, the others with the
# slow tests (a few s each)
STUDIES = ["ppt_retrieval", "l2t_blimp", "ladder_dyck", "ppt_timing_stack", "ppt_timing_tree", "stack_vs_queue",
           "stack_vs_queue/pilot", "ladder_compartments", "quickstart", "quickstart_1m", "compartments_audit", "compartments_slowdown",
           "compartments_slowdown/seeds", "compartments_translation", "compartments_translation/seeds",
           "compartments_infonce", "compartments_infonce/seeds", "compartments_infonce_sweep"]


def _copy(study: str, tmp_path: Path) -> Path:
    dst = tmp_path / study
    shutil.copytree(RESULTS / study, dst)
    return dst


# What the retired `preschool compartments` runner wrote (its own results.json keys, its config in the retired
# schema), cut down from the files it left under docs/results/ (at f6c2252: compartments_slowdown and
# compartments_audit, since re-run with `preschool run`); the refusal of such a file stays tested without them.
RETIRED = {
    "compartments_slowdown": {
        "baseline": "c1",
        "arms": {"c1": {"n_compartments": 1, "translation_fraction": 0.0, "infonce": None, "init_from": None,
                        "done": True, "curve": {"steps": [0.0, 22.0, 293.0], "losses": [6.2943, 4.9812, 1.6575]},
                        "final_per_compartment": {"c0": 1.6575}},
                 "c2": {"n_compartments": 2, "translation_fraction": 0.0, "infonce": None, "init_from": None,
                        "done": True, "curve": {"steps": [0.0, 22.0, 293.0], "losses": [6.9445, 5.2026, 1.7955]},
                        "final_per_compartment": {"c0": 1.7984, "c1": 1.7927},
                        "similarity": {"mean": 0.0181, "matrix": [[1.0, 0.0181], [0.0181, 1.0]], "layer": 2}}},
        "plateau": {"c1": 1.6575, "c2": 1.7955},
        "code_version": {"preschool": "0.1.0", "python": "3.12.3", "torch": "2.11.0+cu130"},
        "config": {"name": "compartments_slowdown", "out": "/tmp/cs", "seed": 0, "seq_len": 64,
                   "corpora": {"storybook": {"seed": 0, "source": "storybook"}},
                   "tokenizer": {"kind": "train", "vocab_size": 512},
                   "data": {"corpus": "storybook", "tokens": 1200000, "val_tokens": 16384},
                   "model": {"family": "qwen2", "preset": "tiny-1m", "tie_embeddings": False},
                   "train": {"batch_size": 32, "lr": 0.002}, "stage": {"schedule": "constant", "warmup": 20},
                   "tokens": 600000, "val_per_decade": 6,
                   "arms": [{"name": "c1", "compartments": {"n_compartments": 1}},
                            {"name": "c2", "compartments": {"n_compartments": 2}}],
                   "baseline": "c1", "targets": [5.0, 4.0], "similarity_rows": 32, "similarity_layer": 0}},
    "compartments_audit": {
        "gaps": {"compartmented": {"novels": {"steps": [0, 22, 293], "gap": [0.6953, 0.1702, 0.0171]},
                                   "stories": {"steps": [0, 22, 293], "gap": [0.6987, 0.146, -0.0789]}}},
        "final": {"shared": {"novels": 4.5115, "stories": 1.8288}, "compartmented": {"novels": 4.5286,
                                                                                     "stories": 1.7499}},
        "summary": {"novels": {"final_gap": 0.0171, "mean_gap_second_half": 0.1142},
                    "stories": {"final_gap": -0.0789, "mean_gap_second_half": -0.114}},
        "done": {"shared": True, "compartmented": True},
        "code_version": {"preschool": "0.1.0", "python": "3.11.7", "git_commit": "a187689", "torch": "2.13.0+cpu"},
        "config": {"name": "compartments_audit", "kind": "audit", "out": "/tmp/cmp_audit_tiny", "seed": 0,
                   "seq_len": 64, "corpora": {"storybook": {"seed": 0, "source": "storybook"}},
                   "tokenizer": {"kind": "train", "vocab_size": 1024},
                   "presentations": {"novels": {"corpus": "novels", "tokens": 800000},
                                     "stories": {"corpus": "storybook", "tokens": 800000}},
                   "weights": None, "monolingual": True,
                   "model": {"family": "qwen2", "preset": "tiny-1m", "tie_embeddings": False},
                   "train": {"batch_size": 32, "lr": 0.002}, "stage": {"schedule": "constant", "warmup": 20},
                   "tokens": 600000, "val_per_decade": 6}},
}


def _retired(kind: str, folder: Path) -> Path:
    """A study folder as the retired compartments runner left it (``kind``: a key of RETIRED): report.md and
    its results.json."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(f"# {kind}: report of the retired runner\n", encoding="utf-8")
    (folder / "results.json").write_text(json.dumps(RETIRED[kind], indent=2), encoding="utf-8")
    return folder


def _cli(*args: str) -> int:
    from preschool.cli import main

    return main(["report", *args])


def _refused(capsys, folder: Path, edit, *said: str, out: Path | None = None) -> None:
    """``edit(stored)`` changes ``folder``'s results.json; the re-render (in place, or into ``out``) then stops in
    one line naming that results.json and saying ``said``, and report.md is as it was."""
    import json

    path = folder / "results.json"
    stored = json.loads(path.read_text(encoding="utf-8"))
    edit(stored)
    path.write_text(json.dumps(stored), encoding="utf-8")
    before = (folder / "report.md").read_bytes()
    assert _cli("--from-results", str(path), *(["--out", str(out)] if out else [])) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and all(s in err for s in said), err
    assert (folder / "report.md").read_bytes() == before  # nothing written


@pytest.mark.parametrize("study", [pytest.param(s, marks=() if s == "ppt_retrieval" else pytest.mark.slow)
                                   for s in STUDIES])
def test_each_committed_report_is_its_rerender(study, tmp_path):
    """A committed report.md is byte for byte what `preschool report --from-results` writes from the results.json
    beside it (stale reports fail here: run `make rerender` and commit what it writes)."""
    folder = _copy(study, tmp_path)
    assert _cli("--from-results", str(folder / "results.json")) == 0
    assert (folder / "report.md").read_text(encoding="utf-8") == \
        (RESULTS / study / "report.md").read_text(encoding="utf-8")


def test_every_report_pipeline_study_is_in_the_list():
    """A study added under docs/results/ with a report-pipeline results.json is checked by the test above."""
    from preschool.rerender import load_stored
    from preschool.errors import PreschoolError

    found = []
    for results in sorted(RESULTS.rglob("results.json")):
        try:
            load_stored(results)
        except PreschoolError:
            continue
        found.append(results.parent.relative_to(RESULTS).as_posix())
    assert sorted(found) == sorted(STUDIES)


def test_a_rerender_into_another_folder_is_the_same_report(tmp_path):
    """--out writes the re-render elsewhere, the source untouched; a plot only the runs could draw (ppt_retrieval's
    verbatim positions, from before they were stored) comes along."""
    source = _copy("ppt_retrieval", tmp_path)
    before = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    assert _cli("--from-results", str(source / "results.json"), "--out", str(tmp_path / "elsewhere")) == 0
    assert (tmp_path / "elsewhere" / "report.md").read_text(encoding="utf-8") == \
        (RESULTS / "ppt_retrieval" / "report.md").read_text(encoding="utf-8")
    assert (tmp_path / "elsewhere" / "plots" / "verbatim_positions.png").is_file()
    assert {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()} == before


def test_ppt_retrieval_under_the_stays_rule_saves_nothing_on_the_papers_metric():
    """The report of ppt_retrieval's runs printed Dyck "saved +96.4 %" on coarse_nll_full by first crossings
    while the same report finds a stable harm; the committed report (its re-render, as the test above checks)
    names the stays rule and no seed reaches the target (issue #41 item 4)."""
    text = (RESULTS / "ppt_retrieval" / "report.md").read_text(encoding="utf-8")
    row = [line for line in text.splitlines()
           if line.startswith("| dyck | verbatim/coarse_nll_full | language")][-1]  # the efficiency table's
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[4:6] == ["stays", "0/3"] and cells[-1] == "–"
    assert "first crossing" not in text


def test_a_rerender_keeps_the_runs_provenance_and_rerenders_to_itself(tmp_path, builtin_float_sum):
    """The re-render keeps the config, code version and data manifests of the runs (not the re-rendering
    code's), says it is a re-render and re-renders to itself: a ladder's results.json keeps each rung's
    numbers (`sections.ladder.rung_results`) for the next one, on every supported Python (both of CPython's
    rules for ``sum`` over floats)."""
    import json

    folder = _copy("ladder_dyck", tmp_path)
    path = folder / "results.json"
    before = json.loads(path.read_text(encoding="utf-8"))
    assert _cli("--from-results", str(path)) == 0
    after = json.loads(path.read_text(encoding="utf-8"))
    for key in ("config", "code_version", "data_manifests"):
        assert after[key] == before[key]
    assert after["sections"]["ladder"]["rung_results"] == before["sections"]["ladder"]["rung_results"]
    first = (folder / "report.md").read_text(encoding="utf-8")
    assert f"commit {before['code_version']['git_commit'][:12]}" in first and "--from-results" in first
    _cli("--from-results", str(path))
    assert (folder / "report.md").read_text(encoding="utf-8") == first
    assert json.loads(path.read_text(encoding="utf-8")) == after


@pytest.mark.parametrize("case", ["quickstart", pytest.param("ppt_timing_stack", marks=pytest.mark.slow)])
def test_a_report_from_the_runs_and_its_rerender_agree(case, tmp_path, monkeypatch):
    """The report written from run folders (the golden cases: non-finite values, an unfinished run, downstream
    groups, both crossing rules, later stages) and the one re-rendered from its results.json alone are the same
    report, but for the line saying it is a re-render."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("report_golden", Path(__file__).with_name("test_report_golden.py"))
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    build = golden.build
    out = tmp_path / case
    report, _ = build(case, out, monkeypatch)
    again = tmp_path / "again"
    assert _cli("--from-results", str(out / "results.json"), "--out", str(again)) == 0
    lines = (again / "report.md").read_text(encoding="utf-8").replace(str(again), "<out>").splitlines()
    assert [line for line in lines if "--from-results" not in line] == report.splitlines()


def test_what_cannot_be_rerendered_is_refused_in_one_line_naming_the_file(tmp_path, capsys):
    folder = _retired("compartments_slowdown", tmp_path / "compartments_slowdown")
    _refused(capsys, folder, lambda stored: None, "retired compartments runner")
    # a compartments report from before results.json kept what its sections read of the runs
    _refused(capsys, _copy("ladder_compartments", tmp_path),
             lambda stored: stored["sections"]["slowdown"].pop("inputs"), "sections.slowdown.inputs")
    # a ladder's results.json from before the rungs' numbers were stored
    _refused(capsys, _copy("ladder_dyck", tmp_path), lambda stored: stored["sections"]["ladder"].pop("rung_results"),
             "rung_results")
    # a token-efficiency target at a baseline step: results.json keeps the curves by tokens, not steps
    _refused(capsys, _copy("ppt_timing_stack", tmp_path),
             lambda stored: stored["config"]["report"]["efficiency"]["targets"].update({"val/pt": "baseline@8"}),
             "baseline@<step>", "val/pt")
    assert _cli("--from-results", str(tmp_path / "missing" / "results.json")) == 2
    assert "no such file" in capsys.readouterr().err
    assert _cli("examples/quickstart.yaml", "--from-results", str(folder / "results.json")) == 2
    assert "--from-results" in capsys.readouterr().err


def test_make_rerender_lists_the_studies_it_leaves_as_they_are(tmp_path, capsys):
    """scripts/rerender_results.py re-renders every study under a folder and names each one it leaves, with
    the reason (a folder with a report.md and no results.json; a study of the retired compartments runner)."""
    import runpy
    import sys

    _copy("stack_vs_queue/pilot", tmp_path)
    _retired("compartments_audit", tmp_path / "compartments_audit")
    _retired("compartments_audit", tmp_path / "compartments_audit" / "micro")
    (tmp_path / "kept_no_results").mkdir()  # a report whose runs' curves were not stored
    (tmp_path / "kept_no_results" / "report.md").write_text("# a report without its results.json\n")
    argv = sys.argv
    sys.argv = ["rerender_results.py", str(tmp_path)]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(ROOT / "scripts" / "rerender_results.py"), run_name="__main__")
    finally:
        sys.argv = argv
    assert e.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert f"re-rendered  {tmp_path / 'stack_vs_queue' / 'pilot'}" in out
    assert any(line.startswith("left as is") and "kept_no_results: no results.json" in line for line in out)
    retired = [line for line in out if line.startswith("left as is") and "compartments_audit" in line]
    assert len(retired) == 2 and all("retired compartments runner" in line for line in retired)  # + micro/


def test_a_compartments_section_whose_stored_inputs_are_broken_is_named_and_nothing_is_written(tmp_path, capsys):
    """A results.json edited by hand (a run's val curve cut out of the slowdown section's inputs, an arm's runs
    gone): the re-render stops in one line naming that file (not the --out folder) and what it lacks, and
    report.md stays as it was."""
    comp = _copy("ladder_compartments", tmp_path)
    _refused(capsys, comp, lambda stored: stored["sections"]["slowdown"]["inputs"]["curves"]["c2"]["0"].pop("losses"),
             "sections.slowdown.inputs", out=tmp_path / "elsewhere")
    _refused(capsys, _copy("quickstart_1m", tmp_path), lambda stored: stored["arms"].pop("ppt_dyck"),
             "['ppt_dyck']", "no stored runs", out=tmp_path / "elsewhere2")
