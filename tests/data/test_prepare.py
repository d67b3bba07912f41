"""prepare_data: a rerun with an unchanged config reuses every dataset (nothing rebuilt)."""

from preschool.corpora.base import CorpusConfig
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.prepare import prepare_data
from preschool.data.tokenizer import TokenizerConfig, load_tokenizer, tokenizer_hash
from preschool.synthetic.builder import GeneratorSpec


def _prepare(out, capsys):
    corpora = {"sb": CorpusConfig(source="storybook", seed=0)}
    datasets = {
        "pt": CorpusSpec(corpus="sb", tokens=4096, val_tokens=512),
        "dyck": GeneratorSpec(generator="shuffle_dyck", params={"length": 24}, tokens=1024),
    }
    manifest = prepare_data(out, TokenizerConfig(vocab_size=300, sample_documents=200), corpora, datasets,
                            seq_len=32, seed=0, progress=False)
    return manifest, capsys.readouterr().out


def test_rerun_reuses_tokenizer_and_datasets(tmp_path, capsys):
    first, log1 = _prepare(tmp_path, capsys)
    assert log1.count("building") == 2
    # every file but the top-level manifest (rewritten with the same content) stays untouched
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file() and p.name != "manifest.json"}
    second, log2 = _prepare(tmp_path, capsys)
    # the freshly trained tokenizer and the one a rerun loads from disk hash the same
    assert "building" not in log2 and log2.count("up to date") == 2, log2
    assert second == first
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert first["tokenizer"]["sha256"] == tokenizer_hash(load_tokenizer(tmp_path / "tokenizer"))
