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


def _private(root) -> list[str]:
    """Every file and folder under ``root`` whose mode is not what umask 022 gives (0644 / 0755)."""
    bad = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            want = 0o755 if os.path.isdir(p) else 0o644
            if _mode(p) != want:
                bad.append(f"{os.path.relpath(p, root)}: {oct(_mode(p))}")
    return bad



def test_a_whole_run_folder_data_folder_and_export_get_the_umask_modes(tmp_path, monkeypatch):
    """Checkpoint weights (``save_pretrained``'s safetensors) were 0600 under umask 022 (issue 33 item 6):
    every file an experiment, its data and its exports hold must be readable by the group."""
    from pathlib import Path

    from preschool.cli import main

    old = os.umask(0o022)
    try:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        micro = Path(__file__).resolve().parents[1] / "launch_micro.yaml"
        out = tmp_path / "out"
        assert main(["run", str(micro), "--set", f"out={out}", "--no-progress"]) == 0
        assert list(out.glob("arms/*/seed0/checkpoints/step-*/model.safetensors"))
        for fmt in ("hf", "megatron", "nanotron", "numpy"):
            assert main(["export", str(out / "data" / "pt"), "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
    finally:
        os.umask(old)
    assert _private(tmp_path) == []
