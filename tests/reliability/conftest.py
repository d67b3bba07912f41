"""Fixtures shared with tests/train (tiny learnable datasets, micro train config), loaded from there
rather than copied: ``datasets``, ``micro_cfg``, ``write_dataset``; and the reliability tests' own:
``tiny_experiment`` (an experiment YAML that prepares in about a second) and ``one_line_error``."""

import importlib.util
import random
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("_train_fixtures", Path(__file__).parents[1] / "train" / "conftest.py")
_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_train)

datasets = _train.datasets
micro_cfg = _train.micro_cfg
write_dataset = _train.write_dataset


# A whole experiment that prepares in about a second: a 400-line text corpus, one dataset.
TINY = """
name: locktest
seq_len: 16
corpora:
  txt: {{source: text, path: {corpus}, split_documents: lines}}
tokenizer: {{kind: train, vocab_size: 300, sample_documents: 100}}
data:
  pt: {{corpus: txt, tokens: 2000, val_tokens: 64}}
minimal_pairs: {{per_paradigm: 0}}
model: {{preset: micro}}
train: {{batch_size: 4, val: [pt]}}
arms:
  - name: a
    stages: [{{name: pt, data: pt, tokens: 256}}]
"""


@pytest.fixture
def tiny_experiment(tmp_path) -> Path:
    """The path of the tiny experiment's YAML (its corpus, ``corpus.txt``, beside it)."""
    rng = random.Random(0)
    words = "the cat dog sat ran on a mat big small red blue and then it was".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) for _ in range(400)))
    exp = tmp_path / "exp.yaml"
    exp.write_text(TINY.format(corpus=corpus))
    return exp


@pytest.fixture
def one_line_error(capsys):
    """``check(*names)``: what the command wrote to stderr is one line naming each of ``names``; returns it."""
    def check(*names) -> str:
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        for n in names:
            assert str(n) in err, err
        return err

    return check


class _Payload:
    """Unpickling this creates the file ``marker``: proof that code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def payload():
    """``payload(marker)``: an object whose unpickling creates the file ``marker`` (proof that code ran)."""
    return _Payload


@pytest.fixture
def plant_in_dcp_entry():
    """``plant(folder, fqn, obj)``: in the DCP folder ``folder`` (a checkpoint's ``sharded/``), point the first
    entry whose name ``fqn(name)`` accepts at ``torch.save(obj)`` appended to its shard, and forge every hash
    on the way (``.metadata``, ``manifest.json``, the checkpoint's ``checksums.json``): what someone who can
    write the checkpoint can do. Only the loader then stands between the pickle and the run."""
    import io
    import json
    import pickle

    import torch

    from preschool.io import sha256_file, write_json
    from preschool.train.checkpoint import record_checksums

    def plant(folder, fqn, obj):
        with open(folder / ".metadata", "rb") as fh:
            md = pickle.load(fh)
        key = next(k for k in md.storage_data if fqn(k.fqn))
        shard = folder / md.storage_data[key].relative_path
        buf = io.BytesIO()
        torch.save(obj, buf)
        offset = shard.stat().st_size
        with open(shard, "ab") as fh:
            fh.write(buf.getvalue())
        md.storage_data[key].offset, md.storage_data[key].length = offset, len(buf.getvalue())
        with open(folder / ".metadata", "wb") as fh:
            pickle.dump(md, fh)
        man = json.loads((folder / "manifest.json").read_text())
        for f in (shard, folder / ".metadata"):
            man["files"][f.name] = {"bytes": f.stat().st_size, "sha256": sha256_file(f)}
        write_json(folder / "manifest.json", man)
        record_checksums(folder.parent)

    return plant
