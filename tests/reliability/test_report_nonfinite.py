"""A report never turns a NaN or an infinity into a verdict (issue 34, item 10).

``report.window`` outside (0, 1] is refused when the config loads. A non-finite value logged by a run
(a val loss of NaN or inf, an evaluator's NaN) is named in ``report.md`` and ``results.json`` (arm, seed,
metric, step, value) and the run's value of that metric is left out of the results table, the
difference from the baseline and the token efficiency, which say so instead of giving a verdict; the
plots draw the finite points, and the report is rewritten (never the old one left in place).
"""

import json
import math

import pytest

from preschool.cli import main

EXPERIMENT = """
name: nonfinite
seq_len: 16
seeds: [0, 1]
corpora:
  txt: {{source: text, path: {corpus}}}
tokenizer: {{kind: train, vocab_size: 300}}
data:
  pt: {{corpus: txt, tokens: 2000, val_tokens: 64}}
model: {{preset: micro}}
arms:
  - name: base
    stages: [{{name: pt, data: pt, tokens: 2048}}]
  - name: arm
    stages: [{{name: pt, data: pt, tokens: 2048}}]
"""


@pytest.fixture
def experiment(tmp_path):
    """``(config path, out folder, write)``; ``write(arm, seed, bad={step: value})`` logs a run's val losses
    (falling by arm and seed, ``bad`` replacing some) in its metrics.jsonl as the trainer writes them."""
    (tmp_path / "corpus.txt").write_text("a few words\n")
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.format(corpus=tmp_path / "corpus.txt"))
    out = tmp_path / "out"

    def write(arm, seed, bad=None):
        run = out / "arms" / arm / f"seed{seed}"
        run.mkdir(parents=True, exist_ok=True)
        rows = []
        for step in range(1, 9):
            tokens = step * 256
            loss = 5.0 - 0.2 * step - (0.3 if arm == "arm" else 0.0) + 0.01 * seed
            loss = (bad or {}).get(step, loss)
            acct = {"step": step, "tokens": tokens, "pt_tokens": tokens, "tokens_by_source": {"pt": tokens},
                    "stage": "pt"}
            rows += [{"event": "train", **acct, "loss": loss}, {"event": "val", **acct, "val/pt": loss}]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN, Infinity as json writes them
        (run / "DONE").write_text(json.dumps({"steps": 8}))  # as the trainer writes it (with more fields)

    for arm in ("base", "arm"):
        for seed in (0, 1):
            write(arm, seed)
    return exp, out, write


def _report(exp, out):
    rc = main(["report", str(exp), "--out", str(out)])
    results = json.loads((out / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    return rc, (out / "report.md").read_text(), results


def test_finite_runs_get_a_verdict(experiment):
    exp, out, _ = experiment
    rc, md, res = _report(exp, out)
    assert rc == 0 and res["nonfinite"] == [] and "Non-finite" not in md
    assert [g["stable"] for g in res["stable_gain"]] == [True]


@pytest.mark.parametrize("window", ["nan", "0", "2", "-0.5", ".inf"])
def test_a_window_outside_0_1_is_refused(experiment, one_line_error, window):
    exp, out, _ = experiment
    assert main(["report", str(exp), "--out", str(out), "--set", f"report.window={window}"]) == 2
    one_line_error("report.window")
    assert not (out / "report.md").exists()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("who", ["arm", "base"])
def test_a_non_finite_value_is_named_and_never_averaged(experiment, bad, who):
    exp, out, write = experiment
    _report(exp, out)  # a report of the finite runs, which the next one must replace
    write(who, 1, bad={6: bad})
    rc, md, res = _report(exp, out)
    assert rc == 0
    shown = "nan" if math.isnan(bad) else ("inf" if bad > 0 else "-inf")
    assert res["nonfinite"] == [{"arm": who, "seed": 1, "metric": "val/pt", "step": 6, "value": shown}]
    assert "## Non-finite values" in md and f"| {who} | 1 | val/pt | 6 | {shown} |" in md
    # the seed pair with the bad run is left out of the verdict (the arm is compared with the baseline seed by seed)
    gain = [g for g in res["stable_gain"] if g["metric"] == "val/pt"]
    assert len(gain) == 1 and gain[0]["nonfinite"] == [f"{who} seed 1"]
    assert gain[0]["seeds"] == 1 and all(math.isfinite(gain[0][k]) for k in ("mean", "sd"))
    assert f"one seed: no seed-level verdict; left out: non-finite values in {who} seed 1" in md
    assert "from 1 seed: stable gain" in md  # the within-run rule, beside it
    # the table's value of the bad run's arm is its other seed's, and says so
    row = next(r for r in res["table"] if r["arm"] == who)
    assert row["val/pt"][2] == 1 and row["nonfinite"] == {"val/pt": [1]} and row["final_stage"] == {"val/pt": "pt"}
    for e in res["token_efficiency"]:
        assert e["seeds"] == 1
    assert (out / "plots" / "val_pt.png").is_file()


def test_every_seed_non_finite_gives_no_verdict(experiment):
    exp, out, write = experiment
    write("arm", 0, bad={8: float("nan")})
    write("arm", 1, bad={3: float("nan")})
    rc, md, res = _report(exp, out)
    assert rc == 0 and len(res["nonfinite"]) == 2
    assert res["stable_gain"][0]["verdict"] == "not compared" and res["stable_gain"][0]["n"] == 0
    assert "not compared (non-finite values in arm seed 0, arm seed 1)" in md
    row = next(r for r in res["table"] if r["arm"] == "arm")
    assert row["val/pt"] == [None, None, 0] and "| arm | 2,048 | non-finite |" in md


# Issue 40, item 11: a value that is not a number at all (null, a list, a bool, a string) gave a traceback and
# left the old report.md in place, or (true) was averaged as 1.0 into a verdict. It is named in one line (file,
# line, field) and left out of every verdict like a NaN, listed with its JSON text; the report is rewritten.

def _said(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize("who, bad, shown", [("arm", None, "null"), ("base", None, "null"), ("arm", [1], "[1]"),
                                             ("base", True, "true"), ("arm", "0.5", '"0.5"'),
                                             ("arm", {"v": 1}, '{"v": 1}')])
def test_a_value_that_is_no_number_is_named_and_never_averaged(experiment, capsys, bad, shown, who):
    exp, out, write = experiment
    _report(exp, out)
    capsys.readouterr()
    write(who, 1, bad={6: bad})
    rc, md, res = _report(exp, out)
    assert rc == 0
    said = _said(capsys)
    assert len(said) == 1, said
    assert f"{out / 'arms' / who / 'seed1' / 'metrics.jsonl'}:12" in said[0] and "val/pt" in said[0]
    assert res["nonfinite"] == [{"arm": who, "seed": 1, "metric": "val/pt", "step": 6, "value": shown}]
    gain = [g for g in res["stable_gain"] if g["metric"] == "val/pt"]
    assert len(gain) == 1 and gain[0]["nonfinite"] == [f"{who} seed 1"] and gain[0]["seeds"] == 1
    for e in res["token_efficiency"]:
        assert e["seeds"] == 1
    row = next(r for r in res["table"] if r["arm"] == who)
    assert row["val/pt"][2] == 1 and row["nonfinite"] == {"val/pt": [1]}


def test_true_changes_no_verdict(experiment, capsys):
    """The issue's case: `true` read as 1.0 moved a mean by +0.72 and an efficiency row by +12.4 %."""
    exp, out, write = experiment
    write("arm", 1, bad={6: float("nan")})
    _, _, with_nan = _report(exp, out)
    write("arm", 1, bad={6: True})
    _, _, with_true = _report(exp, out)
    for key in ("stable_gain", "token_efficiency", "table"):
        assert with_true[key] == with_nan[key], key


def _edit_row(out, who, seed, line, **changes):
    path = out / "arms" / who / f"seed{seed}" / "metrics.jsonl"
    rows = [json.loads(r) for r in path.read_text().splitlines()]
    rows[line - 1].update(changes)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("line, field, value", [  # line 11: the train row of step 6, line 12: its val row
    (12, "step", "x"), (12, "step", None), (11, "step", 6.5), (12, "step", True), (11, "tokens", "x"),
    (12, "pt_tokens", [1]), (11, "pt_tokens", None), (12, "tokens_by_source", {"pt": None}),
    (11, "tokens_by_stage", "pt"), (12, "stage", 3),
])
def test_a_row_whose_step_or_account_is_no_number_is_named_and_left_out(experiment, capsys, field, value, line):
    exp, out, _ = experiment
    _report(exp, out)
    capsys.readouterr()
    path = _edit_row(out, "arm", 1, line, **{field: value})
    rc, md, res = _report(exp, out)
    assert rc == 0
    said = _said(capsys)
    assert len(said) == 1 and f"{path}:{line}" in said[0] and field in said[0], said
    assert res["nonfinite"] == []
    assert "## Non-finite values" not in md
    assert [g["verdict"] for g in res["stable_gain"]] != []


_GOOD = object()


def _write_summaries(out, bad=_GOOD):
    """An evaluator `probe` (metric `acc`, higher is better) at step 8 of every run; ``bad`` replaces arm seed 1's."""
    from preschool.io import write_json
    from preschool.layout import checkpoints_dir, evals_dir

    for who in ("base", "arm"):
        for seed in (0, 1):
            run = out / "arms" / who / f"seed{seed}"
            checkpoints_dir(run).mkdir(exist_ok=True)
            acc = 0.5 + (0.2 if who == "arm" else 0.0) + 0.01 * seed
            if who == "arm" and seed == 1 and bad is not _GOOD:
                acc = bad
            write_json(evals_dir(run, 8) / "probe" / "summary.json", {
                "evaluator": "probe", "metrics": {"acc": acc}, "higher_is_better": {"acc": True},
                "reported": ["acc"],
                "checkpoint_meta": {"step": 8, "tokens": 2048, "pt_tokens": 2048, "stage": "pt",
                                    "tokens_by_source": {"pt": 2048}}})


@pytest.mark.parametrize("bad, shown", [(None, "null"), (True, "true"), ([1], "[1]")])
def test_an_evaluator_value_that_is_no_number_is_named_and_left_out(experiment, capsys, bad, shown):
    exp, out, _ = experiment
    _write_summaries(out)
    _report(exp, out)
    capsys.readouterr()
    _write_summaries(out, bad)
    rc, md, res = _report(exp, out)
    assert rc == 0
    said = _said(capsys)
    summary = out / "arms" / "arm" / "seed1" / "evals" / "step-00000008" / "probe" / "summary.json"
    assert len(said) == 1 and str(summary) in said[0] and "metrics.acc" in said[0], said
    assert res["nonfinite"] == [{"arm": "arm", "seed": 1, "metric": "probe/acc", "step": 8, "value": shown}]
    gain = [g for g in res["stable_gain"] if g["metric"] == "probe/acc"]
    assert len(gain) == 1 and gain[0]["nonfinite"] == ["arm seed 1"] and gain[0]["seeds"] == 1


@pytest.mark.parametrize("done, field", [("", "the file"), ("[1]", "the file"), ('{"flops": true}', "flops"),
                                         ('{"model": {"params_total": "x"}}', "model.params_total")])
def test_a_done_file_that_is_no_summary_is_named_and_the_report_written(experiment, capsys, done, field):
    """`DONE` is the trainer's JSON summary; the report reads each finished run's cost from it (an empty file
    was a JSONDecodeError traceback)."""
    exp, out, _ = experiment
    path = out / "arms" / "arm" / "seed0" / "DONE"
    path.write_text(done)
    rc, md, res = _report(exp, out)
    assert rc == 0 and [g["stable"] for g in res["stable_gain"]] == [True]
    said = _said(capsys)
    assert len(said) == 1 and str(path) in said[0] and field in said[0] and "cost" in said[0], said


def test_the_compartments_sections_read_val_curves_the_same_way(tmp_path, capsys):
    """The slowdown and plateau sections read metrics.jsonl themselves (compartments/slowdown.read_val_curve):
    a value that is no number drops its point as a NaN does, a row with a step that is no number is left out,
    each named in one line, never a TypeError (null) or a 1.0 (true) in the curve."""
    from preschool.compartments.slowdown import read_val_curve

    rows = [{"event": "val", "step": s, "val/c0": 5.0 - s, "val/c1": 6.0 - s} for s in (1, 2, 3, 4)]
    rows[1]["val/c1"] = True
    rows[2]["step"] = "x"
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    curve = read_val_curve(tmp_path)
    assert curve.steps.tolist() == [1, 4] and curve.losses.tolist() == [4.5, 1.5]
    said = _said(capsys)
    assert len(said) == 2 and f"{tmp_path / 'metrics.jsonl'}:2: val/c1 is true" in said[0] \
        and f"{tmp_path / 'metrics.jsonl'}:3: step is" in said[1], said


# Issue 48: what json.loads makes of a metrics.jsonl or summary.json that no trainer or evaluator wrote was a
# traceback (OverflowError, ValueError past 4,300 digits, UnicodeDecodeError, AttributeError on a list).

def test_an_integer_past_float_range_is_named_and_left_out(experiment, capsys):
    exp, out, _ = experiment
    path = out / "arms" / "arm" / "seed1" / "metrics.jsonl"
    lines = path.read_text().splitlines()
    lines[11] = lines[11].replace('"val/pt": ', '"val/pt": 1' + "0" * 400 + ", \"was\": ")  # line 12: step 6's val row
    path.write_text("\n".join(lines) + "\n")
    rc, md, res = _report(exp, out)
    assert rc == 0
    said = _said(capsys)
    assert len(said) == 1 and f"{path}:12" in said[0] and "val/pt" in said[0] and "float" in said[0], said
    assert [(n["arm"], n["seed"], n["step"]) for n in res["nonfinite"]] == [("arm", 1, 6)]
    gain = [g for g in res["stable_gain"] if g["metric"] == "val/pt"]
    assert gain[0]["nonfinite"] == ["arm seed 1"] and gain[0]["seeds"] == 1


@pytest.mark.parametrize("bad, says", [(b'{"event": "val", "step": 9, "val/pt": 1' + b"0" * 5000 + b"}", "digits"),
                                       (b'{"event": "val", "step": 9, "stage": "\xff"}', "not UTF-8")])
def test_a_metrics_line_json_cannot_read_is_one_line(experiment, one_line_error, bad, says):
    exp, out, _ = experiment
    path = out / "arms" / "arm" / "seed1" / "metrics.jsonl"
    path.write_bytes(path.read_bytes() + bad + b"\n" + b'{"event": "train", "step": 10}\n')  # not the last line
    assert main(["report", str(exp), "--out", str(out)]) == 2
    one_line_error(f"{path}:17", says)


def test_a_summary_whose_metrics_are_a_list_is_one_line(experiment, one_line_error):
    from preschool.io import write_json

    exp, out, _ = experiment
    _write_summaries(out)
    summary = out / "arms" / "arm" / "seed1" / "evals" / "step-00000008" / "probe" / "summary.json"
    write_json(summary, {"evaluator": "probe", "metrics": [0.5, 0.6]})
    assert main(["report", str(exp), "--out", str(out)]) == 2
    one_line_error(summary, "'metrics'", "array")
