import gzip
import json
import pytest

from preschool.config import from_dict
from preschool.corpora import SOURCES, CorpusConfig, ReadStats, chunk_text, clean_text, iter_documents
from preschool.errors import ConfigError, DataError


def cfg(**kw):
    return from_dict(CorpusConfig, kw)


def read(c, count_tokens=None):
    st = ReadStats()
    return list(iter_documents(c, st, count_tokens=count_tokens)), st


@pytest.fixture
def messy(tmp_path):
    d = tmp_path / "txt"
    (d / "sub").mkdir(parents=True)
    (d / "b.txt").write_bytes(b"\xef\xbb\xbfFirst line\r\nsecond line\r\n\r\nNew paragraph\rwith a lone CR\r\n")
    (d / "a.txt").write_bytes(("word " * 60_000).encode() + b"\n")  # one 300k-char line
    (d / "sub" / "c.txt").write_text("Nested file.\n", encoding="utf-8")
    (d / "empty.txt").write_bytes(b"")
    (d / "blank.txt").write_bytes(b" \r\n\r\n \t\n")
    (d / ".hidden.txt").write_text("never read", encoding="utf-8")
    (d / "notes.csv").write_text("not,text", encoding="utf-8")
    return d


def test_registry_names():
    assert SOURCES.names() == ["auto", "datatrove_csv", "datatrove_jsonl", "datatrove_parquet", "datatrove_warc", "hf",
                               "jsonl", "parquet", "storybook", "text"]


def test_text_folder_sorted_clean_and_counted(messy):
    docs, st = read(cfg(source="text", path=str(messy)))
    assert [d.id for d in docs] == ["a.txt", "b.txt", "sub/c.txt"]
    b = docs[1].text
    assert b == "First line\nsecond line\n\nNew paragraph\nwith a lone CR\n"
    assert all("\r" not in d.text and "\ufeff" not in d.text for d in docs)
    assert len(docs[0].text) == 300_001
    assert st.files == 5 and st.documents == 3 and st.drops == {"empty": 2, "unsupported_file": 1}  # notes.csv
    assert st.chars == sum(len(d.text) for d in docs)
    assert st.words == sum(len(d.text.split()) for d in docs)
    assert {k: v for k, v in docs[0].meta.items() if k != "position"} == {"source": "text", "path": "a.txt"}


def test_text_glob_override_and_single_file(messy):
    docs, _ = read(cfg(source="text", path=str(messy), glob="**/*.csv"))
    assert [d.id for d in docs] == ["notes.csv"]
    docs, _ = read(cfg(source="text", path=str(messy / "b.txt")))
    assert [d.id for d in docs] == ["b.txt"]
    with pytest.raises(DataError, match="no files match"):
        read(cfg(source="text", path=str(messy), glob="**/*.nothing"))


def test_paragraph_chunks(messy):
    docs, st = read(cfg(source="text", path=str(messy), split_documents="paragraphs", chunk_chars=1000))
    ids = [d.id for d in docs]
    assert ids[0] == "a.txt#0" and "b.txt#0" in ids and ids[-1] == "sub/c.txt#0"
    a = [d for d in docs if d.meta["path"] == "a.txt"]
    assert len(a) >= 300 and all(len(d.text) <= 1000 for d in a)
    assert sum(len(d.text.split()) for d in a) == 60_000  # the long line is cut at spaces, no word lost or split
    assert [d.meta["chunk"] for d in a] == list(range(len(a)))
    assert st.documents == len(docs)
    b = [d for d in docs if d.meta["path"] == "b.txt"]
    assert b[0].text == "First line\nsecond line\n\nNew paragraph\nwith a lone CR"


def test_lines_mode_and_limits(messy):
    docs, _ = read(cfg(source="text", path=str(messy), split_documents="lines"))
    assert [d.id for d in docs] == ["a.txt#0", "b.txt#0", "b.txt#1", "b.txt#2", "b.txt#3", "sub/c.txt#0"]
    docs, _ = read(cfg(source="text", path=str(messy), split_documents="lines", max_documents=2))
    assert len(docs) == 2
    docs, _ = read(cfg(source="text", path=str(messy), split_documents="lines", min_chars=13))
    assert "sub/c.txt#0" not in [d.id for d in docs]  # "Nested file." has 12 chars


@pytest.mark.parametrize("mode", ["none", "paragraphs"])  # whole-file read and line streaming
def test_bad_utf8_policies(tmp_path, mode):
    (tmp_path / "ok.txt").write_text("fine\n", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"\xef\xbb\xbfgood\r\nhello \xff\xfe world\n\xff\n")
    with pytest.raises(DataError, match=r"bad\.txt: invalid UTF-8 at byte offset 15, line 2"):
        read(cfg(source="text", path=str(tmp_path), split_documents=mode))
    docs, st = read(cfg(source="text", path=str(tmp_path), on_bad_utf8="drop", split_documents=mode))
    assert [d.meta["path"] for d in docs] == ["ok.txt"] and st.drops == {"bad_utf8": 1} and st.files == 2
    docs, st = read(cfg(source="text", path=str(tmp_path), on_bad_utf8="replace", split_documents=mode))
    assert docs[0].text.startswith("good\nhello \ufffd\ufffd world\n\ufffd") and st.replaced_bad_utf8 == 1


def write_jsonl(path, lines):
    path.write_bytes(b"".join(x if isinstance(x, bytes) else (x + "\n").encode() for x in lines))


def test_jsonl_records_ids_and_errors(tmp_path):
    f = tmp_path / "d.jsonl"
    write_jsonl(f, [b"\xef\xbb\xbf" + json.dumps({"text": "one\r\ntwo", "id": "x1"}).encode() + b"\r\n",
                    json.dumps({"text": "three"}), "", "{not json", json.dumps({"body": "no text"}),
                    json.dumps({"text": "caf\u00e9 " + "z" * 100_000})])
    with pytest.raises(DataError, match=r"d\.jsonl:4: not valid JSON"):
        read(cfg(source="jsonl", path=str(f)))
    docs, st = read(cfg(source="jsonl", path=str(f), on_bad_record="drop"))
    assert [d.id for d in docs] == ["d.jsonl:1", "d.jsonl:2", "d.jsonl:6"]
    assert docs[0].text == "one\ntwo" and docs[2].meta["line"] == 6 and len(docs[2].text) == 100_005
    assert st.drops == {"bad_json": 1, "missing_field": 1}
    docs, _ = read(cfg(source="jsonl", path=str(f), on_bad_record="drop", id_field="id"))
    assert docs[0].id == "x1" and docs[1].id == "d.jsonl:2"


def test_jsonl_missing_field_error_names_line(tmp_path):
    f = tmp_path / "m.jsonl"
    write_jsonl(f, [json.dumps({"text": "ok"}), json.dumps({"content": "x"})])
    with pytest.raises(DataError, match=r"m\.jsonl:2: no string field 'text'"):
        read(cfg(source="jsonl", path=str(f)))
    docs, _ = read(cfg(source="jsonl", path=str(f), text_field="content", on_bad_record="drop"))
    assert [d.text for d in docs] == ["x"]


def test_streamed_chunks_equal_whole_text_chunks(messy, tmp_path):
    (messy / "odd.txt").write_bytes(b"  \r\n\r\nA\rB\r\r\n \t \nC\x0c\n\x0c\n\n" + b"long line. " * 500 + b"\n\xef\xbb\xbfx")  # + a BOM mid-text
    for mode in ("paragraphs", "lines"):
        docs, _ = read(cfg(source="text", path=str(messy), split_documents=mode, chunk_chars=300))
        for f in ["a.txt", "b.txt", "odd.txt", "sub/c.txt"]:
            whole = clean_text((messy / f).read_bytes().decode("utf-8"))
            assert [d.text for d in docs if d.meta["path"] == f] == [c for c in chunk_text(whole, mode, 300) if c.strip()]


MESSY_TEXT = (b"\xef\xbb\xbfOne \xc3\xa9t\xc3\xa9.\r\n" + b"word " * 200 + b"    \n\n"  # a line over max_chars, blank rest
              + b"".join(b"x" * n + b"\r\xef\xbb\xbf\n" for n in range(1, 9))  # CR, BOM, LF: one line end
              + b"\r\xf0\x9f\x98\x80 smile\r\n\n" + b"\xe2\x82\xac" * 400 + b"\nbad \xff\xfe bytes\n\n"
              + b"Sentence one. " * 150 + b"\r\n\r\r\n  \t\nlast line, no newline")


@pytest.mark.parametrize("segment", [4, 5, 7, 1 << 20])
@pytest.mark.parametrize("mode", ["none", "paragraphs", "lines"])
def test_streamed_text_equals_whole_text_at_any_read_piece_size(tmp_path, monkeypatch, segment, mode):
    """A text file read in pieces of ``segment`` bytes gives the documents chunk_text gives for the whole cleaned
    text, with lines over max_chars (one whose cut leaves a blank rest), CR + BOM + LF (one line end, as
    clean_text makes it, also when a piece ends between them), characters cut at piece ends and bad UTF-8
    replaced; and a read resumed at any document's position gives the rest and the same counts."""
    import preschool.corpora.sources.source as sources

    monkeypatch.setattr(sources, "SEGMENT_BYTES", segment)
    (tmp_path / "messy.txt").write_bytes(MESSY_TEXT)
    c = cfg(source="text", path=str(tmp_path), split_documents=mode, chunk_chars=300, max_chars=1000,
            on_bad_utf8="replace")
    docs, whole = read(c)
    expect = [t for t in chunk_text(clean_text(MESSY_TEXT.decode("utf-8", "replace")), mode, 300, 1000) if t.strip()]
    assert [d.text for d in docs] == expect
    assert whole.replaced_bad_utf8 == 1
    for i, d in enumerate(docs):
        st = ReadStats()
        rest = list(iter_documents(c, st, start=json.loads(json.dumps(d.meta["position"]))))
        assert [(r.id, r.text) for r in rest] == [(r.id, r.text) for r in docs[i:]], i
        assert st.as_dict() == whole.as_dict()


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_a_record_with_replaced_bad_utf8_is_counted_once_on_a_resumed_read(tmp_path, kind):
    """A read resumed at a record whose bad UTF-8 was replaced decodes that record again: it is counted once, as
    in an uninterrupted read (it was counted before the record's position was taken, and again on resume)."""
    texts = [b"clean one", b"bad \xff byte", b"clean two", b"bad \xfe again", b"clean three"]
    if kind == "jsonl":
        (tmp_path / "r.jsonl").write_bytes(b"".join(b'{"text": "' + t + b'"}\n' for t in texts))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": pa.array(texts, pa.binary())}), tmp_path / "r.parquet", row_group_size=2)
    c = cfg(source="auto", path=str(tmp_path), on_bad_utf8="replace")
    docs, whole = read(c)
    assert len(docs) == 5 and whole.replaced_bad_utf8 == 2
    for i, d in enumerate(docs):
        st = ReadStats()
        rest = list(iter_documents(c, st, start=json.loads(json.dumps(d.meta["position"]))))
        assert [r.text for r in rest] == [r.text for r in docs[i:]]
        assert st.as_dict() == whole.as_dict(), i


@pytest.mark.parametrize("source,mode", [("text", "none"), ("text", "paragraphs"), ("jsonl", "none")])
def test_truncated_gzip_is_a_data_error(tmp_path, source, mode):
    ext = "txt" if source == "text" else "jsonl"
    blob = gzip.compress(("".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(2000))).encode())
    (tmp_path / f"t.{ext}.gz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataError, match=rf"t\.{ext}\.gz: could not be read"):
        read(cfg(source=source, path=str(tmp_path), split_documents=mode))


def test_json_array_file_is_explained(tmp_path):
    f = tmp_path / "a.json"
    f.write_text('[\n  {"text": "a"},\n  {"text": "b"}\n]\n', encoding="utf-8")
    with pytest.raises(DataError, match="one JSON array, not JSON Lines"):
        read(cfg(source="jsonl", path=str(f), on_bad_record="drop"))


def test_jsonl_bad_utf8_offset_and_gzip(tmp_path):
    f = tmp_path / "u.jsonl"
    line1 = (json.dumps({"text": "a"}) + "\n").encode()
    f.write_bytes(line1 + b'{"text": "b\xc3"}\n')
    with pytest.raises(DataError, match=rf"u\.jsonl:2: invalid UTF-8 at byte offset {len(line1) + 11}"):
        read(cfg(source="jsonl", path=str(f)))
    g = tmp_path / "z" / "v.jsonl.gz"
    g.parent.mkdir()
    with gzip.open(g, "wb") as fh:
        fh.write(line1)
    docs, _ = read(cfg(source="jsonl", path=str(g.parent)))
    assert [(d.id, d.text) for d in docs] == [("v.jsonl.gz:1", "a")]


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    d = tmp_path / "pq"
    d.mkdir()
    pq.write_table(pa.table({"text": ["\ufeffalpha\r\n", None, "", "gamma"], "k": ["a", "b", "c", "d"]}), d / "1.parquet",
                   row_group_size=2)
    pq.write_table(pa.table({"text": ["delta"], "k": ["e"]}), d / "0.parquet")
    with pytest.raises(DataError, match=r"1\.parquet: row 1"):
        read(cfg(source="parquet", path=str(d)))
    docs, st = read(cfg(source="parquet", path=str(d), on_bad_record="drop"))
    assert [(x.id, x.text) for x in docs] == [("0.parquet:0", "delta"), ("1.parquet:0", "alpha\n"), ("1.parquet:3", "gamma")]
    assert st.drops == {"missing_field": 1, "empty": 1} and st.files == 2
    docs, _ = read(cfg(source="parquet", path=str(d), on_bad_record="drop", id_field="k"))
    assert [x.id for x in docs] == ["e", "a", "d"]
    with pytest.raises(DataError, match=r"no column 'body'.*columns are \['text', 'k'\]"):
        read(cfg(source="parquet", path=str(d), text_field="body"))


def test_hf_saved_dataset_and_parquet_builder(tmp_path):
    datasets = pytest.importorskip("datasets")
    texts = [f"story number {i}\r\n" for i in range(7)]
    ds = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": texts}),
                               "validation": datasets.Dataset.from_dict({"text": ["held out"]})})
    ds.save_to_disk(str(tmp_path / "saved"))
    for streaming in (True, False):
        docs, st = read(cfg(source="hf", path=str(tmp_path / "saved"), streaming=streaming))
        assert [x.text for x in docs] == [t.replace("\r\n", "\n") for t in texts]
        assert docs[3].id == "saved/train:3" and docs[3].meta["row"] == 3
    docs, _ = read(cfg(source="hf", path=str(tmp_path / "saved"), hf_split="validation"))
    assert [x.text for x in docs] == ["held out"]
    with pytest.raises(ConfigError, match="hf_split"):
        read(cfg(source="hf", path=str(tmp_path / "saved"), hf_split="test"))
    ds["train"].to_parquet(str(tmp_path / "p.parquet"))
    docs, _ = read(cfg(source="hf", hf_name="parquet", path=str(tmp_path / "p.parquet"), max_documents=3))
    assert [x.id for x in docs] == ["parquet/train:0", "parquet/train:1", "parquet/train:2"]
    assert docs[2].text == "story number 2\n"


def test_hf_hub_unreachable_is_a_data_error(monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError, match="hf dataset 'nobody/no-such-dataset'.*could not be loaded"):
        read(cfg(source="hf", hf_name="nobody/no-such-dataset"))


def test_storybook_source_sizing():
    docs, st = read(cfg(source="storybook", seed=3, max_documents=25))
    assert [d.text for d in iter_documents({"source": "storybook", "seed": 3, "max_documents": 25})] == [d.text for d in docs]
    assert len(docs) == 25 and docs[4].id == "storybook:4" and docs[4].meta["index"] == 4
    again, _ = read(cfg(source="storybook", seed=3, max_documents=25))
    assert [d.text for d in docs] == [d.text for d in again]
    docs, st = read(cfg(source="storybook", target_tokens=2000))
    assert 2000 <= st.words < 2000 + max(len(d.text.split()) for d in docs)
    docs, _ = read(cfg(source="storybook", target_tokens=2000), count_tokens=len)  # characters as "tokens"
    assert 2000 <= sum(len(d.text) for d in docs) < 2000 + 2000


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="source: unknown source 'txt'; did you mean 'text'"):
        cfg(source="txt", path="x")
    with pytest.raises(ConfigError, match="path: source 'jsonl' needs"):
        cfg(source="jsonl")
    with pytest.raises(ConfigError, match="split_documents: must be one of"):
        cfg(source="text", path="x", split_documents="chapters")
    with pytest.raises(ConfigError, match="storybook.p_past"):
        cfg(source="storybook", storybook={"p_past": 2})
    with pytest.raises(ConfigError, match="path: file or folder not found"):
        read(cfg(source="text", path=str(tmp_path / "missing")))
    with pytest.raises(ConfigError, match="hf_name"):
        cfg(source="hf")


def test_novels(shared_data):
    c = cfg(source="text", path=str(shared_data / "novels"), split_documents="paragraphs", chunk_chars=4000)
    docs, st = read(c)
    assert st.files == 90 and not st.drops
    assert 10_000 < st.documents < 40_000 and 10_000_000 < st.words < 20_000_000
    assert len({d.id for d in docs}) == len(docs)
    assert all("\r" not in d.text and "\ufeff" not in d.text for d in docs)
    assert all(0 < len(d.text) <= 4000 for d in docs)
    files = [d.meta["path"] for d in docs]
    assert files == sorted(files) and len(set(files)) == 90
    first = docs[:50]
    again, _ = read(cfg(source="text", path=str(shared_data / "novels"), split_documents="paragraphs", max_documents=50))
    assert [(d.id, d.text) for d in first] == [(d.id, d.text) for d in again]
    whole, st2 = read(cfg(source="text", path=str(shared_data / "novels"), max_chars=10_000_000))
    assert len(whole) == 90 and st2.words == st.words
    cut, st3 = read(cfg(source="text", path=str(shared_data / "novels")))  # max_chars 1M: long novels in pieces
    assert len(cut) > 90 and all(len(d.text) <= 1_000_000 for d in cut) and st3.words == st.words
    assert "\n".join(d.text for d in cut if d.meta["path"] == cut[0].meta["path"]).split() == whole[0].text.split()
    for w in whole[::15]:  # the line-streamed chunks are exactly the chunks of the whole text
        assert [d.text for d in docs if d.meta["path"] == w.id] == chunk_text(w.text, "paragraphs", 4000)


@pytest.mark.parametrize("split", ["paragraphs", "none"])
def test_a_streamed_hf_read_continues_at_any_document_position(tmp_path, split):
    """iter_documents(start=doc.meta["position"]) gives the same documents from there on and the same counts,
    also from the middle of a record cut into several pieces and after dropped records."""
    src = tmp_path / "src"
    src.mkdir()
    for part in range(2):
        lines = []
        for i in range(30):
            text = "\n\n".join(f"Paragraph {j} of record {part}-{i}. " * 6 for j in range(1 + i % 4))
            lines.append(json.dumps({"text": text if i % 7 else "   "}))  # every 7th record is blank: dropped
        (src / f"part-{part}.jsonl").write_text("\n".join(lines) + "\n")
    c = cfg(source="hf", hf_name="json", path=str(src), streaming=True, split_documents=split, chunk_chars=200)
    whole = ReadStats()
    docs = list(iter_documents(c, whole))
    assert whole.drops["empty"] > 0 and any(d.meta.get("chunk", 0) > 0 for d in docs) == (split == "paragraphs")
    for i in (0, 1, 7, len(docs) // 2, len(docs) - 1):
        st = ReadStats()
        rest = list(iter_documents(c, st, start=docs[i].meta["position"]))
        assert [(d.id, d.text) for d in rest] == [(d.id, d.text) for d in docs[i:]]
        assert st.as_dict() == whole.as_dict()
    keep = "auto, datatrove_csv, datatrove_jsonl, datatrove_parquet, datatrove_warc, hf, jsonl, parquet, text"
    with pytest.raises(DataError, match=f"only kept for sources {keep}$"):
        next(iter_documents(cfg(source="storybook"), start=docs[1].meta["position"]))


NOVEL_PAIR = ["Barclay_Postern_1911.txt", "Chesterton_Thursday_1908.txt"]  # both with a BOM and CRLF line ends


@pytest.fixture
def local_corpus(tmp_path, shared_data):
    """A folder of every local format, made from two real novels: the novels as they are (BOM, CRLF, lines
    of thousands of characters); their paragraphs as JSON Lines with a BOM, CRLF line ends, a blank line, a
    broken record and one record of over 1 MiB (longer than a read segment); more paragraphs as gzipped
    JSON Lines; and Parquet in row groups of 7 rows with one null text."""
    d = tmp_path / "corpus"
    (d / "books").mkdir(parents=True)
    paras = []
    for name in NOVEL_PAIR:
        raw = (shared_data / "novels" / name).read_bytes()
        (d / "books" / name).write_bytes(raw)  # a copy: a test below changes files
        paras += [p for p in raw.decode("utf-8-sig").replace("\r\n", "\n").split("\n\n") if p.strip()]
    lines = [json.dumps({"text": p}) for p in paras[:200]]
    lines[50:50] = ["", "{broken", json.dumps({"text": "\n\n".join(paras) * 2})]
    assert len(lines[52]) > 1 << 20
    (d / "paras.jsonl").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    (d / "more.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps({"text": p}) + "\n"
                                                            for p in paras[200:300]).encode()))
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = paras[300:400]
    texts[40] = None
    pq.write_table(pa.table({"text": texts}), d / "rows.parquet", row_group_size=7)
    return d


@pytest.mark.parametrize("split", ["paragraphs", "none"])
def test_a_file_read_continues_at_any_document_position(local_corpus, split, file_reads):
    """In every local format, iter_documents(start=position) gives the documents and counts of an uninterrupted
    read from there on, opens no file before the position's, and seeks inside JSON Lines to the record and
    inside a text file to the line of the piece (or of the latest piece a fresh read can produce again)."""
    c = cfg(source="auto", path=str(local_corpus), split_documents=split, max_chars=200_000, on_bad_record="drop")
    whole = ReadStats()
    docs = list(iter_documents(c, whole))
    assert whole.files == 5 and whole.drops == {"bad_json": 1, "missing_field": 1}
    by_file: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        by_file.setdefault(d.meta["position"]["path"], []).append(i)
    assert list(by_file) == ["books/" + n for n in NOVEL_PAIR] + ["more.jsonl.gz", "paras.jsonl", "rows.parquet"]
    # the first, a middle and the last document of each file, and pieces inside the long record
    picks = sorted({i for ii in by_file.values() for i in (ii[0], ii[len(ii) // 2], ii[-1])}
                   | {i for i, d in enumerate(docs) if d.meta.get("line") == 53 and d.meta.get("chunk", 1) in (1, 2)})
    for i in picks:
        pos = json.loads(json.dumps(docs[i].meta["position"]))  # as a start.json file holds it
        file_reads.opened.clear()
        file_reads.starts.clear()
        st = ReadStats()
        rest = list(iter_documents(c, st, start=pos))
        assert [(d.id, d.text) for d in rest] == [(d.id, d.text) for d in docs[i:]], i
        assert st.as_dict() == whole.as_dict()
        # nothing before the position's file was opened
        assert min(f.relative_to(local_corpus).as_posix() for f in file_reads.opened) == pos["path"]
        if pos["path"].endswith((".jsonl", ".txt")):  # read from the record's (piece's) line on, not the file's start
            assert file_reads.starts[0] == (local_corpus / pos["path"], pos["at"]["offset"])
            assert pos["at"]["offset"] >= 3 and pos["piece"] >= pos["at"].get("first", 0)
        if pos["path"].endswith(".jsonl"):
            assert pos["at"]["line"] == docs[i].meta["line"]
        if pos["path"].endswith(".parquet"):
            assert pos["at"]["row"] == docs[i].meta["row"]


def test_a_position_in_files_that_changed_is_refused(local_corpus):
    """Resuming would seek into other bytes: a changed file, a changed file before it, or a file added to the
    listing before it stops the read with a DataError naming the file; restored, the read continues."""
    import os
    import re

    c = cfg(source="auto", path=str(local_corpus), max_chars=200_000, on_bad_record="drop")
    docs = list(iter_documents(c))
    k = next(i for i, d in enumerate(docs) if d.meta["position"]["path"] == "paras.jsonl" and d.meta["line"] > 60)
    pos = docs[k].meta["position"]
    f, book = local_corpus / "paras.jsonl", local_corpus / "books" / NOVEL_PAIR[0]
    data, st = f.read_bytes(), f.stat()
    with f.open("ab") as fh:
        fh.write(b'{"text": "appended"}\r\n')
    with pytest.raises(DataError, match=re.escape(f"{f}: the file changed since the position was recorded (size "
                                                  f"{st.st_size} -> {st.st_size + 22}, mtime_ns")):
        next(iter_documents(c, start=pos))
    f.write_bytes(data)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert next(iter_documents(c, start=pos)).text == docs[k].text  # the same bytes again: it resumes

    bst = book.stat()
    os.utime(book, ns=(bst.st_atime_ns, bst.st_mtime_ns + 10**9))  # rewritten, same size
    with pytest.raises(DataError, match="the files before 'paras.jsonl' changed since the position was recorded"):
        next(iter_documents(c, start=pos))
    os.utime(book, ns=(bst.st_atime_ns, bst.st_mtime_ns))

    (local_corpus / "books" / "Aaron_New_2026.txt").write_text("A new book.\n")
    with pytest.raises(DataError, match="file 3 of the listing was 'paras.jsonl' when the position was recorded, "
                                        "now 'more.jsonl.gz' is there"):
        next(iter_documents(c, start=pos))
