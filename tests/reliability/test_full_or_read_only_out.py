"""A full disk or a read-only output folder ends every writing command in one line naming the path,
exit 2, nothing already written changed (issue 22, item 10; docs/training.md promises it).

The disk is real where the machine allows: a small tmpfs (full disk) and a read-only bind mount
(root ignores permission bits, so chmod proves nothing here). Both need root and mount rights;
without them those tests skip, saying why. The shard writer's full disk and the CLI's handling of
an OSError are also tested with a patched write, which runs everywhere.
"""

import errno
import json
import subprocess
from pathlib import Path

import pytest
import yaml

import preschool.data.shards as shards
from preschool.cli import main
from preschool.corpora import Storybook
from preschool.data.shards import ShardWriter
from preschool.errors import OutputError

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
# quickstart.yaml prepared in seconds: 300 stories from a JSON Lines file, a 300-token BPE, no val splits
PREPARE = ["seq_len=32", "tokenizer.vocab_size=300", "tokenizer.sample_documents=200", "data.pt.tokens=4224",
           "data.pt.val_tokens=0", "data.dyck.tokens=1056", "data.dyck.val_tokens=0", "data.dyck.params.length=24",
           "minimal_pairs.per_paradigm=2", "model.preset=micro", "train.val=[]", "corpora.storybook.source=jsonl"]
L2T = ["--seq-len", "127", "--vocab-size", "300", "--min-words", "10"]


def _mount(*args: str) -> None:
    try:
        res = subprocess.run(["mount", *args], capture_output=True, text=True)
    except OSError as e:  # no mount program at all
        pytest.skip(f"cannot mount here ({e})")
    if res.returncode:
        pytest.skip(f"cannot mount here ({res.stderr.strip() or res.returncode}): needs root and mount rights")


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(size)``: a fresh tmpfs of ``size`` (e.g. "128k"); ``small_disk.grow(path, size)`` enlarges it."""
    mounted = []

    def make(size: str) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
        mounted.append(where)
        return where

    make.grow = lambda where, size: _mount("-o", f"remount,size={size}", str(where))
    yield make
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def read_only(tmp_path):
    """``read_only(folder)``: bind-mount ``folder`` onto itself read-only (for root too)."""
    mounted = []

    def make(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        _mount("--bind", str(folder), str(folder))
        mounted.append(folder)
        _mount("-o", "remount,bind,ro", str(folder))
        return folder

    yield make
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)


def _one_line(capsys, *names) -> str:
    """The one error line (progress bars and the verification note may precede it), naming ``names``."""
    out = capsys.readouterr().err
    errors = [x for x in out.splitlines() if x.startswith("preschool ")]
    assert len(errors) == 1 and out.strip().endswith(errors[0]) and "Traceback" not in out, out
    for n in names:
        assert str(n) in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def stories(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stories")
    book = Storybook(seed=0)
    (folder / "stories.jsonl").write_text("".join(json.dumps({"text": book.story(i)}) + "\n" for i in range(300)))
    for i in range(40):  # the same stories as text files, for transform l2t
        (folder / "txt").mkdir(exist_ok=True)
        (folder / "txt" / f"s{i}.txt").write_text(" ".join(book.story(j) for j in range(5 * i, 5 * i + 5)))
    return folder


def _prepare(out: Path, stories: Path, command: str = "prepare") -> int:
    sets = [*PREPARE, f"corpora.storybook.path={stories / 'stories.jsonl'}"]
    where = ["--out", str(out)] if command == "prepare" else ["--set", f"out={out}"]
    return main([command, str(QUICKSTART), *where, "--no-progress", *(x for s in sets for x in ("--set", s))])


# ---------------------------------------------------------------- a full disk

# sizes at which the writes of tokenizer, dyck shards, pt units and pt shards run out (on main, 3 of
# these ended in "OSError: N requested and M written" from ndarray.tofile, or a worker's error lost)
@pytest.mark.parametrize("size", ["16k", "96k", "128k", "200k"])
def test_prepare_on_a_full_disk_is_one_line_and_resumes_once_there_is_room(tmp_path, stories, small_disk, capsys,
                                                                           size):
    disk = small_disk(size)
    out = disk / "run"
    assert _prepare(out, stories) == 2
    err = _one_line(capsys, "cannot write (No space left on device)", "free space", str(disk))
    assert "requested and" not in err
    small_disk.grow(disk, "4m")
    assert _prepare(out, stories) == 0  # the same command, once there is room, finishes
    assert (out / "data" / "manifest.json").is_file()


@pytest.mark.parametrize("size", ["32k", "160k"])
def test_transform_l2t_on_a_full_disk_is_one_line(tmp_path, stories, small_disk, capsys, size):
    disk = small_disk(size)
    assert main(["transform", "l2t", "--input", str(stories / "txt"), "--out", str(disk / "l2t"), *L2T]) == 2
    _one_line(capsys, "cannot write (No space left on device)", str(disk))
    assert not (disk / "l2t").exists()  # nothing under the final name


class _FullFile:
    """A file whose writes fail as on a full disk."""

    def __init__(self, *a, **kw):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


def test_shard_writer_on_a_full_disk_names_the_set_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(shards, "open", _FullFile, raising=False)
    with pytest.raises(OutputError) as e:
        with ShardWriter(tmp_path / "set", 5, 50, rows_per_shard=1) as w:
            w.add_rows([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])
    assert e.value.path == str(tmp_path / "set") and "No space left on device" in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no set, no temp folder


def test_cli_reports_an_unwrapped_write_failure_in_one_line(monkeypatch, capsys):
    import preschool.commands.generate as gen_cli

    for code, says in ((errno.ENOSPC, "cannot write (No space left on device)"),
                       (errno.EROFS, "cannot write (Read-only file system); make it writable"),
                       (errno.EACCES, "Permission denied; check its permissions")):
        def refuse(args, code=code):
            raise OSError(code, "x", "/some/out/.lock")

        monkeypatch.setattr(gen_cli, "run", refuse)
        assert main(["generate", "shuffle_dyck", "--out", "/some/out"]) == 2
        _one_line(capsys, "/some/out/.lock", says)

    def bug(args):
        raise OSError(errno.EBADF, "Bad file descriptor")  # no path, not the user's to fix: a traceback

    monkeypatch.setattr(gen_cli, "run", bug)
    with pytest.raises(OSError):
        main(["generate", "shuffle_dyck", "--out", "/some/out"])


# ---------------------------------------------------------------- a read-only output folder

def _ro_says(capsys, ro):
    _one_line(capsys, ro, "Read-only file system", "make it writable")


def test_prepare_and_run_into_a_read_only_folder(tmp_path, stories, read_only, capsys):
    ro = read_only(tmp_path / "ro")
    assert _prepare(ro / "run", stories) == 2
    _ro_says(capsys, ro)
    assert _prepare(ro / "run", stories, command="run") == 2
    _ro_says(capsys, ro)


def test_prepare_into_a_run_folder_made_read_only(tmp_path, stories, read_only, capsys):
    read_only(tmp_path / "probe")  # where mounts are not allowed, skip before preparing
    out = tmp_path / "run"
    assert _prepare(out, stories) == 0
    capsys.readouterr()
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    read_only(out)
    assert main(["prepare", str(QUICKSTART), "--out", str(out), "--no-progress", "--rebuild",
                 *(x for s in [*PREPARE, f"corpora.storybook.path={stories / 'stories.jsonl'}"]
                   for x in ("--set", s))]) == 2
    _ro_says(capsys, out)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_train_into_a_read_only_folder(tmp_path, datasets, read_only, capsys):
    cfg = {"train": {"model": {"preset": "micro", "overrides": {"hidden_size": 32}}, "batch_size": 4,
                     "progress": False, "stages": [{"name": "pt", "data": "text", "tokens": 4 * 16 * 2}]},
           "datasets": {k: str(v) for k, v in datasets.items()}}
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(cfg))
    ro = read_only(tmp_path / "ro")
    assert main(["train", str(tmp_path / "train.yaml"), "--out", str(ro / "run")]) == 2
    _ro_says(capsys, ro)


def test_eval_out_generate_and_l2t_into_a_read_only_folder(tmp_path, datasets, micro_cfg, stories, read_only,
                                                            capsys):
    from preschool.train.trainer import train

    ro = read_only(tmp_path / "ro")  # first: where mounts are not allowed, skip before training
    run = tmp_path / "run"
    train(micro_cfg(checkpoint_every=8, eval_every=0), run, datasets)
    ckpt = next((run / "checkpoints").iterdir())
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(ckpt), "--out", str(ro / "evals"), "--evaluator", "heldout",
                 "--set", f"sources.t={datasets['text']}"]) == 2
    _ro_says(capsys, ro)
    assert main(["generate", "shuffle_dyck", "--tokens", "2000", "--seq-len", "31", "--out", str(ro / "gen"),
                 "--quiet"]) == 2
    _ro_says(capsys, ro)
    assert main(["transform", "l2t", "--input", str(stories / "txt"), "--out", str(ro / "l2t"), *L2T]) == 2
    _ro_says(capsys, ro)


def test_a_refused_permission_on_the_output_is_an_output_error_on_an_input_it_is_not(tmp_path, monkeypatch):
    """What a non-root user meets in a chmod -w folder (root is never refused, so the OS call is patched)."""
    import tempfile

    import preschool.io as pio

    target = tmp_path / "out" / "results.json"

    def refused(*a, dir=None, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", str(Path(dir) / f".{target.name}.abc.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(OutputError) as e:
        pio.write_json(target, {"v": 1})
    assert e.value.path == str(target) and "Permission denied" in str(e.value) and "make it writable" in str(e.value)
    monkeypatch.undo()

    source = tmp_path / "input.txt"  # an input refused inside an output's block stays that input's own error
    with pytest.raises(PermissionError) as e:
        with pio.atomic_path(target):
            raise PermissionError(errno.EACCES, "Permission denied", str(source))
    assert e.value.filename == str(source) and not target.exists()
