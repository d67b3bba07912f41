"""prepare_data: a rerun with an unchanged config reuses every dataset (nothing rebuilt)."""

from preschool.corpora.base import CorpusConfig
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.prepare import prepare_data
from preschool.data.tokenizer import TokenizerConfig, load_tokenizer, tokenizer_hash
from preschool.synthetic.builder import GeneratorSpec


def _prepare(out, capsys):
    corpora = {"sb": CorpusConfig(source="storybook", seed=0)}
    datasets = {
        "pt": CorpusSpec(corpus="sb", tokens=4096, val_tokens=512, unit_tokens=2048),
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


def test_document_separators_follow_the_experiments_l2t_datasets(tmp_path, hf_tokenizer, capsys):
    """L2T data starts every document with BOS and ends none with EOS (the reference's Mistral tokenization);
    a raw-text dataset beside it separates its documents the same way (`separator: auto`), so the raw and
    L2T arms of one experiment differ only in the exercises; `separator: eos` states a departure
    (issue #31 item 5). Without L2T data, documents end with EOS as before, keyed as before."""
    import numpy as np

    from preschool.data.shards import ShardSet
    from preschool.data.tokenizer import load_special_ids
    from preschool.l2t.builder import L2TSpec

    corpora = {"sb": CorpusConfig(source="storybook", seed=0)}
    l2t = L2TSpec(corpus="sb", l2t={"scenario": "disjoint"}, tokens=4096)
    assert CorpusSpec(corpus="sb").resolved_separator({"raw": CorpusSpec(corpus="sb"), "l2t": l2t}) == "bos"
    assert CorpusSpec(corpus="sb").resolved_separator({"raw": CorpusSpec(corpus="sb")}) == "eos"
    assert CorpusSpec(corpus="sb", separator="eos").resolved_separator({"l2t": l2t}) == "eos"

    tok = TokenizerConfig(kind="hf", name=str(hf_tokenizer("mistral")))
    rows = {}
    for sep in ("bos", "eos"):
        out = tmp_path / sep
        m = prepare_data(out, tok, corpora, {"raw": CorpusSpec(corpus="sb", tokens=4096, separator=sep, unit_tokens=8192)},
                         seq_len=64, progress=False)
        ids = load_special_ids(out / "tokenizer")
        shards = ShardSet(out / "raw" / "train")
        rows[sep] = shards.rows(range(len(shards)))
        assert ("separator" in m["datasets"]["raw"]["key"]["spec"]) == (sep == "bos")
    assert (rows["bos"] == ids.eos).sum() == 0 and (rows["bos"] == ids.bos).sum() > 3
    assert (rows["eos"] == ids.bos).sum() == 0 and (rows["eos"] == ids.eos).sum() > 3
    capsys.readouterr()


def test_l2t_paper_arms_all_start_documents_with_bos():
    from pathlib import Path

    from preschool.experiment import load_experiment

    cfg = load_experiment(Path(__file__).resolve().parents[2] / "examples" / "paper" / "l2t_paper.yaml").cfg
    assert {n: d.resolved_separator(cfg.data) for n, d in cfg.data.items() if isinstance(d, CorpusSpec)} == {
        "raw": "bos", "raw_shared": "bos"}
