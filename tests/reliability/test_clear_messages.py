"""Messages that say what happened (issue 48, item 14): a resumed run says the step it resumed from; under
torchrun only rank 0 writes standard output (rank 1 repeated rank 0's lines, interleaved mid-line in a pipe);
a damaged ``config.yaml`` of a run is named as that file, not as a key ``arms[0].<path>/config.yaml``; a val
split the corpus cannot fill points at ``val_fraction``, the setting that fixes it."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import preschool
from preschool.cli import main
from preschool.train.trainer import train

SRC = Path(preschool.__file__).resolve().parents[1]


def test_a_resumed_run_says_the_step_it_resumed_from(tmp_path, datasets, micro_cfg, stop_at, capsys):
    cfg = micro_cfg(checkpoint_every=2, eval_every=0)
    train(cfg, tmp_path / "run", datasets, callbacks=[stop_at(6)])
    capsys.readouterr()
    train(cfg, tmp_path / "run", datasets)
    out = capsys.readouterr().out
    assert f"[preschool] {tmp_path / 'run'}: resumed from step 6 of 8 (step-00000006, stage pt, 384 tokens" in out


def test_a_fresh_run_says_nothing_of_a_resume(tmp_path, datasets, micro_cfg, capsys):
    train(micro_cfg(checkpoint_every=2, eval_every=0), tmp_path / "run", datasets)
    assert "resumed" not in capsys.readouterr().out


@pytest.mark.parametrize("rank, says", [("1", False), ("0", True)])
def test_only_rank_0_writes_standard_output(rank, says):
    env = {**os.environ, "RANK": rank, "PRESCHOOL_PLUGINS": "",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH", "")]))}
    out = subprocess.run([sys.executable, "-m", "preschool.cli", "generate", "--list"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0 and ("shuffle_dyck" in out.stdout) == says and out.stderr == ""


@pytest.mark.parametrize("damage", ["train: {lr: 1\n", "train: 5\n"])
def test_a_damaged_run_config_is_named_as_that_file(tiny_experiment, tmp_path, capsys, damage):
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    run = out / "arms" / "a" / "seed0"
    (run / "DONE").unlink()
    (run / "config.yaml").write_text(damage)
    capsys.readouterr()
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[preschool]")]
    assert len(err) == 1 and err[0].startswith(f"preschool run: error: {run / 'config.yaml'}"), err
    assert "arms[0]" not in err[0] and f"records the run in {run}" in err[0]


def test_a_val_split_the_corpus_cannot_fill_points_at_val_fraction(tiny_experiment, capsys):
    out = tiny_experiment.parent / "out"
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress",
                 "--set", "data.pt.val_tokens=1000"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[preschool]")]
    assert len(err) == 1 and "data.pt.val_tokens" in err[0] and "data.pt.val_fraction, now 0.02" in err[0], err
