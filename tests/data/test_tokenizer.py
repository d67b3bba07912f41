"""Tokenizers: our BPE (<|endoftext|> is EOS/BOS/PAD) and any Hugging Face tokenizer with its own special ids.

The HF tokenizers are local folders (tests are offline) shaped like the papers' (conftest.build_hf_tokenizer):
Llama-3 / SmolLM3 style with the specials after the vocabulary, Mistral style with <unk> = 0, <s> = 1, </s> = 2.
"""

import numpy as np
import pytest

from preschool.config import from_dict
from preschool.corpora.base import CorpusConfig
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.prepare import prepare_data
from preschool.data.shards import ShardSet
from preschool.l2t.builder import L2TSpec
from preschool.synthetic.builder import GeneratorSpec
from preschool.data.tokenizer import (
    TokenizerConfig, load_hf_tokenizer, load_special_ids, special_ids, tokenizer_hash, tokenizer_size, train_bpe,
)
from preschool.errors import ConfigError

SB = {"sb": CorpusConfig(source="storybook", seed=0)}
UNIT = 2048  # tokens per work unit: a unit reads only the documents these tiny budgets need


def _hf(folder, **renames):
    return TokenizerConfig(kind="hf", name=str(folder), **renames)


def _rows(path, name="tokens"):
    ss = ShardSet(path)
    return ss.rows(range(len(ss)), name)


def test_our_bpe_uses_endoftext_for_all_three():
    tok = train_bpe(["the cat sat on the mat"] * 20, vocab_size=280)
    sp = special_ids(tok)
    assert (sp.eos, sp.bos, sp.pad) == (0, 0, 0) and sp.prefix == 0


def test_hf_tokenizers_keep_their_own_special_ids(hf_tokenizer):
    llama = load_hf_tokenizer(hf_tokenizer("llama3"))
    sp = special_ids(llama)
    begin, end, im_end = (llama.convert_tokens_to_ids(t) for t in ("<|begin_of_text|>", "<|end_of_text|>", "<|im_end|>"))
    assert (sp.bos, sp.eos, sp.pad) == (begin, im_end, im_end) and 0 not in (begin, end, im_end)
    assert tokenizer_size(llama) == len(llama) == im_end + 1  # reserved ids start after the appended specials
    mistral = load_hf_tokenizer(hf_tokenizer("mistral"))
    sp = special_ids(mistral)
    assert (sp.bos, sp.eos, sp.pad) == (1, 2, 2)  # no PAD token: padding is EOS (the L2T reference's rule)
    assert sp.prefix == 1


def test_renamed_eos_changes_the_ids_and_the_hash(hf_tokenizer):
    folder = hf_tokenizer("llama3")
    plain = load_hf_tokenizer(folder)
    docs_end = load_hf_tokenizer(folder, eos_token="<|end_of_text|>")
    assert special_ids(docs_end).eos == docs_end.convert_tokens_to_ids("<|end_of_text|>") != special_ids(plain).eos
    assert tokenizer_hash(docs_end) != tokenizer_hash(plain)
    with pytest.raises(ConfigError, match=r"tokenizer\.eos_token.*'<\|eot\|>' is not a token"):
        load_hf_tokenizer(folder, eos_token="<|eot|>")


def test_a_tokenizer_that_cannot_be_loaded_offline_is_one_line_naming_it():
    with pytest.raises(ConfigError) as e:
        load_hf_tokenizer("preschool-tests/no-such-tokenizer")
    msg = str(e.value)
    assert "tokenizer.name" in msg and "preschool-tests/no-such-tokenizer" in msg and "HF_HUB_OFFLINE" in msg
    assert "\n" not in msg


def test_declared_vocab_size_is_checked(hf_tokenizer):
    n = len(load_hf_tokenizer(hf_tokenizer("mistral")))
    assert tokenizer_size(load_hf_tokenizer(hf_tokenizer("mistral"), vocab=n)) == n
    with pytest.raises(ConfigError, match=rf"tokenizer\.vocab_size.*128256 given.*has {n} tokens"):
        load_hf_tokenizer(hf_tokenizer("mistral"), vocab=128256)


@pytest.mark.parametrize("raw, field", [
    ({"kind": "hf"}, "tokenizer.name"),
    ({"kind": "hf", "name": "x", "path": "y"}, "tokenizer.path"),
    ({"kind": "train", "eos_token": "</s>"}, "tokenizer.eos_token"),
    ({"kind": "word"}, "tokenizer.kind"),
])
def test_bad_tokenizer_configs_name_the_field(raw, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        from_dict(TokenizerConfig, raw, "tokenizer")


def test_default_bpe_size_is_2048():
    assert TokenizerConfig().bpe_vocab_size == 2048 and TokenizerConfig(vocab_size=300).bpe_vocab_size == 300


@pytest.mark.parametrize("style", ["llama3", "mistral"])
def test_prepare_with_an_hf_tokenizer_ends_documents_with_its_eos_only(tmp_path, hf_tokenizer, style):
    folder = hf_tokenizer(style)
    tok = load_hf_tokenizer(folder)
    sp, n = special_ids(tok), len(tok)
    datasets = {"pt": CorpusSpec(corpus="sb", tokens=4096, unit_tokens=UNIT),
                "dyck": GeneratorSpec(generator="shuffle_dyck", params={"length": 24}, tokens=1024, render="reserved"),
                "dyck_pad": GeneratorSpec(generator="shuffle_dyck", params={"length": 12}, tokens=1024, pack="pad")}
    m = prepare_data(tmp_path, _hf(folder), SB, datasets, seq_len=63, seed=0, progress=False)
    assert m["tokenizer"]["special_ids"] == sp.as_dict() and m["tokenizer"]["vocab_size"] == n
    assert m["tokenizer"]["config"] == {"kind": "hf", "name": str(folder), "eos_token": None, "bos_token": None,
                                        "pad_token": None}
    assert len(m["tokenizer"]["files_sha256"]) == 64
    assert load_special_ids(tmp_path / "tokenizer") == sp  # what the trainer and the checkpoints read
    # natural text: the EOS sits exactly where a document ends (the segment changes) and nowhere else
    toks, segs = _rows(tmp_path / "pt" / "train"), _rows(tmp_path / "pt" / "train", "segments")
    ends = np.zeros_like(toks, bool)
    ends[:, :-1] = segs[:, 1:] != segs[:, :-1]
    assert ends.sum() > 10 and (toks[ends] == sp.eos).all()
    assert (toks[:, :-1][toks[:, :-1] == sp.eos].size == ends[:, :-1].sum())
    assert not (toks == sp.bos).any()  # text is encoded without the post-processor's BOS
    # reserved render: symbols after every id of the tokenizer (len(tokenizer)), documents end with its EOS
    dyck = _rows(tmp_path / "dyck" / "train")
    assert ((dyck >= n) | (dyck == sp.eos)).all() and (dyck == sp.eos).any()
    assert m["datasets"]["dyck"]["splits"]["train"]["reserved_ids"][0] == n
    # pad packing fills with the tokenizer's PAD (EOS when it has none)
    assert (_rows(tmp_path / "dyck_pad" / "train")[:, -1] == sp.pad).any()


def test_mistral_style_never_writes_unk_or_id_0(tmp_path, hf_tokenizer):
    datasets = {"pt": CorpusSpec(corpus="sb", tokens=4096, unit_tokens=UNIT)}
    prepare_data(tmp_path, _hf(hf_tokenizer("mistral")), SB, datasets, seq_len=63, seed=0, progress=False)
    assert not (_rows(tmp_path / "pt" / "train") == 0).any()  # <unk>: byte-level BPE covers every character


def test_l2t_samples_start_with_bos_and_pad_with_eos(tmp_path, hf_tokenizer):
    l2t = {"scenario": "disjoint", "raw_ratio": 0.0, "l2t": {"min_num_words": 3}}
    datasets = {"l2t": L2TSpec(corpus="sb", tokens=8192, unit_tokens=UNIT, l2t=l2t)}
    prepare_data(tmp_path, _hf(hf_tokenizer("mistral")), SB, datasets, seq_len=255, seed=0, progress=False)
    toks, segs = _rows(tmp_path / "l2t" / "train"), _rows(tmp_path / "l2t" / "train", "segments")
    starts = np.ones_like(toks, bool)
    starts[:, 1:] = segs[:, 1:] != segs[:, :-1]
    first = toks[starts]
    # every piece of a row starts with BOS <s> = 1, except the EOS padding (</s> = 2) after the last sample
    assert (first == 1).sum() > 5 and set(np.unique(first)) <= {1, 2}
    assert (toks == 2).any() and not (toks == 0).any()


def test_rerun_reuses_an_hf_tokenizer_and_refuses_another(tmp_path, hf_tokenizer):
    datasets = {"pt": CorpusSpec(corpus="sb", tokens=2048, unit_tokens=UNIT)}
    first = prepare_data(tmp_path, _hf(hf_tokenizer("mistral")), SB, datasets, seq_len=63, progress=False)
    again = prepare_data(tmp_path, _hf(hf_tokenizer("mistral")), SB, datasets, seq_len=63, progress=False)
    assert again == first
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for other in (_hf(hf_tokenizer("llama3")), _hf(hf_tokenizer("mistral"), eos_token="<s>"),
                  TokenizerConfig(vocab_size=300, sample_documents=200)):
        with pytest.raises(ConfigError, match="tokenizer: .*built from another tokenizer config"):
            prepare_data(tmp_path, other, SB, datasets, seq_len=63, progress=False)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing lost


def test_renaming_the_eos_rebuilds_the_data_in_a_new_folder(tmp_path, hf_tokenizer):
    datasets = {"pt": CorpusSpec(corpus="sb", tokens=2048, unit_tokens=UNIT)}
    folder = hf_tokenizer("llama3")
    a = prepare_data(tmp_path / "a", _hf(folder), SB, datasets, seq_len=63, progress=False)
    b = prepare_data(tmp_path / "b", _hf(folder, eos_token="<|end_of_text|>"), SB, datasets, seq_len=63,
                     progress=False)
    assert a["tokenizer"]["sha256"] != b["tokenizer"]["sha256"]
    assert a["datasets"]["pt"]["hash"] != b["datasets"]["pt"]["hash"]
    end = b["tokenizer"]["special_ids"]["eos"]
    assert (_rows(tmp_path / "b" / "pt" / "train") == end).any()
    assert not (_rows(tmp_path / "a" / "pt" / "train") == end).any()


def test_a_checkpoint_folder_keeps_the_tokenizers_own_ids(tmp_path, hf_tokenizer):
    """Beside a model's config.json (a checkpoint, or `preschool train`'s tokenizer: pointing at one) the
    tokenizer is read as its files say: AutoTokenizer's Qwen2Tokenizer would add a PAD after the vocabulary."""
    import shutil

    from transformers import Qwen2Config

    ckpt = tmp_path / "ckpt"
    shutil.copytree(hf_tokenizer("mistral"), ckpt)
    Qwen2Config(vocab_size=448).save_pretrained(str(ckpt))
    assert load_special_ids(ckpt).as_dict() == {"bos": 1, "eos": 2, "pad": 2}
    assert len(load_hf_tokenizer(ckpt)) == len(load_hf_tokenizer(hf_tokenizer("mistral")))
