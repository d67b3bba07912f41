"""preschool export: every format reads back, with the target trainer's own reader where it is
installed here (datasets, Megatron-core, datatrove) and by OLMo-core's documented memmap layout,
token for token, loss mask and document boundaries included."""

import importlib
import json
import os

import numpy as np
import pytest

from preschool.cli import main
from preschool.corpora.base import CorpusConfig
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.export import document_ends, export_dataset
from preschool.data.prepare import prepare_data
from preschool.data.shards import ShardSet
from preschool.data.tokenizer import TokenizerConfig
from preschool.errors import ConfigError, DataError
from preschool.synthetic.builder import GeneratorSpec

SEQ = 32


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("prep")
    corpora = {"sb": CorpusConfig(source="storybook", seed=0)}
    datasets = {
        "pt": CorpusSpec(corpus="sb", tokens=40 * (SEQ + 1), val_tokens=8 * (SEQ + 1)),
        # reserved ids above the tokenizer's vocabulary, with an answer-only loss mask
        "stack": GeneratorSpec(generator="stack", params={"n_ops": 8, "length": 20, "n_symbols": 10},
                               render="reserved", tokens=12 * (SEQ + 1)),
        # the quickstart's Dyck set: a loss_mask array that is all ones (loss on every token)
        "dyck": GeneratorSpec(generator="shuffle_dyck", params={"k": 16, "max_depth": 8, "p_open": 0.5, "length": 64},
                              render="text", tokens=12 * (SEQ + 1), val_tokens=4 * (SEQ + 1)),
    }
    prepare_data(out, TokenizerConfig(vocab_size=300, sample_documents=200), corpora, datasets,
                 seq_len=SEQ, seed=0, progress=False)
    return out


def _rows(path, name="tokens"):
    ss = ShardSet(path)
    return ss.rows(range(len(ss)), name)


def _positions(segments):
    """Position of each token within its document (what datatrove derives from .ds.index)."""
    pos = np.zeros(segments.shape, np.int64)
    for r, seg in enumerate(segments):
        for j in range(1, len(seg)):
            pos[r, j] = 0 if seg[j] != seg[j - 1] else pos[r, j - 1] + 1
    return pos


def test_hf_round_trip(data, tmp_path):
    from datasets import load_from_disk

    info = export_dataset(data / "stack", "hf", tmp_path / "hf")
    dd = load_from_disk(str(tmp_path / "hf"))
    assert set(dd) == {"train"} and info["splits"]["train"]["columns"] == ["input_ids", "loss_mask"]
    ds = dd["train"].with_format("numpy")
    assert np.array_equal(ds["input_ids"], _rows(data / "stack" / "train"))
    assert np.array_equal(ds["loss_mask"], _rows(data / "stack" / "train", "loss_mask"))
    assert (tmp_path / "hf" / "tokenizer" / "tokenizer.json").is_file()
    # natural text has no loss mask: only input_ids, both splits
    export_dataset(data / "pt", "hf", tmp_path / "hf_pt")
    dd = load_from_disk(str(tmp_path / "hf_pt"))
    assert set(dd) == {"train", "val"} and dd["val"].column_names == ["input_ids"]
    assert np.array_equal(dd["val"].with_format("numpy")["input_ids"], _rows(data / "pt" / "val"))


def _doc_lengths(segments):
    """Our documents' lengths in order: a segment-number change inside a row or a row end closes one."""
    out = []
    for seg in segments:
        n = 1
        for j in range(1, len(seg)):
            if seg[j] != seg[j - 1]:
                out.append(n)
                n = 0
            n += 1
        out.append(n)
    return out


def test_megatron_index_layout(data, tmp_path):
    """The .idx by Megatron's documented layout (Megatron-core's own reader: the slow tests below): one
    sequence per document of ours, since Megatron's GPT dataset shuffles sequences as documents, each
    ending with EOD: the .bin is the rows' tokens plus an EOD after every document a row end cut."""
    import struct

    from preschool.data.tokenizer import load_special_ids

    info = export_dataset(data / "pt", "megatron", tmp_path / "mg")
    ref = _rows(data / "pt" / "train")
    eod = load_special_ids(data / "tokenizer").eos
    want = _megatron_documents(ref, _rows(data / "pt" / "train", "segments"), eod)
    docs_ref = [len(d) for d in want]
    assert len(docs_ref) > len(ref)  # rows hold several documents: one sequence per row is not per document
    added = sum(int(r[-1] != eod) for r in ref)  # each row not ending in EOS cut a document
    assert added > 0 and info["splits"]["train"]["eod_added"] == added and info["splits"]["train"]["eod_id"] == eod
    idx = (tmp_path / "mg" / "train" / "text_document.idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    version, code, n_seq, n_doc = struct.unpack("<QBQQ", idx[9:34])
    assert (version, code, n_seq, n_doc) == (1, 8, len(docs_ref), len(docs_ref) + 1)  # 8 = uint16
    lengths = np.frombuffer(idx, np.int32, n_seq, 34)
    pointers = np.frombuffer(idx, np.int64, n_seq, 34 + 4 * n_seq)
    docs = np.frombuffer(idx, np.int64, n_doc, 34 + 12 * n_seq)
    assert len(idx) == 34 + 12 * n_seq + 8 * n_doc
    assert lengths.tolist() == docs_ref and docs.tolist() == list(range(n_seq + 1))
    assert info["splits"]["train"]["documents"] == len(docs_ref)
    bin_ = np.fromfile(tmp_path / "mg" / "train" / "text_document.bin", np.uint16)
    assert np.array_equal(bin_, np.concatenate(want)) and len(bin_) == ref.size + added
    assert [bin_[p // 2 + n - 1] for p, n in zip(pointers, lengths)] == [eod] * n_seq  # every document ends with EOD
    # each document is one of our runs, plus the EOD added when the run did not end with one: without
    # those, the stream is the rows' tokens unchanged
    segs = _rows(data / "pt" / "train", "segments")
    runs = [run for row, seg in zip(ref, segs) for run in np.split(row, np.nonzero(seg[1:] != seg[:-1])[0] + 1)]
    assert lengths.tolist() == [len(r) + int(r[-1] != eod) for r in runs]
    assert np.array_equal(np.concatenate([bin_[p // 2:p // 2 + len(r)] for p, r in zip(pointers, runs)]), ref.ravel())


def _megatron_core() -> None:
    """Skip, saying why, without megatron-core (the ``formats`` extra: in the main lock, so ``make test`` has it)."""
    pytest.importorskip("megatron.core", reason="the formats extra (megatron-core) is not installed")


@pytest.mark.slow  # importing megatron.core takes ~20 s here
def test_megatron_round_trip_with_megatron_core(data, tmp_path):
    """Megatron-core's IndexedDataset reads one sequence per document of ours, each ending with EOD,
    and the loss mask document for document (an added EOD repeats its document's last mask value)."""
    _megatron_core()
    from megatron.core.datasets.gpt_dataset import GPTDataset
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from preschool.data.tokenizer import load_special_ids

    eod = load_special_ids(data / "tokenizer").eos
    for name in ("stack", "pt"):
        export_dataset(data / name, "megatron", tmp_path / name, allow_unread_loss_mask=True)
        ref = _rows(data / name / "train")
        segments = _rows(data / name / "train", "segments")
        want = _megatron_documents(ref, segments, eod)
        ds = IndexedDataset(str(tmp_path / name / "train" / "text_document"))
        assert ds.index.dtype == np.uint16
        assert len(ds) == len(_doc_lengths(segments)) == len(want)
        assert all(np.array_equal(ds[i], w) for i, w in enumerate(want))
        assert list(ds.document_indices) == list(range(len(ds) + 1))
        # what Megatron's GPT dataset shuffles: our documents
        assert GPTDataset.numel_low_level_dataset(ds) == len(_doc_lengths(segments))
    mask = IndexedDataset(str(tmp_path / "stack" / "train" / "loss_mask_document"))
    want = _megatron_documents(_rows(data / "stack" / "train", "loss_mask"), _rows(data / "stack" / "train", "segments"),
                               eod, tokens=_rows(data / "stack" / "train"))
    assert len(mask) == len(want) and all(np.array_equal(mask[i], w) for i, w in enumerate(want))


def _datatrove_dataset():
    """datatrove's own reader (the ``datatrove`` extra: in the main lock, so ``make test`` always has it)."""
    return pytest.importorskip("datatrove.utils.dataset", reason="the datatrove extra is not installed").DatatroveFolderDataset


def test_nanotron_round_trip_with_datatrove(data, tmp_path):
    DatatroveFolderDataset = _datatrove_dataset()

    export_dataset(data / "pt", "nanotron", tmp_path / "nt")
    for split in ("train", "val"):
        ref = _rows(data / "pt" / split)
        ds = DatatroveFolderDataset(str(tmp_path / "nt" / split), seq_len=SEQ, token_size=2, return_positions=True)
        assert len(ds) == len(ref)
        items = [ds[i] for i in range(len(ds))]
        assert np.array_equal(np.stack([it["input_ids"].numpy() for it in items]), ref)
        # positions datatrove reads from .ds.index restart where our segments (document index) change
        assert np.array_equal(np.stack([it["positions"].numpy() for it in items]),
                              _positions(_rows(data / "pt" / split, "segments")))
    # Nanotron reads "<tokenizer>|<token size>": the tokenizer relative to the split folder, so a moved
    # export still names its own copy
    (tmp_path / "nt").rename(tmp_path / "moved")
    split = tmp_path / "moved" / "train"
    meta = (split / "00000.ds.metadata").read_text().splitlines()
    name = meta[0].split("|")[0]
    assert meta[0] == "../tokenizer|2" and int(meta[1]) == 40 * (SEQ + 1)
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(str(split / name)).eos_token == "<|endoftext|>"
    # a masked set also writes datatrove's .ds.loss (one bool per token)
    export_dataset(data / "stack", "nanotron", tmp_path / "nt_stack", allow_unread_loss_mask=True)
    loss = np.fromfile(tmp_path / "nt_stack" / "train" / "00000.ds.loss", np.bool_)
    assert np.array_equal(loss.reshape(-1, SEQ + 1), _rows(data / "stack" / "train", "loss_mask").astype(bool))


def test_numpy_round_trip_as_olmo_core_reads_it(data, tmp_path):
    info = export_dataset(data / "stack", "numpy", tmp_path / "np")
    m = info["splits"]["train"]
    # OLMo-core memory-maps each file with the configured dtype and cuts instances of sequence_length
    toks = np.concatenate([np.memmap(tmp_path / "np" / "train" / f, dtype=m["dtype"], mode="r")
                           for f in m["files"]["tokens"]]).reshape(-1, m["sequence_length"])
    assert np.array_equal(toks, _rows(data / "stack" / "train"))
    masks = np.concatenate([np.memmap(tmp_path / "np" / "train" / f, dtype=np.bool_, mode="r")
                            for f in m["files"]["label_mask"]]).reshape(-1, m["sequence_length"])
    assert np.array_equal(masks, _rows(data / "stack" / "train", "loss_mask").astype(bool))
    saved = json.loads((tmp_path / "np" / "export.json").read_text())
    assert saved["splits"]["train"]["vocab_size"] > 300  # reserved ids above the tokenizer's vocabulary


def test_document_ends_from_segments():
    seg = np.array([[0, 0, 1, 1, 1], [0, 1, 2, 2, 2]], np.uint16)
    assert document_ends(seg, 2, 5).tolist() == [2, 5, 6, 7, 10]
    assert document_ends(None, 2, 5, start=10).tolist() == [15, 20]


def test_cli_and_errors(data, tmp_path, capsys):
    assert main(["export", str(data / "pt" / "val"), "--format", "numpy", "--out", str(tmp_path / "one")]) == 0
    assert "val: 8 rows x 33 tokens" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="did you mean 'megatron'"):
        export_dataset(data / "pt", "megatro", tmp_path / "x")
    with pytest.raises(DataError, match="no shard set here"):
        export_dataset(tmp_path, "hf", tmp_path / "x")
    with pytest.raises(DataError, match="no split test"):
        export_dataset(data / "pt", "hf", tmp_path / "x", splits=["test"])
    # a corrupt shard is refused before anything is written
    bad = tmp_path / "bad"
    import shutil

    shutil.copytree(data / "pt", bad)
    f = next((bad / "train").glob("tokens-*.bin"))
    f.write_bytes(b"\x01\x00" + f.read_bytes()[2:])
    assert main(["export", str(bad), "--format", "hf", "--out", str(tmp_path / "y")]) == 2
    assert "checksum mismatch" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()


def test_export_names_the_tokenizers_special_ids(tmp_path, hf_tokenizer):
    """An export of data tokenized with a Mistral-style HF tokenizer says EOS is </s> = 2, not id 0."""
    corpora = {"sb": CorpusConfig(source="storybook", seed=0)}
    datasets = {"pt": CorpusSpec(corpus="sb", tokens=8 * (SEQ + 1), unit_tokens=1024)}
    prepare_data(tmp_path / "prep", TokenizerConfig(kind="hf", name=str(hf_tokenizer("mistral"))), corpora,
                 datasets, seq_len=SEQ, seed=0, progress=False)
    info = export_dataset(tmp_path / "prep" / "pt", "numpy", tmp_path / "out")
    assert info["tokenizer"]["special_ids"] == {"bos": 1, "eos": 2, "pad": 2}
    assert json.loads((tmp_path / "out" / "export.json").read_text())["tokenizer"]["special_ids"]["eos"] == 2
    assert "documents end with EOS id 2" in (tmp_path / "out" / "README.md").read_text()


@pytest.mark.parametrize("fmt", ["nanotron", "megatron"])
def test_a_loss_mask_the_readers_ignore_is_refused_unless_allowed(data, tmp_path, capsys, fmt):
    """datatrove's DatatroveFolderDataset (Nanotron) reads no .ds.loss and Megatron's GPTDataset no
    loss_mask_document: a masked set would train on every token there, so the export refuses it
    (one line naming the flag, nothing written) until --allow-unread-loss-mask says so."""
    out = tmp_path / "x"
    with pytest.raises(ConfigError, match="allow_unread_loss_mask: .*loss mask.*not read"):
        export_dataset(data / "stack", fmt, out)
    assert not out.exists()
    assert main(["export", str(data / "stack"), "--format", fmt, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--allow-unread-loss-mask" in err and len(err.strip().splitlines()) == 1 and not out.exists()
    assert main(["export", str(data / "stack"), "--format", fmt, "--out", str(out),
                 "--allow-unread-loss-mask"]) == 0
    info = json.loads((out / "export.json").read_text())
    assert info["loss_mask"]["read"] is False and info["loss_mask"]["by"] and info["loss_mask"]["masks_tokens"]
    assert "NOT read" in (out / "README.md").read_text()
    # an unmasked set needs no flag, and the formats whose readers take the mask need none either
    export_dataset(data / "pt", fmt, tmp_path / "pt")
    assert "loss_mask" not in json.loads((tmp_path / "pt" / "export.json").read_text())
    for ok in ("hf", "numpy"):
        assert export_dataset(data / "stack", ok, tmp_path / ok)["loss_mask"]["read"] is True


@pytest.mark.parametrize("fmt", ["nanotron", "megatron"])
def test_a_loss_mask_of_all_ones_is_exported_where_the_mask_is_not_read(data, tmp_path, fmt):
    """The quickstart's Dyck set carries a loss_mask that masks nothing (issue 33 item 7): a reader that
    ignores it trains on the same tokens, so the export needs no --allow-unread-loss-mask, and says so."""
    assert ShardSet(data / "dyck" / "train").has_loss_mask
    assert all(int(_rows(data / "dyck" / s, "loss_mask").min()) == 1 for s in ("train", "val"))
    info = export_dataset(data / "dyck", fmt, tmp_path / "dyck")
    assert info["loss_mask"] == {"read": False, "by": info["loss_mask"]["by"], "masks_tokens": False}
    assert "masks no token" in (tmp_path / "dyck" / "README.md").read_text()
    # one masked row among all-ones rows is enough to refuse
    with pytest.raises(ConfigError, match="allow_unread_loss_mask: .*split train"):
        export_dataset(data / "stack", fmt, tmp_path / "stack")


def test_masked_datatrove_reader_yields_the_loss_mask(data, tmp_path):
    """preschool's DatatroveFolderDataset subclass: datatrove's windows and positions, plus each
    window's .ds.loss as `loss_mask`."""
    DatatroveFolderDataset = _datatrove_dataset()

    from preschool.data.datatrove_reader import MaskedDatatroveFolderDataset

    export_dataset(data / "stack", "nanotron", tmp_path / "nt", allow_unread_loss_mask=True)
    split = str(tmp_path / "nt" / "train")
    plain = DatatroveFolderDataset(split, seq_len=SEQ, token_size=2, return_positions=True)
    ds = MaskedDatatroveFolderDataset(split, seq_len=SEQ, token_size=2, return_positions=True)
    assert len(ds) == len(plain) == len(_rows(data / "stack" / "train"))
    order = list(range(len(ds))) + [3, 0]  # random access goes back too
    items = [ds[i] for i in order]
    assert np.array_equal(np.stack([it["input_ids"].numpy() for it in items]), _rows(data / "stack" / "train")[order])
    assert np.array_equal(np.stack([it["positions"].numpy() for it in items]),
                          np.stack([plain[i]["positions"].numpy() for i in order]))
    masks = np.stack([it["loss_mask"].numpy() for it in items])
    assert masks.dtype == np.bool_
    assert np.array_equal(masks, _rows(data / "stack" / "train", "loss_mask").astype(bool)[order])
    # an export without .ds.loss: a one-line DataError naming the missing file
    export_dataset(data / "pt", "nanotron", tmp_path / "pt")
    with pytest.raises(DataError, match=r"00000\.ds\.loss: missing"):
        MaskedDatatroveFolderDataset(str(tmp_path / "pt" / "train"), seq_len=SEQ, token_size=2)[0]


def _run_lengths(segments):
    """Per row, the lengths of its runs of one segment number (our documents, cut at the row end)."""
    return [np.diff(np.r_[0, np.nonzero(seg[1:] != seg[:-1])[0] + 1, len(seg)]).tolist() for seg in segments]


def _olmo_core():
    """Import OLMo-core's data package, or skip saying where it runs: the main lock cannot hold it.
    ``make test-olmo`` sets PRESCHOOL_REQUIRE_OLMO_CORE, so there a missing OLMo-core fails instead."""
    if os.environ.get("PRESCHOOL_REQUIRE_OLMO_CORE") == "1":
        return importlib.import_module("olmo_core.data")
    return pytest.importorskip("olmo_core.data", reason="ai2-olmo-core is not in the main lock (its cached-path "
                               "caps huggingface-hub<2, rich<14, filelock<4); `make test-olmo` runs this test in "
                               "its own locked environment, .venv-olmo from requirements/olmo-lock.txt")


def test_numpy_round_trip_with_olmo_core(data, tmp_path):
    """OLMo-core's own NumpyFSLDataset reads the numpy export: instance i = row i, the label mask
    through label_mask_paths, and its EOS-derived doc_lens = our documents within the row."""
    _olmo_core()
    from olmo_core.data import NumpyFSLDataset

    from preschool.data.tokenizer import load_special_ids

    sp = load_special_ids(data / "tokenizer")
    for name in ("stack", "pt"):
        m = export_dataset(data / name, "numpy", tmp_path / name)["splits"]["train"]
        d = tmp_path / name / "train"
        masks = {"label_mask_paths": [d / f for f in m["files"]["label_mask"]]} if m["has_loss_mask"] else {}
        ds = NumpyFSLDataset(*[d / f for f in m["files"]["tokens"]], sequence_length=m["sequence_length"],
                             pad_token_id=sp.pad, eos_token_id=sp.eos, vocab_size=m["vocab_size"],
                             dtype=np.dtype(m["dtype"]).type, generate_doc_lengths=True, **masks)
        ds.work_dir = tmp_path / "olmo_work"
        items = [ds[i] for i in range(len(ds))]
        assert np.array_equal(np.stack([it["input_ids"].numpy() for it in items]), _rows(data / name / "train"))
        assert [it["doc_lens"].tolist() for it in items] == _run_lengths(_rows(data / name / "train", "segments"))
        if m["has_loss_mask"]:
            assert np.array_equal(np.stack([it["label_mask"].numpy() for it in items]),
                                  _rows(data / name / "train", "loss_mask").astype(bool))


def _megatron_documents(rows, segments, eod, tokens=None):
    """What Megatron's index should hold, from our rows: each of our documents (a run of one segment
    inside a row) in order, followed by an EOD when its last token is not EOD (a document cut at a row
    end). With ``tokens``, ``rows`` is the loss mask and an added EOD's value repeats the run's last."""
    tokens = rows if tokens is None else tokens
    docs = []
    for row, seg, toks in zip(rows, segments, tokens):
        cuts = np.nonzero(seg[1:] != seg[:-1])[0] + 1
        for run, run_toks in zip(np.split(row, cuts), np.split(toks, cuts)):
            ends_open = run_toks[-1] != eod
            docs.append(np.r_[run, run[-1] if rows is not tokens else eod] if ends_open else run)
    return docs


def test_megatron_eod_id_from_the_tokenizer_or_given(data, tmp_path, capsys):
    """A shard set alone has no tokenizer beside it to take the EOD id from: the Megatron export asks
    for --eod-id (one line, exit 2, nothing written), and the id given ends every document; an id
    outside the vocabulary, or --eod-id for a format without EODs, is refused before anything is written."""
    one = data / "pt" / "val"
    with pytest.raises(ConfigError, match=r"eod_id: .*no tokenizer.*--eod-id"):
        export_dataset(one, "megatron", tmp_path / "a")
    assert main(["export", str(one), "--format", "megatron", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "--eod-id" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "a").exists()
    assert main(["export", str(one), "--format", "megatron", "--out", str(tmp_path / "a"), "--eod-id", "5"]) == 0
    info = json.loads((tmp_path / "a" / "export.json").read_text())["splits"]["val"]
    want = _megatron_documents(_rows(one), _rows(one, "segments"), 5)
    assert info["eod_id"] == 5 and info["eod_added"] == sum(len(w) for w in want) - _rows(one).size > 0
    assert np.array_equal(np.fromfile(tmp_path / "a" / "val" / "text_document.bin", np.uint16), np.concatenate(want))
    assert "Every Megatron document ends with EOD id 5" in (tmp_path / "a" / "README.md").read_text()
    vocab = info["vocab_size"]
    for bad, fmt in ((-1, "megatron"), (vocab, "megatron"), (5, "numpy")):
        with pytest.raises(ConfigError, match="eod_id"):
            export_dataset(one, fmt, tmp_path / "b", eod_id=bad)
        assert not (tmp_path / "b").exists()


def _megatron_gpt(data, name, tmp_path):
    """Export ``data/<name>`` for Megatron and open it with megatron-core's own IndexedDataset and
    GPTDataset (position ids reset at EOD); returns (eod id, the IndexedDataset, the GPTDataset)."""
    _megatron_core()
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split

    from preschool.data.tokenizer import load_special_ids

    class Tokenizer:  # what GPTDataset asks of a tokenizer: eod, pad, vocab_size (+ its cache key)
        def __init__(self, eod, vocab_size):
            self.eod, self.pad, self.vocab_size = eod, -1, vocab_size
            self.unique_identifiers = {"class": "Tokenizer", "eod": eod}

    eod = load_special_ids(data / "tokenizer").eos
    info = export_dataset(data / name, "megatron", tmp_path / name, allow_unread_loss_mask=True)
    prefix = str(tmp_path / name / "train" / "text_document")
    ds = IndexedDataset(prefix)
    cfg = GPTDatasetConfig(random_seed=1, sequence_length=SEQ, split="1,0,0",
                           tokenizer=Tokenizer(eod, info["splits"]["train"]["vocab_size"]),
                           reset_position_ids=True, reset_attention_mask=False, eod_mask_loss=False,
                           create_attention_mask=False, path_to_cache=str(tmp_path / "cache"))
    return eod, ds, GPTDataset(ds, prefix, np.arange(len(ds)), None, Split.train, cfg)


@pytest.mark.slow  # importing megatron.core takes ~10-20 s here
def test_megatron_gpt_dataset_sees_every_document_end(data, tmp_path):
    """Megatron-core's GPTDataset finds documents by the EOD token (position ids and, with
    --reset-attention-mask, attention restart after it): every document of the export ends with the
    tokenizer's EOS, also one our rows cut at a row end, so in every sample the positions restart
    exactly where each of our documents starts and never inside one."""
    for name in ("pt", "stack"):
        eod, ds, gpt = _megatron_gpt(data, name, tmp_path)
        rows, segments = _rows(data / name / "train"), _rows(data / name / "train", "segments")
        cut = sum(int(r[-1] != eod) for r in rows)
        assert cut > 0  # the data has documents cut at a row end: the case under test
        ours = _megatron_documents(rows, segments, eod)
        assert len(ds) == len(ours)
        # where each of our documents starts in the stream GPTDataset windows (its shuffled order)
        lengths = [len(ours[int(k)]) for k in gpt.document_index]
        starts = np.r_[0, np.cumsum(lengths)]
        for i in range(len(gpt)):
            k = gpt.shuffle_index[i]
            a = starts[gpt.sample_index[k][0]] + gpt.sample_index[k][1]
            window = np.arange(a, a + SEQ)
            begun = starts[np.searchsorted(starts, window, side="right") - 1]  # its document's start
            want = window - np.maximum(begun, a)
            assert gpt[i]["position_ids"].tolist() == want.tolist(), f"{name} sample {i}"


@pytest.mark.slow  # importing megatron.core takes ~10-20 s here
def test_megatron_gpt_dataset_windows_our_documents(data, tmp_path):
    """Megatron-core's GPTDataset on the export (its compiled helpers ship in the wheel): one epoch
    shuffles each of our documents exactly once, every sample is a seq_len + 1 window of those
    documents concatenated in its order, and its loss_mask ignores ours (the export refuses a masked
    set without --allow-unread-loss-mask)."""
    for name in ("pt", "stack"):
        eod, ds, gpt = _megatron_gpt(data, name, tmp_path)
        assert sorted(gpt.document_index.tolist()) == list(range(len(ds)))  # each document once per epoch
        docs = [np.asarray(ds[int(k)]) for k in gpt.document_index]
        starts = np.r_[0, np.cumsum([len(x) for x in docs])]
        stream = np.concatenate(docs)
        ours = np.concatenate(_megatron_documents(_rows(data / name / "train"), _rows(data / name / "train", "segments"),
                                                  eod))
        assert sorted(stream.tolist()) == sorted(ours.tolist())
        for i in range(len(gpt)):
            k = gpt.shuffle_index[i]
            a = starts[gpt.sample_index[k][0]] + gpt.sample_index[k][1]
            s = gpt[i]
            assert np.array_equal(np.r_[s["tokens"].numpy(), s["labels"].numpy()[-1:]], stream[a:a + SEQ + 1])
            assert bool((s["loss_mask"] == 1).all())  # Megatron's own mask: every token, ours is not read
