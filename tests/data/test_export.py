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
        # documents ended by EOS (separator: auto picks it: no L2T set here) and opened by BOS instead;
        # the storybook tokenizer's BOS = EOS = PAD = 0, so only where the 0 stands tells them apart
        "pt": CorpusSpec(corpus="sb", tokens=40 * (SEQ + 1), val_tokens=8 * (SEQ + 1), unit_tokens=1024),
        "ptb": CorpusSpec(corpus="sb", tokens=40 * (SEQ + 1), val_tokens=8 * (SEQ + 1), separator="bos",
                          unit_tokens=1024),
        # reserved ids above the tokenizer's vocabulary, with an answer-only loss mask
        "stack": GeneratorSpec(generator="stack", params={"n_ops": 8, "length": 20, "n_symbols": 10},
                               render="reserved", tokens=12 * (SEQ + 1)),
        # the quickstart's Dyck set: a loss_mask array that is all ones (loss on every token)
        "dyck": GeneratorSpec(generator="shuffle_dyck", params={"k": 16, "max_depth": 8, "p_open": 0.5, "length": 64},
                              render="text", tokens=12 * (SEQ + 1), val_tokens=4 * (SEQ + 1)),
        # a masked set of more than 65,536 ids: uint32 tokens (int32 in Megatron), several documents a row
        "m32": GeneratorSpec(generator="stack", params={"n_ops": 8, "length": 20, "n_symbols": 66000, "max_digits": 5},
                             render="reserved", tokens=12 * (SEQ + 1), val_tokens=4 * (SEQ + 1)),
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
    # each token file's document ends (uint64 token offsets in the file, as datatrove's .ds.index)
    ends = [np.fromfile(tmp_path / "np" / "train" / f, "<u8") for f in m["files"]["doc_ends"]]
    assert np.concatenate(ends).tolist() == document_ends(_rows(data / "stack" / "train", "segments"),
                                                          m["n_rows"], m["row_len"]).tolist()


def test_numpy_side_files_never_match_a_glob_for_the_token_files(data, tmp_path):
    """OLMo-core's glob (``*`` does not cross a ``/``) over a split folder finds the token files alone:
    label masks and document ends live in folders of their own, with their own prefix; export.json and
    the README give the exact globs."""
    info = export_dataset(data / "m32", "numpy", tmp_path / "np")
    settings = info["reader"]["settings"]
    readme = (tmp_path / "np" / "README.md").read_text()
    for split, m in info["splits"].items():
        d = tmp_path / "np" / split
        tokens = {d / f for f in m["files"]["tokens"]}
        assert len(tokens) == 1 and all(f.parent == d for f in tokens)
        for pattern in (settings["glob"], "*.npy", "part-*", "*", "**/part-*.npy"):
            assert {f for f in d.glob(pattern) if f.is_file()} == tokens, pattern
        for kind, pattern in (("label_mask", settings["label_mask_glob"]), ("doc_ends", settings["doc_ends_glob"])):
            assert sorted(d.glob(pattern)) == [d / f for f in m["files"][kind]] and m["files"][kind]
    for pattern in (settings["glob"], settings["label_mask_glob"], settings["doc_ends_glob"]):
        assert f"`OUT/<split>/{pattern}`" in readme


def test_document_separator_is_read_from_the_rows(tmp_path):
    """Whether documents end with the separator (EOS) or open with it (BOS) is read from the rows
    themselves: where a segment changes inside a row, the token before (EOS) or at it (BOS) is the
    separator. Padding (the L2T packer's, PAD after the last sample) is a segment of its own that does
    not open with BOS; a set with no document change inside a row is BOS-separated when it opens with BOS."""
    from preschool.data.export import document_separator
    from preschool.data.shards import ShardWriter
    from preschool.data.tokenizer import SpecialIds

    def shard_set(name, rows, segs):
        with ShardWriter(tmp_path / name, 8, 50, arrays=["segments"]) as w:
            w.add_rows(np.array(rows), segments=np.array(segs))
        return ShardSet(tmp_path / name)

    mistral = SpecialIds(bos=1, eos=2, pad=2)
    eos = shard_set("eos", [[5, 6, 2, 7, 8, 9, 2, 4]], [[0, 0, 0, 1, 1, 1, 1, 2]])
    bos = shard_set("bos", [[1, 5, 6, 1, 7, 8, 9, 4]], [[0, 0, 0, 1, 1, 1, 1, 1]])
    l2t = shard_set("l2t", [[1, 5, 6, 1, 7, 2, 2, 2], [1, 5, 1, 6, 7, 8, 2, 2]],
                    [[0, 0, 0, 1, 1, 2, 2, 2], [0, 0, 1, 1, 1, 1, 2, 2]])
    one = shard_set("one", [[1, 5, 6, 7, 8, 9, 4, 3]], [[0] * 8])
    mixed = shard_set("mixed", [[5, 6, 2, 1, 8, 9, 3, 4]], [[0, 0, 0, 1, 1, 1, 2, 2]])
    assert document_separator([eos], mistral) == {"separator": "eos", "separator_id": 2}
    assert document_separator([bos], mistral) == {"separator": "bos", "separator_id": 1}
    assert document_separator([l2t], mistral) == {"separator": "bos", "separator_id": 1}
    assert document_separator([one], mistral) == {"separator": "bos", "separator_id": 1}
    assert document_separator([eos, one], mistral) == {"separator": "eos", "separator_id": 2}  # the ends decide
    assert document_separator([mixed], mistral) == {"separator": None, "separator_id": None}
    # our BPE's <|endoftext|> is BOS, EOS and PAD at once: the side of the 0 tells
    ours = SpecialIds(eos=0, bos=0, pad=0)
    assert document_separator([shard_set("e0", [[5, 0, 6, 7, 0, 8, 9, 4]], [[0, 0, 1, 1, 1, 2, 2, 2]])], ours) == \
        {"separator": "eos", "separator_id": 0}
    assert document_separator([shard_set("b0", [[0, 5, 0, 6, 7, 0, 8, 9]], [[0, 0, 1, 1, 1, 2, 2, 2]])], ours) == \
        {"separator": "bos", "separator_id": 0}
    assert document_separator([eos], None) == {"separator": None, "separator_id": None}  # no ids known


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


def _megatron_documents(rows, segments, sep, opens=False, tokens=None):
    """What Megatron's index should hold, from our rows: each of our documents (a run of one segment
    inside a row) in order. EOS-separated (``opens`` False): followed by the separator ``sep`` when its
    last token is not ``sep`` (a document cut at a row end). BOS-separated (``opens``): preceded by ``sep``
    when its first token is not ``sep`` (the rest of a document a row end cut), and nothing appended.
    With ``tokens``, ``rows`` is the loss mask and an added separator repeats the run's nearest value."""
    tokens = rows if tokens is None else tokens
    docs = []
    for row, seg, toks in zip(rows, segments, tokens):
        cuts = np.nonzero(seg[1:] != seg[:-1])[0] + 1
        for run, run_toks in zip(np.split(row, cuts), np.split(toks, cuts)):
            if opens and run_toks[0] != sep:
                docs.append(np.r_[run[0] if rows is not tokens else sep, run])
            elif not opens and run_toks[-1] != sep:
                docs.append(np.r_[run, run[-1] if rows is not tokens else sep])
            else:
                docs.append(run)
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
    GPTDataset, told the eod id export.json names (position ids reset after it); returns (export.json's
    content, the IndexedDataset, the GPTDataset)."""
    _megatron_core()
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split

    class Tokenizer:  # what GPTDataset asks of a tokenizer: eod, pad, vocab_size (+ its cache key)
        def __init__(self, eod, vocab_size):
            self.eod, self.pad, self.vocab_size = eod, -1, vocab_size
            self.unique_identifiers = {"class": "Tokenizer", "eod": eod}

    info = export_dataset(data / name, "megatron", tmp_path / name, allow_unread_loss_mask=True)
    settings = info["reader"]["settings"]
    prefix = str(tmp_path / name / "train" / "text_document")
    ds = IndexedDataset(prefix)
    cfg = GPTDatasetConfig(random_seed=1, sequence_length=SEQ, split="1,0,0",
                           tokenizer=Tokenizer(settings["eod"], info["splits"]["train"]["vocab_size"]),
                           reset_position_ids=settings["reset_position_ids"],
                           reset_attention_mask=settings["reset_attention_mask"], eod_mask_loss=False,
                           create_attention_mask=False, path_to_cache=str(tmp_path / "cache"))
    return info, ds, GPTDataset(ds, prefix, np.arange(len(ds)), None, Split.train, cfg)


@pytest.mark.slow  # importing megatron.core takes ~10-20 s here
def test_megatron_gpt_dataset_windows_our_documents(data, tmp_path):
    """Megatron-core's GPTDataset on the export (its compiled helpers ship in the wheel): one epoch
    shuffles each of our documents exactly once, every sample is a seq_len + 1 window of those
    documents concatenated in its order, and its loss_mask ignores ours (the export refuses a masked
    set without --allow-unread-loss-mask)."""
    for name in ("pt", "stack"):
        info, ds, gpt = _megatron_gpt(data, name, tmp_path)
        eod = info["reader"]["settings"]["eod"]
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


# Each consumer reads each kind of set as ours (issue 49): an EOS-separated set (pt), a BOS-separated
# one (ptb; BOS = EOS = PAD = 0, so the 0 opens documents there and ends them in pt) and a masked uint32
# one (m32). Every reader is given what the export's export.json says to give it, and its own API must
# return our tokens, our loss mask and our document boundaries.
SETS = {"pt": "eos", "ptb": "bos", "m32": "eos"}  # the separator each set's rows show; its id is 0 in all


def _ours(data, name, split="train"):
    """The shards' rows, their loss mask (None without one) and segments."""
    ss = ShardSet(data / name / split)
    rows = ss.rows(range(len(ss)))
    return rows, ss.rows(range(len(ss)), "loss_mask") if ss.has_loss_mask else None, ss.rows(range(len(ss)), "segments")


def _export_for(data, name, fmt, out):
    """Export ``data/<name>`` as ``fmt``; export.json's content, after checking that it names the separator."""
    info = export_dataset(data / name, fmt, out, allow_unread_loss_mask=True)
    assert info["documents"] == {"separator": SETS[name], "separator_id": 0}
    return info


@pytest.mark.parametrize("name", SETS)
def test_hf_datasets_reads_our_rows_and_masks(data, tmp_path, name):
    """``datasets.load_from_disk``: example i = row i, ``loss_mask`` = ours. The hf export has no
    document marks beyond the separator tokens its rows hold, as ours do (export.json says so)."""
    from datasets import load_from_disk

    info = _export_for(data, name, "hf", tmp_path / "hf")
    assert "separator" in info["reader"]["boundaries"]
    dd = load_from_disk(str(tmp_path / "hf"))
    for split in ("train", "val"):
        rows, mask, _ = _ours(data, name, split)
        ds = dd[split].with_format("numpy")
        assert np.array_equal(ds["input_ids"], rows)
        assert ds.column_names == ["input_ids"] if mask is None else np.array_equal(ds["loss_mask"], mask)


@pytest.mark.parametrize("name", SETS)
def test_megatron_core_reads_our_documents(data, tmp_path, name):
    """Megatron-core's IndexedDataset: sequence i = our i-th document, token for token. EOS-separated:
    an EOD appended where a row end cut a document; BOS-separated: nothing appended (the next document
    opens with the separator already), a separator put before the rest of a document a row end cut, so
    no ``0 0`` the rows never hold. Its GPTDataset, told export.json's eod with reset_position_ids,
    restarts positions right after every separator and nowhere else: every span between restarts is as
    long as one of our documents, starting where ours do (EOS) or one token in, after its BOS (BOS,
    Megatron counting the separator to the span before it, as export.json says)."""
    info, ds, gpt = _megatron_gpt(data, name, tmp_path)
    settings, opens = info["reader"]["settings"], SETS[name] == "bos"
    assert settings["eod"] == 0 and settings["eod_at"] == ("start" if opens else "end")
    rows, mask, segments = _ours(data, name)
    want = _megatron_documents(rows, segments, settings["eod"], opens=opens)
    assert len(ds) == len(want) == len(_doc_lengths(segments))
    assert all(np.array_equal(ds[i], w) for i, w in enumerate(want))
    added = info["splits"]["train"]["eod_added"]
    assert sum(len(w) for w in want) == rows.size + added and added <= len(rows)  # at most one per row
    if mask is not None:
        mds = type(ds)(str(tmp_path / name / "train" / "loss_mask_document"))
        wmask = _megatron_documents(mask, segments, settings["eod"], opens=opens, tokens=rows)
        assert len(mds) == len(wmask) and all(np.array_equal(mds[i], w) for i, w in enumerate(wmask))
    # position ids in every sample: restart where each document (in GPTDataset's shuffled order) starts,
    # plus one for BOS-separated data, counted from the window's start before the first restart
    starts = np.r_[0, np.cumsum([len(want[int(k)]) for k in gpt.document_index])]
    restarts = np.r_[-1, starts[:-1] + int(opens)]
    for i in range(len(gpt)):
        k = gpt.shuffle_index[i]
        a = starts[gpt.sample_index[k][0]] + gpt.sample_index[k][1]
        window = np.arange(a, a + SEQ)
        last = restarts[np.searchsorted(restarts, window, side="right") - 1]
        assert gpt[i]["position_ids"].tolist() == (window - np.maximum(last, a)).tolist(), f"{name} sample {i}"


@pytest.mark.parametrize("name", SETS)
def test_datatrove_reads_our_rows_masks_and_positions(data, tmp_path, name):
    """datatrove's DatatroveFolderDataset(return_positions=True), as export.json says: window i = row i,
    positions from .ds.index restart exactly where our documents start, whatever the separator; the
    mask through MaskedDatatroveFolderDataset. The setting export.json warns against,
    ``positions_from_eos_token_id``, restarts after every separator id: wrong for BOS-separated data."""
    DatatroveFolderDataset = _datatrove_dataset()
    from preschool.data.datatrove_reader import MaskedDatatroveFolderDataset

    info = _export_for(data, name, "nanotron", tmp_path / "nt")
    settings = info["reader"]["settings"]
    assert settings["return_positions"] is True and "positions_from_eos_token_id" in info["reader"]["never"]
    for split in ("train", "val"):
        rows, mask, segments = _ours(data, name, split)
        cls = DatatroveFolderDataset if mask is None else MaskedDatatroveFolderDataset
        ds = cls(str(tmp_path / "nt" / split), seq_len=settings["seq_len"], token_size=settings["token_size"],
                 return_positions=True)
        items = [ds[i] for i in range(len(ds))]
        assert len(items) == len(rows)
        assert np.array_equal(np.stack([it["input_ids"].numpy() for it in items]), rows)
        assert np.array_equal(np.stack([it["positions"].numpy() for it in items]), _positions(segments))
        if mask is not None:
            assert np.array_equal(np.stack([it["loss_mask"].numpy() for it in items]), mask.astype(bool))
    if SETS[name] == "bos":
        trap = DatatroveFolderDataset(str(tmp_path / "nt" / "train"), seq_len=settings["seq_len"],
                                      token_size=settings["token_size"], return_positions=True,
                                      positions_from_eos_token_id=info["documents"]["separator_id"])
        got = np.stack([trap[i]["positions"].numpy() for i in range(len(trap))])
        assert not np.array_equal(got, _positions(_ours(data, name)[2]))


def _closed_by(rows, sep):
    """Per row, the document lengths of a reader that ends a document after every ``sep`` (and at the row end)."""
    out = []
    for row in rows:
        ends = np.r_[np.nonzero(row == sep)[0] + 1, len(row)]
        out.append(np.diff(np.r_[0, np.unique(ends)]).tolist())
    return out


@pytest.mark.parametrize("name", SETS)
def test_olmo_core_reads_our_rows_masks_and_documents(data, tmp_path, name):
    """OLMo-core 3's NumpyFSLDatasetConfig.glob with export.json's globs and tokenizer ids: instance i = row
    i (the glob takes no side file), label_mask = ours. doc_lens (generate_doc_lengths) = our documents
    from the dataset export.json names: OLMo's own NumpyFSLDataset for EOS-separated data;
    preschool.data.olmo_reader.DocumentNumpyFSLDataset (doc_lens from the export's doc_ends) for
    BOS-separated data, where OLMo's, which ends a document after each EOS id, puts every BOS at the end
    of the document before it. The setting export.json warns against, bos_token_id, leaves OLMo one
    document per row (it ends documents only between an EOS and a BOS)."""
    olmo = _olmo_core()
    from preschool.data.olmo_reader import DocumentNumpyFSLDataset

    info = _export_for(data, name, "numpy", tmp_path / "np")
    st = info["reader"]["settings"]
    assert st["bos_token_id"] is None and "bos_token_id" in info["reader"]["never"]
    assert info["reader"]["dataset"] == ("olmo_core.data.NumpyFSLDataset" if SETS[name] == "eos"
                                         else "preschool.data.olmo_reader.DocumentNumpyFSLDataset")

    def build(d, **tokenizer):
        return olmo.NumpyFSLDatasetConfig.glob(
            str(d / st["glob"]), sequence_length=st["sequence_length"], dtype=olmo.NumpyDatasetDType(st["dtype"]),
            tokenizer=olmo.TokenizerConfig(vocab_size=st["vocab_size"], eos_token_id=st["eos_token_id"],
                                           pad_token_id=st["pad_token_id"], **tokenizer),
            label_mask_paths=[str(d / st["label_mask_glob"])] if info["splits"]["train"]["has_loss_mask"] else None,
            generate_doc_lengths=True, work_dir=str(tmp_path / "olmo_work")).build()

    for split in ("train", "val"):
        d = tmp_path / "np" / split
        rows, mask, segments = _ours(data, name, split)
        stock = build(d)
        items = [stock[i] for i in range(len(stock))]
        assert len(items) == len(rows)
        assert np.array_equal(np.stack([it["input_ids"].numpy() for it in items]), rows)
        if mask is not None:
            assert np.array_equal(np.stack([it["label_mask"].numpy() for it in items]), mask.astype(bool))
        ours = DocumentNumpyFSLDataset.from_export(d, generate_doc_lengths=True, work_dir=tmp_path / "olmo_work")
        assert np.array_equal(np.stack([ours[i]["input_ids"].numpy() for i in range(len(ours))]), rows)
        assert [ours[i]["doc_lens"].tolist() for i in range(len(ours))] == _run_lengths(segments)
        stock_lens = [it["doc_lens"].tolist() for it in items]
        if SETS[name] == "eos":
            assert stock_lens == _run_lengths(segments)
        else:
            assert stock_lens == _closed_by(rows, st["eos_token_id"]) != _run_lengths(segments)
        trap = build(d, bos_token_id=info["documents"]["separator_id"])
        assert all(len(trap[i]["doc_lens"]) == 1 for i in range(len(trap))) and len(trap) == len(rows)


def test_olmo_core_reader_refuses_an_export_without_document_ends(data, tmp_path):
    """An export made before the doc_ends files (or with them removed) is refused by name, in one line."""
    _olmo_core()
    import shutil

    from preschool.data.olmo_reader import DocumentNumpyFSLDataset

    export_dataset(data / "ptb", "numpy", tmp_path / "np")
    shutil.rmtree(tmp_path / "np" / "train" / "doc_ends")
    with pytest.raises(DataError, match=r"doc_ends-00000\.npy: missing"):
        DocumentNumpyFSLDataset.from_export(tmp_path / "np" / "train", generate_doc_lengths=True)
    info = json.loads((tmp_path / "np" / "export.json").read_text())
    del info["splits"]["train"]["files"]["doc_ends"]
    (tmp_path / "np" / "export.json").write_text(json.dumps(info))
    with pytest.raises(DataError, match=r"export\.json: .*no doc_ends.*export it again"):
        DocumentNumpyFSLDataset.from_export(tmp_path / "np" / "train")


@pytest.mark.parametrize("fmt", ["hf", "megatron", "nanotron", "numpy"])
def test_export_states_the_separator_and_what_each_reader_must_be_told(data, tmp_path, fmt):
    """export.json and the export's README name the separator (the README no longer says documents end
    with EOS where BOS opens them), the reader call, the settings it needs and those that break it."""
    for name, says in (("ptb", "documents open with BOS id 0"), ("pt", "documents end with EOS id 0")):
        out = tmp_path / name
        info = _export_for(data, name, fmt, out)
        readme = (out / "README.md").read_text()
        assert says in readme and ("end with EOS" in readme) == (name == "pt")
        assert json.loads((out / "export.json").read_text())["reader"] == info["reader"]
        assert info["read"] == info["reader"]["call"] and f"`{info['reader']['call']}`" in readme
        for setting in info["reader"]["never"]:
            assert f"`{setting}`" in readme
    never = {"hf": set(), "megatron": set(), "nanotron": {"positions_from_eos_token_id"}, "numpy": {"bos_token_id"}}
    assert never[fmt] <= set(info["reader"]["never"])
