import pytest

from preschool.cli import COMMANDS, main


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: preschool {command}") and len(out.splitlines()) > 5


def test_bad_config_is_a_one_line_error_naming_the_field(tmp_path, capsys):
    cfg = tmp_path / "x.yaml"
    cfg.write_text("name: x\narms: [{name: a, stages: [{name: s, data: d, tokens: -1}]}]\n")
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("preschool run: error: arms[0].stages[0].tokens: must be > 0")
    assert not (tmp_path / "runs").exists()


def test_missing_config_file(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err
