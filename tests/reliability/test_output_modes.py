"""What preschool writes is readable as the user's umask says, not private to the writer.

``tempfile`` makes files 0600 and folders 0700 whatever the umask; a temp-then-rename writer that
keeps those modes leaves every report, checkpoint, prepared dataset and export unreadable to the
rest of a cluster project group (found on the results of docs/results/: report.md was 0600)."""

import os
import stat

import pytest

from preschool.io import atomic_dir, atomic_path, write_json, write_text


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_atomic_files_and_folders_get_the_umask_modes(tmp_path, umask):
    write_text(tmp_path / "report.md", "x\n")
    write_json(tmp_path / "results.json", {"a": 1})
    with atomic_path(tmp_path / "weights.bin") as tmp:
        tmp.write_bytes(b"\0" * 8)
    with atomic_dir(tmp_path / "export") as d:
        (d / "part.bin").write_bytes(b"\0")
    for f in ("report.md", "results.json", "weights.bin", "export/part.bin"):
        assert _mode(tmp_path / f) == 0o666 & ~umask, f
    assert _mode(tmp_path / "export") == 0o777 & ~umask


def test_a_replaced_folder_gets_the_mode_too(tmp_path, umask):
    for _ in range(2):  # the second write replaces the first folder
        with atomic_dir(tmp_path / "ds") as d:
            (d / "manifest.json").write_text("{}")
    assert _mode(tmp_path / "ds") == 0o777 & ~umask
    assert _mode(tmp_path / "ds" / "manifest.json") == 0o666 & ~umask
