"""A path a command writes that is the wrong kind of thing (issue 48): a file where a folder goes
(``checkpoints``, ``plots``, ``--out /dev/null``) or a folder where a file goes (``report.md``) ends the
command in one line naming it, never a FileExistsError or IsADirectoryError traceback; the thing in the
way is left as it was."""

import shutil

import pytest

from preschool.cli import main


def test_checkpoints_a_file_is_one_line(tiny_experiment, tmp_path, capsys):
    out = tmp_path / "out"
    run = out / "arms" / "a" / "seed0"
    run.mkdir(parents=True)
    (run / "checkpoints").write_text("mine\n")
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[preschool]")]  # progress notes
    assert len(err) == 1 and f"{run / 'checkpoints'}: is not a folder" in err[0], err
    assert (run / "checkpoints").read_text() == "mine\n"


@pytest.mark.parametrize("what", ["plots", "report.md"])
def test_a_report_path_of_the_wrong_kind_is_one_line(tiny_experiment, tmp_path, capsys, one_line_error, what):
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    shutil.rmtree(out / what) if (out / what).is_dir() else (out / what).unlink()
    if what == "plots":
        (out / what).write_text("mine\n")
    else:
        (out / what).mkdir()
        (out / what / "keep").write_text("mine\n")
    assert main(["report", str(tiny_experiment), "--set", f"out={out}"]) == 2
    one_line_error(out / what, "not a folder" if what == "plots" else "is a folder")
    assert (out / what).read_text() == "mine\n" if what == "plots" else (out / what / "keep").exists()


def test_prepare_out_dev_null_is_one_line(tiny_experiment, one_line_error):
    assert main(["prepare", str(tiny_experiment), "--out", "/dev/null", "--no-progress"]) == 2
    one_line_error("/dev/null", "not a folder")
