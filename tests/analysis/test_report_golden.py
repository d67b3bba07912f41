"""The report, byte for byte: four shipped experiments over synthetic run folders, rebuilt by ``write_report``
and compared with the ``report.md`` and ``results.json`` recorded in ``golden_reports/`` (issue #32 item 3:
splitting analysis/report.py changes no byte of a report).

``docs/results/`` keeps reports, not the run folders behind them, so each case writes what the trainer and
the evaluators would have left on disk (``metrics.jsonl``, ``DONE``, ``evals/step-N/<label>/summary.json``)
for an example's arms, stages and evaluators, with values that are a fixed function of arm, seed, step and
metric. Together the cases reach every part of the report: the arms and doses, the axes, results and final
stage tables, after later stages, the difference and token efficiency tables (numeric, ``baseline@<step>``
and baseline-final targets, both crossing rules), downstream groups, non-finite values, an unfinished run,
the evaluator sections (phenomena, fields3 and their margins, verbatim positions) and a configured one.

The recorded output is written by ``python tests/analysis/test_report_golden.py --record`` (only when the
report is meant to change; the diff of ``golden_reports/`` is then the change, reviewed like code). A new
experiment config field changes ``results.json`` too (its ``config`` block is the resolved config): record
again, and the diff is that field's default in the four ``config`` blocks.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import zlib
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden_reports"
STEPS_PER_STAGE = 4
OUT = "<out>"  # the experiment folder in the recorded files (each test writes into its own temp folder)
CODE = {"preschool": "0.0.0", "git_commit": "0" * 40, "git_dirty": False}  # the code version, pinned

LM_EVAL = {"lm_eval": {"piqa/acc": True, "arc_easy/acc": True, "hellaswag/acc": True,
                       "wikitext/word_perplexity": False, "piqa/acc_stderr": True}}
DOWNSTREAM = ('report.efficiency.downstream={groups: {cr: [lm_eval/piqa/acc, lm_eval/hellaswag/acc], '
              'sciqa: [lm_eval/arc_easy/acc]}}')
# evaluator -> metric -> higher is better (a metric's "reported" follows the evaluator class's rule)
METRICS = {
    "minimal_pairs": {"acc": True, "acc_tokmean": True, "n_pairs": True, "acc/term/binding": True,
                      "acc/term/island_effects": True, "acc/field3/syntax": True, "acc/field3/semantics": True,
                      "margin": True, "margin/term/binding": True, "margin/term/island_effects": True,
                      "margin/field3/syntax": True},
    "depo": {"acc": True, "acc/k1": True, "acc/k2": True, "acc/k4": True, "nll": False, "nll/k1": False},
    "heldout": {"loss": False, "loss/pt": False, "loss/depo": False, "ppl/pt": False},
    "verbatim": {"x_perc": True, "x_del": True, "retrieval_success": True},
}

# name -> (example, --set overrides, the runs to break: (arm, seed) -> "unfinished" | metric made NaN / inf)
CASES = {
    "quickstart": ("quickstart.yaml", ["seeds=[0, 1]", DOWNSTREAM, "report.efficiency.crossing=first"],
                   {("ppt_dyck_reinit", 1): "unfinished", ("ppt_dyck", 1): "val/dyck",
                    ("pt_only", 1): "lm_eval/piqa/acc"}),
    "ppt_timing_stack": ("ppt_timing_stack.yaml", ["seeds=[0, 1]"], {("after", 0): "depo/acc/k4"}),
    "stack_vs_queue": ("stack_vs_queue.yaml", ["seeds=[0]", "report.efficiency.targets={val/pt: baseline@8}"], {}),
    "ppt_retrieval": ("ppt_retrieval.yaml", ["seeds=[0, 2]", "report.sections={slowdown: {targets: [5.5]}}"],
                      {("control", 2): "inf:val/pt"}),
}


def _value(metric: str, arm: int, seed: int, progress: float, higher: bool) -> float:
    """A learning curve: rises (or falls) with training progress, each arm and seed a little apart."""
    jitter = (zlib.crc32(f"{metric}|{arm}|{seed}".encode()) % 1000) / 1000
    if higher:
        return round(0.3 + 0.5 * progress * (1 + 0.05 * arm) + 0.02 * jitter, 6)
    return round(6.0 - 2.5 * progress * (1 + 0.04 * arm) + 0.05 * jitter - 0.3 * math.sin(6 * progress), 6)


def write_runs(exp, broken: dict) -> None:
    """The run folders of every arm and seed of ``exp``: STEPS_PER_STAGE steps per stage, a val row and an
    evaluated checkpoint at each, ``DONE`` unless the run is broken as ``"unfinished"`` (it stops half-way)."""
    from preschool.evals import EVALUATORS
    from preschool.io import write_json
    from preschool.layout import EVAL_SUMMARY, checkpoints_dir, done_path, evals_dir, metrics_path, run_dir

    cfg = exp.cfg
    labels = {spec.key: spec.name for spec in cfg.evals} | {"lm_eval": "lm_eval"}
    for a, arm in enumerate(cfg.arms):
        stages = exp.record((None, arm.name, cfg.seeds[0])).train.stages
        for seed in cfg.seeds:
            run, bad = run_dir(cfg.out_dir, arm.name, seed), broken.get((arm.name, seed))
            checkpoints_dir(run).mkdir(parents=True)
            total = sum(STEPS_PER_STAGE for _ in stages)
            rows, step, tokens, pt, by_source, by_stage = [], 0, 0, 0, {}, {}
            for st in stages:
                weights = {st.data: 1.0} if isinstance(st.data, str) else dict(st.data)
                for _ in range(STEPS_PER_STAGE):
                    step += 1
                    if bad == "unfinished" and step > total // 2 + 1:
                        break
                    per_step = st.tokens // STEPS_PER_STAGE
                    tokens += per_step
                    for src, w in weights.items():
                        share = int(per_step * w / sum(weights.values()))
                        by_source[src] = by_source.get(src, 0) + share
                        if st.counts_as_pt and src == "pt":  # the language share of a PT stage
                            pt += share
                    by_stage[st.name] = by_stage.get(st.name, 0) + per_step
                    account = {"step": step, "tokens": tokens, "pt_tokens": pt, "stage": st.name,
                               "tokens_by_source": dict(by_source), "tokens_by_stage": dict(by_stage)}
                    rows.append({"event": "train", **account, "loss": 3.0})
                    val = {"event": "val", **account}
                    for name in exp.record((None, arm.name, seed)).train.val:
                        val[f"val/{name}"] = _value(f"val/{name}", a, seed, step / total, False)
                    rows.append(val)
                    for label, evaluator in labels.items():
                        metrics = METRICS.get(evaluator) or LM_EVAL[evaluator]
                        values = {m: _value(f"{label}/{m}", a, seed, step / total, h) for m, h in metrics.items()}
                        cls = EVALUATORS.get(evaluator).cls
                        extra = {"positions": {"repeat": {"n3": {"list1": [values["x_perc"], 1.0],
                                                                 "list2": [2.0, values["x_del"]]}}}} \
                            if evaluator == "verbatim" else {}
                        write_json(evals_dir(run, step) / label / EVAL_SUMMARY, {
                            "evaluator": evaluator, "metrics": values,
                            "higher_is_better": {m: metrics[m] for m in values},
                            "reported": [m for m in values if cls.reported(m)], "extra": extra,
                            "setup": f"{evaluator} preset", "checkpoint_meta": account})
            for row in rows:  # a broken metric: its value at the run's third step is not a number
                key = bad.split(":")[-1] if bad and bad != "unfinished" else None
                if key and row["step"] == 3 and key in row:
                    row[key] = float("inf") if bad.startswith("inf:") else float("nan")
            if bad and bad.startswith("lm_eval/"):
                path = evals_dir(run, 3) / "lm_eval" / EVAL_SUMMARY
                summary = json.loads(path.read_text())
                summary["metrics"][bad.split("/", 1)[1]] = float("nan")
                write_json(path, summary)
            metrics_path(run).write_text("".join(json.dumps(r) + "\n" for r in rows))
            if bad != "unfinished":
                write_json(done_path(run), {"steps": step})


def build(case: str, out: Path, monkeypatch) -> tuple[str, str]:
    """Write the case's run folders under ``out``, its report, and return ``(report.md, results.json)`` with
    the folder written as ``<out>``."""
    import preschool.io
    from preschool.analysis.report import write_report
    from preschool.experiment import load_experiment
    from preschool.layout import report_path, results_path

    example, overrides, broken = CASES[case]
    cfg = load_experiment(EXAMPLES / example, [*overrides, f"out={out}"])
    write_runs(cfg, broken)
    monkeypatch.setattr(preschool.io, "code_version", lambda: dict(CODE))
    write_report(cfg)
    return tuple(p.read_text(encoding="utf-8").replace(str(out), OUT) for p in (report_path(out), results_path(out)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_report_is_byte_identical_to_the_recorded_one(case, tmp_path, monkeypatch, builtin_float_sum):
    """On every supported Python: the two rules CPython has had for ``sum`` over floats give the same bytes."""
    report, results = build(case, tmp_path / case, monkeypatch)
    assert report == (GOLDEN / case / "report.md").read_text(encoding="utf-8")
    assert results == (GOLDEN / case / "results.json").read_text(encoding="utf-8")


def test_collect_and_compute_return_frozen_records_and_change_nothing_they_read(tmp_path):
    """The report's steps pass frozen records on (analysis/records.py): compute leaves the collected runs as
    they were (it once popped their directions and raw points), and no record takes a new value."""
    import copy
    import dataclasses

    from preschool.analysis.collect import add_downstream_average, collect
    from preschool.analysis.compute import compute
    from preschool.experiment import load_experiment

    example, overrides, broken = CASES["quickstart"]
    exp = load_experiment(EXAMPLES / example, [*overrides, f"out={tmp_path}"])
    cfg = exp.cfg
    write_runs(exp, broken)
    collected = collect(exp.runs)
    runs = add_downstream_average(collected, cfg.report.efficiency.downstream)
    assert "downstream/avg" in runs.arms["pt_only"][0].points  # a new record; the one it was given is unchanged
    assert "downstream/avg" not in collected.arms["pt_only"][0].points
    before = copy.deepcopy(runs)
    rep = compute(exp.runs, runs, cfg.report, cfg.data)
    assert runs == before and rep.arms["pt_only"][0].points == runs.arms["pt_only"][0].points
    for record in (runs, runs.arms["pt_only"][0], rep, rep.arms["pt_only"][0], rep.table[0], rep.stable_gain[0],
                   rep.token_efficiency[0], rep.nonfinite[0]):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.arm = "x"


def test_the_cases_reach_every_part_of_the_report():
    """The recorded reports hold every table and section the report can write (a case lost is a table
    no longer guarded)."""
    text = "\n".join((GOLDEN / c / "report.md").read_text(encoding="utf-8") for c in CASES)
    for heading in ("## Non-finite values", "## Arms", "## Doses", "## Axes and evaluation setups", "## Results",
                    "Final stage of each value", "## After later stages", "## Difference from", "## Token efficiency",
                    "## Minimal pairs by phenomenon", "## Minimal pairs by field", "log-prob margin", "## Slowdown",
                    "## Plots", "## Provenance", "(unfinished)", "left out: non-finite", "| first |", "| stays |",
                    "baseline@8", "downstream/cr", "downstream/avg", "verbatim retrieval by list position"):
        assert heading in text, heading
    results = [json.loads((GOLDEN / c / "results.json").read_text(encoding="utf-8")) for c in CASES]
    assert {"phenomena", "fields3", "phenomena_margin", "fields3_margin"} <= set().union(*results)
    assert any(r["sections"] for r in results)


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    import tempfile

    class _Patch:
        def setattr(self, obj, name, value):
            setattr(obj, name, value)

    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            md, js = build(name, Path(tmp) / name, _Patch())
            shutil.rmtree(GOLDEN / name, ignore_errors=True)
            (GOLDEN / name).mkdir(parents=True)
            (GOLDEN / name / "report.md").write_text(md, encoding="utf-8")
            (GOLDEN / name / "results.json").write_text(js, encoding="utf-8")
            print(f"recorded {GOLDEN / name}")
