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
        (run / "DONE").write_text("")

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
    assert f"stable gain; left out: non-finite values in {who} seed 1" in md
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
