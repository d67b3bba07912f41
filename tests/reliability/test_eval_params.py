"""An evaluator's params are checked before the data and the training they would wait for (issue 48, item 11),
named by their YAML key (``evals[0].params.<key>``): a misspelt key or a value of the wrong type when the
config loads, a value its evaluator refuses (a path that is not there, a batch size of 0) once the data is
prepared (``${data}`` paths exist only then), before any run trains. They were found after training, named
``evaluators[0]...``."""

import yaml

from preschool.cli import main


def _with_eval(tiny_experiment, params: dict):
    data = yaml.safe_load(tiny_experiment.read_text())
    data["evals"] = [{"name": "minimal_pairs", "params": params}]
    tiny_experiment.write_text(yaml.safe_dump(data))


def _errors(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not ln.startswith("[preschool]")]


def test_a_misspelt_evaluator_param_is_named_by_its_yaml_key_before_any_data(tiny_experiment, tmp_path, capsys):
    _with_eval(tiny_experiment, {"path": "${data}/minimal_pairs", "max_pair_per_paradigm": 10})
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    err = _errors(capsys)
    assert len(err) == 1 and "evals[0].params.max_pair_per_paradigm" in err[0], err
    assert "did you mean 'max_pairs_per_paradigm'" in err[0]
    assert not (out / "data").exists()


def test_a_param_of_the_wrong_type_is_refused_on_load(tiny_experiment, tmp_path, capsys):
    _with_eval(tiny_experiment, {"path": "${data}/minimal_pairs", "batch_size": "many"})
    assert main(["plan", str(tiny_experiment)]) == 2
    err = _errors(capsys)
    assert len(err) == 1 and "evals[0].params.batch_size" in err[0], err


def test_a_param_its_evaluator_refuses_stops_the_run_before_training(tiny_experiment, tmp_path, capsys):
    _with_eval(tiny_experiment, {"path": "${data}/no_such_pairs"})
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    err = _errors(capsys)
    assert len(err) == 1 and "evals[0].params.path" in err[0] and "no_such_pairs" in err[0], err
    assert (out / "data" / "pt" / "dataset.json").is_file()  # prepared: ${data} exists only then
    assert not (out / "arms").exists()  # nothing trained
