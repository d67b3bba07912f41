"""A corpus streamed through `datasets` (a local JSONL or Parquet folder, streaming=True) prepares on the
parallel engine, resumes after a kill with the same bytes, and keeps its validation split when the corpus
grows by appended files; a folder read directly (text, JSON Lines, Parquet) resumes at its file position."""

import json

import pytest

from preschool.corpora.base import CorpusConfig
from preschool.corpora.storybook import Storybook
from preschool.data.builders.corpus import CorpusJob, CorpusSpec
from preschool.data.prepare import prepare_data
from preschool.data.shards import content_sha256
from preschool.data.tokenizer import TokenizerConfig
from preschool.l2t.builder import L2TSpec

SEQ = 32
ROW = SEQ + 1
SPEC = CorpusSpec(corpus="web", tokens=120 * ROW, val_tokens=12 * ROW, val_fraction=0.1, unit_tokens=400)
TOK = TokenizerConfig(vocab_size=300, sample_documents=100)


def _write(folder, fmt, part, start, n):
    book = Storybook(seed=0)
    rows = [{"text": book.story(i), "id": f"story-{i}"} for i in range(start, start + n)]
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        (folder / f"part-{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), folder / f"part-{part}.parquet")


def _rows_read(monkeypatch) -> list[int]:
    """Rows of the records the hf reader yields from now on."""
    from preschool.corpora.sources.hf import HFSource

    rows, real = [], HFSource.documents

    def documents(self, stats):
        for doc in real(self, stats):
            rows.append(doc.meta["row"])
            yield doc

    monkeypatch.setattr(HFSource, "documents", documents)
    return rows


def _prepare(out, folder, fmt, workers=2):
    corpus = CorpusConfig(source="hf", hf_name="json" if fmt == "jsonl" else "parquet", path=str(folder),
                          streaming=True)
    return prepare_data(out, TOK, {"web": corpus}, {"pt": SPEC}, seq_len=SEQ, seed=0, workers=workers,
                        progress=False)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_streamed_folder_prepares_resumes_and_keeps_val(tmp_path, fmt, monkeypatch, die_at_unit):
    src = tmp_path / "src"
    for part in range(3):
        _write(src, fmt, part, part * 400, 400)
    ref = tmp_path / "ref"
    _prepare(ref, src, fmt)
    want = content_sha256(ref / "pt")
    assert json.loads((ref / "pt" / "train" / "manifest.json").read_text())["units"] > 2

    # killed while building unit 3; the rerun reuses units 0-2 and writes the same bytes
    restore = die_at_unit(CorpusJob, 3)
    with pytest.raises(KeyboardInterrupt):
        _prepare(tmp_path / "run", src, fmt, workers=1)
    restore()
    work = next((tmp_path / "run").glob(".pt.work-*"))
    assert len(list(work.glob("u*/unit.json"))) == 3
    # where unit 3 starts in the stream was recorded before it was built
    start = json.loads((work / "u000003.start.json").read_text())["position"]
    assert start["row"] > 0 and start["read"]["documents"] == start["documents"] > 0
    rows = _rows_read(monkeypatch)
    _prepare(tmp_path / "run", src, fmt)
    assert content_sha256(tmp_path / "run" / "pt") == want
    # the rerun continued the stream at unit 3: no record before it was read again
    assert min(rows) == start["row"]

    # the corpus grows by an appended file: held-out documents stay held out, and the slice the
    # budget takes (from the start of the stream) is byte for byte the same
    _write(src, fmt, 3, 1200, 400)
    grown = tmp_path / "grown"
    _prepare(grown, src, fmt)
    for split in ("train", "val"):
        assert (grown / "pt" / f"{split}.doc_ids.txt").read_text() == (ref / "pt" / f"{split}.doc_ids.txt").read_text()
    assert content_sha256(grown / "pt") == want


@pytest.mark.parametrize("source", ["hf", "jsonl"])
def test_a_streamed_l2t_build_resumes_at_its_stream_position(tmp_path, monkeypatch, die_at_unit, source):
    """An L2T dataset's unit carries the text before its first document: resumed at the recorded stream
    position (with that text), the build writes the bytes of an uninterrupted one; streamed through hf
    or read directly."""
    from preschool.l2t.write import L2TJob

    src = tmp_path / "src"
    _write(src, "jsonl", 0, 0, 600)
    corpus = CorpusConfig(source="hf", hf_name="json", path=str(src), streaming=True) if source == "hf" else \
        CorpusConfig(source="jsonl", path=str(src))
    spec = {"l2t": L2TSpec(corpus="web", tokens=40 * ROW, val_tokens=4 * ROW, val_fraction=0.1, unit_tokens=300,
                           l2t={"scenario": "disjoint", "l2t": {"min_num_words": 5}})}

    def prepare(out):
        return prepare_data(out, TOK, {"web": corpus}, spec, seq_len=SEQ, seed=0, workers=1, progress=False)

    prepare(tmp_path / "ref")
    restore = die_at_unit(L2TJob, 3)
    with pytest.raises(KeyboardInterrupt):
        prepare(tmp_path / "run")
    restore()
    token = json.loads(next((tmp_path / "run").glob(".l2t.work-*/u000003.start.json")).read_text())
    assert token["first"] > 0 and token["prev"]
    starts = []
    real_units = L2TJob.units

    def units(self, start=None):
        starts.append(start)
        return real_units(self, start)

    monkeypatch.setattr(L2TJob, "units", units)
    prepare(tmp_path / "run")
    assert content_sha256(tmp_path / "run" / "l2t") == content_sha256(tmp_path / "ref" / "l2t")
    assert starts == [(3, token)]  # the rerun's document stream began at unit 3's recorded position


def test_a_rerun_with_every_unit_finished_keeps_the_read_counts(tmp_path, monkeypatch):
    """Killed after its last unit but before linking: the rerun rebuilds nothing, reads only the last unit's
    documents again, and dataset.json records the counts of an uninterrupted read."""
    import preschool.data.builders.corpus as prep

    src = tmp_path / "src"
    _write(src, "jsonl", 0, 0, 800)
    ref, run = tmp_path / "ref", tmp_path / "run"
    _prepare(ref, src, "jsonl", workers=1)
    real = prep.adopt_units

    def dies(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(prep, "adopt_units", dies)
    with pytest.raises(KeyboardInterrupt):
        _prepare(run, src, "jsonl", workers=1)
    monkeypatch.setattr(prep, "adopt_units", real)
    last = max(int(f.name[1:7]) for f in next(run.glob(".pt.work-*")).glob("u*.start.json"))
    start = json.loads((next(run.glob(".pt.work-*")) / f"u{last:06d}.start.json").read_text())["position"]
    rows = _rows_read(monkeypatch)
    _prepare(run, src, "jsonl", workers=1)
    assert min(rows) == start["row"] > 0  # only the last unit's documents were read again (nothing rebuilt)
    assert content_sha256(run / "pt") == content_sha256(ref / "pt")
    read = json.loads((run / "pt" / "dataset.json").read_text())["read"]
    assert read == json.loads((ref / "pt" / "dataset.json").read_text())["read"] and read["documents"] > 0


def _novel_excerpts(folder, shared_data, fmt):
    """Eight small files cut from real novels: each novel's first 1,500-odd bytes (BOM, title page) and 3,000-odd
    from its middle, at CRLF line ends; as text, or their paragraphs as JSON Lines (a BOM, CRLF line ends) or
    Parquet (row groups of 4)."""
    folder.mkdir(parents=True)
    for n, f in enumerate(sorted((shared_data / "novels").glob("*.txt"))[:8]):
        raw = f.read_bytes()
        mid = raw.index(b"\r\n", len(raw) // 2) + 2
        raw = raw[:raw.index(b"\r\n", 1500) + 2] + raw[mid:raw.index(b"\r\n", mid + 3000) + 2]
        paras = [p for p in raw.decode("utf-8-sig").replace("\r\n", "\n").split("\n\n") if p.strip()]
        if fmt == "text":
            (folder / f"part-{n}.txt").write_bytes(raw)
        elif fmt == "jsonl":
            (folder / f"part-{n}.jsonl").write_bytes(
                b"\xef\xbb\xbf" + b"".join(json.dumps({"text": p}).encode() + b"\r\n" for p in paras))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"text": paras}), folder / f"part-{n}.parquet", row_group_size=4)


@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet"])
def test_a_local_folder_resumes_at_its_file_position(tmp_path, fmt, shared_data, die_at_unit, file_reads):
    """Killed while building unit 3, a prepare of a folder read directly resumes at the file (and line or row group)
    unit 3 starts in: no file before it is opened again, and the shards, checksums and read counts are the ones
    an uninterrupted run writes."""
    src = tmp_path / "src"
    _novel_excerpts(src, shared_data, fmt)
    corpus = CorpusConfig(source="auto", path=str(src), split_documents="paragraphs", chunk_chars=400)

    def prepare(out, workers):
        return prepare_data(out, TOK, {"web": corpus}, {"pt": SPEC}, seq_len=SEQ, seed=0, workers=workers,
                            progress=False)

    ref, run = tmp_path / "ref", tmp_path / "run"
    prepare(ref, 2)
    restore = die_at_unit(CorpusJob, 3)
    with pytest.raises(KeyboardInterrupt):
        prepare(run, 1)
    restore()
    start = json.loads(next(run.glob(".pt.work-*/u000003.start.json")).read_text())["position"]
    assert start["file"] >= 1 and start["read"]["documents"] == start["documents"] > 0
    file_reads.opened.clear()
    file_reads.starts.clear()
    prepare(run, 2)
    assert content_sha256(run / "pt") == content_sha256(ref / "pt")
    for name in ("train/manifest.json", "val/manifest.json", "train.doc_ids.txt"):
        assert (run / "pt" / name).read_bytes() == (ref / "pt" / name).read_bytes(), name
    ours, theirs = (json.loads((d / "pt" / "dataset.json").read_text()) for d in (run, ref))
    assert ours["read"] == theirs["read"] and ours["read"]["files"] >= start["file"] + 1
    assert min(f.relative_to(src).as_posix() for f in file_reads.opened) == start["path"]
    if fmt != "parquet":  # text and JSON Lines: read from the line unit 3 starts on (or a piece before it)
        assert file_reads.starts[0] == (src / start["path"], start["at"]["offset"])


def test_read_counts_do_not_depend_on_workers_or_where_a_run_stopped(tmp_path, monkeypatch):
    """A prepare that stops at its budget records the read counts of a one-worker read that stopped there: with
    three workers the parent reads units ahead for them (the counts were those of how far it read), and a
    three-worker run killed after its units were built, rerun, takes its finished units up to the budget."""
    import preschool.data.builders.corpus as prep

    src = tmp_path / "src"
    for part in range(3):
        _write(src, "jsonl", part, part * 400, 400)
    lines = (src / "part-0.jsonl").read_text().splitlines(keepends=True)
    (src / "part-0.jsonl").write_text("".join(ln + ("{broken\n" if i % 7 == 0 else "") for i, ln in enumerate(lines)))
    corpus = CorpusConfig(source="jsonl", path=str(src), on_bad_record="drop")

    def prepare(out, workers):
        prepare_data(out, TOK, {"web": corpus}, {"pt": SPEC}, seq_len=SEQ, seed=0, workers=workers, progress=False)
        return json.loads((out / "pt" / "dataset.json").read_text())["read"]

    ref = prepare(tmp_path / "ref", 1)
    assert 0 < ref["documents"] < 400 and ref["drops"]["bad_json"] > 5  # the budget stops the read early
    assert prepare(tmp_path / "three", 3) == ref
    real = prep.adopt_units

    def dies(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(prep, "adopt_units", dies)
    with pytest.raises(KeyboardInterrupt):
        prepare(tmp_path / "run", 3)
    monkeypatch.setattr(prep, "adopt_units", real)
    assert prepare(tmp_path / "run", 1) == ref
    assert content_sha256(tmp_path / "run" / "pt") == content_sha256(tmp_path / "ref" / "pt")
