"""A finished arm is compared whole before it is skipped (issue 48, item 10): its TrainConfig, and its callbacks
(``arms[i].callbacks``, where a compartments arm says where it starts: ``compartment_model.init_from``). A
changed callback was accepted with "done, skipping", exit 0, and experiment.yaml rewritten to claim the new
setting; it is refused like a changed TrainConfig, naming the key, and experiment.yaml stays as it was."""

import yaml

from preschool.cli import main

NOTE = '''
from dataclasses import dataclass

from preschool.train.callbacks.base import Callback
from preschool.train.callbacks.registry import CALLBACKS


@dataclass
class NoteConfig:
    tag: str = "first"


@CALLBACKS.register("finished_runs_note", config=NoteConfig)
def note(cfg, ctx):
    """Does nothing; its config is what the run records."""
    return Callback()
'''


def test_a_changed_callback_on_a_finished_arm_is_refused_and_nothing_rewritten(tiny_experiment, tmp_path, capsys):
    plugin = tmp_path / "finished_runs_note.py"
    plugin.write_text(NOTE)
    data = yaml.safe_load(tiny_experiment.read_text())
    data["plugins"] = [str(plugin)]
    data["arms"][0]["callbacks"] = {"finished_runs_note": {"tag": "first"}}
    tiny_experiment.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    run = out / "arms" / "a" / "seed0"
    assert yaml.safe_load((run / "config.yaml").read_text())["callbacks"] == {"finished_runs_note": {"tag": "first"}}
    recorded = (out / "experiment.yaml").read_text()
    capsys.readouterr()

    data["arms"][0]["callbacks"] = {"finished_runs_note": {"tag": "second"}}
    tiny_experiment.write_text(yaml.safe_dump(data))
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = [ln for ln in captured.err.splitlines() if not ln.startswith("[preschool]")]
    assert len(err) == 1 and "arms[0].callbacks.finished_runs_note.tag" in err[0], err
    assert "was 'first', now 'second'" in err[0] and "done, skipping" not in captured.out
    assert (out / "experiment.yaml").read_text() == recorded

    del data["arms"][0]["callbacks"]  # a callback taken away is a change too
    tiny_experiment.write_text(yaml.safe_dump(data))
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    assert "arms[0].callbacks.finished_runs_note" in capsys.readouterr().err
    assert (out / "experiment.yaml").read_text() == recorded


def test_an_unchanged_callback_is_skipped_as_done(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    assert yaml.safe_load((out / "arms" / "a" / "seed0" / "config.yaml").read_text())["callbacks"] == {}
    capsys.readouterr()
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    assert "done, skipping" in capsys.readouterr().out
