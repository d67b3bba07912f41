"""Cleanup removes only what we recorded as ours (issue 34, item 5): replacing an export, a generated set or a
dataset moves the earlier output aside under a name of its own and removes just that, so a user's `.E.old`
beside `--out E` survives; stale work folders of an earlier build are removed only when they hold the record
the build wrote into them, so a user's `.pt.work-notes` beside a dataset survives too."""

import json
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.corpora.base import CorpusConfig
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.prepare import prepare_data
from preschool.data.tokenizer import TokenizerConfig

SEQ = 16


def _users(folder: Path) -> Path:
    """A user's own folder named like our old cleanup's, holding work."""
    folder.mkdir()
    (folder / "keep.txt").write_text("mine\n")
    return folder


def _kept(folder: Path) -> bool:
    return (folder / "keep.txt").is_file() and (folder / "keep.txt").read_text() == "mine\n"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("run") / "data"
    prepare_data(data, TokenizerConfig(vocab_size=300, sample_documents=100),
                 {"sb": CorpusConfig(source="storybook", seed=0)},
                 {"pt": CorpusSpec(corpus="sb", tokens=30 * (SEQ + 1), val_tokens=6 * (SEQ + 1), unit_tokens=256)},
                 seq_len=SEQ, seed=0, progress=False)
    return data / "pt"


def test_export_keeps_a_users_dot_old_folder(dataset, tmp_path, capsys):
    out = tmp_path / "E"
    user = _users(tmp_path / ".E.old")
    for _ in range(2):  # the second replaces the first export: the step that removed .E.old
        assert main(["export", str(dataset), "--format", "numpy", "--out", str(out)]) == 0
    assert _kept(user)
    assert (out / "export.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".E.old", "E"]  # nothing of ours left beside it


def test_generate_keeps_a_users_dot_old_and_work_folders(tmp_path, capsys):
    out = tmp_path / "G"
    users = [_users(tmp_path / n) for n in (".G.old", ".G.work-notes", ".G.work-0123456789abcdef")]
    for tokens in ("2000", "3000"):  # another --tokens: another work key, so the earlier work folder is stale
        assert main(["generate", "stack", "--tokens", tokens, "--seq-len", "512", "--out", str(out), "--quiet"]) == 0
    assert all(_kept(u) for u in users)
    assert json.loads((out / "manifest.json").read_text())["n_rows"] > 0


def test_prepare_keeps_a_users_work_folder_beside_a_dataset(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    users = [_users(data / ".pt.work-notes"), _users(data / ".pt.old")]
    for tokens in (30, 40):
        prepare_data(data, TokenizerConfig(vocab_size=300, sample_documents=100),
                     {"sb": CorpusConfig(source="storybook", seed=0)},
                     {"pt": CorpusSpec(corpus="sb", tokens=tokens * (SEQ + 1), unit_tokens=256)},
                     seq_len=SEQ, seed=0, progress=False, rebuild=True)
    assert all(_kept(u) for u in users)


def test_our_stale_work_folder_is_still_removed(tmp_path, capsys):
    """A work folder an earlier generate left (killed before it finished) is removed by the next one with
    other settings, as before: it holds the record the build wrote."""
    from preschool.data import engine

    out = tmp_path / "G"
    stale = engine.work_dir(out, "0" * 16)
    stale.mkdir(exist_ok=True)
    (stale / "u00000000").mkdir()
    assert main(["generate", "stack", "--tokens", "2000", "--seq-len", "512", "--out", str(out), "--quiet"]) == 0
    assert not stale.exists()
