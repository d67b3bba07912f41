import json

import pytest

from preschool.corpora import CorpusConfig
from preschool.data.shards import ShardSet
from preschool.data.tokenizer import train_bpe
from preschool.errors import ConfigError
from preschool.l2t.builder import l2t_build_config, write_l2t_dataset


def test_experiment_dataset_from_storybook(tmp_path):
    corpus = CorpusConfig(source="storybook", max_documents=400)
    from preschool.corpora import iter_documents

    tok = train_bpe((d.text for d in iter_documents(corpus)), 400)
    m = write_l2t_dataset("l2t", {"scenario": "disjoint", "l2t": {"min_num_words": 5}}, corpus, tok, row_len=129,
                          seed=0, out=tmp_path / "l2t", tokens=129 * 20, val_tokens=129 * 2, val_fraction=0.1)
    assert m["train"]["n_rows"] == 20 and m["val"]["n_rows"] <= 2
    assert ShardSet(tmp_path / "l2t" / "train").row_len == 129
    cfg = json.loads((tmp_path / "l2t" / "manifest.json").read_text())["config"]
    assert cfg["l2t"]["chunk_tokens"] == 32 and cfg["l2t"]["count_tokens"] == "chars"


def test_seq_len_is_the_experiments():
    with pytest.raises(ConfigError, match="l2t.seq_len"):
        l2t_build_config({"seq_len": 64}, 128, 0, 1000, 0, 0.0)
    with pytest.raises(ConfigError, match="l2t.scenario"):
        l2t_build_config({"scenario": "sharde"}, 128, 0, 1000, 0, 0.0)


def test_example_l2t_blocks_validate():
    from pathlib import Path

    import yaml

    ex = Path(__file__).resolve().parents[2] / "examples" / "l2t_blimp.yaml"
    d = yaml.safe_load(ex.read_text())
    blocks = {n: s for n, s in d["data"].items() if "l2t" in s}
    assert set(blocks) == {"l2t_disjoint", "l2t_shared"}
    for n, s in blocks.items():
        cfg = l2t_build_config(s["l2t"], d["seq_len"], 0, s["tokens"], s["val_tokens"], 0.02, field=f"data.{n}.l2t")
        assert cfg.train_tokens == s["tokens"] == d["data"]["raw"]["tokens"]
