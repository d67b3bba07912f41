"""`--out` is resolved once (issue 34, item 6): a symbolic link is followed deliberately (the output is
written at its target and the link keeps pointing there, however often it is rewritten), a link to nothing is
refused, and an `--out` that is the folder the command runs in (`.`, `../here` from inside `here`) or one
above it is refused, since writing it whole would replace that folder under the user's shell. No lock or
temp folder is left behind."""

from pathlib import Path

import pytest

from preschool.cli import main


def _generate(out, tokens="2000") -> int:
    return main(["generate", "stack", "--tokens", tokens, "--seq-len", "512", "--out", str(out), "--quiet"])


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_linked_out_is_written_at_its_target_and_stays_a_link(tmp_path, capsys):
    target = tmp_path / "big_disk" / "dyck"
    target.mkdir(parents=True)
    link = tmp_path / "L"
    link.symlink_to(target)
    for tokens in ("2000", "3000"):  # the second replaces the first output: the step that broke the link
        assert _generate(link, tokens) == 0
        assert link.is_symlink() and link.resolve() == target.resolve()
        assert (target / "manifest.json").is_file()
    assert _leftovers(tmp_path) == [] and _leftovers(target.parent) == []  # no lock, .old or temp left


def test_export_to_a_linked_out_follows_it(tmp_path, capsys):
    gen = tmp_path / "gen"
    assert _generate(gen) == 0
    target = tmp_path / "exports" / "E"
    target.parent.mkdir()
    link = tmp_path / "E"
    link.symlink_to(target, target_is_directory=True)  # a link to a folder not made yet: the export makes it
    target.mkdir()
    for _ in range(2):
        assert main(["export", str(gen), "--format", "numpy", "--out", str(link)]) == 0
        assert link.is_symlink() and (target / "export.json").is_file()
    assert _leftovers(tmp_path) == [] and _leftovers(target.parent) == []


def test_a_link_to_nothing_is_refused(tmp_path, capsys, one_line_error):
    link = tmp_path / "L"
    link.symlink_to(tmp_path / "missing" / "dyck")
    assert _generate(link) == 2
    one_line_error("--out", link)
    assert link.is_symlink() and not (tmp_path / "missing").exists()


def test_a_linked_folder_of_the_users_is_refused_like_the_folder(tmp_path, capsys, one_line_error):
    target = tmp_path / "notes"
    target.mkdir()
    (target / "thesis.txt").write_text("mine\n")
    link = tmp_path / "L"
    link.symlink_to(target)
    assert _generate(link) == 2
    one_line_error("--out", "thesis.txt")
    assert (target / "thesis.txt").read_text() == "mine\n" and link.is_symlink()


@pytest.mark.parametrize("out", [".", "../here", ".."])
def test_the_folder_the_command_runs_in_is_refused(tmp_path, monkeypatch, out, capsys, one_line_error):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert _generate(out) == 2
    one_line_error("--out", "this command runs in")
    assert Path.cwd() == here.resolve() and here.is_dir() and list(here.iterdir()) == []
    assert _leftovers(tmp_path) == []
