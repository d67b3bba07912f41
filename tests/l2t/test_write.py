import json

import numpy as np
import pytest

from preschool.data.shards import ShardSet
from preschool.data.tokenizer import train_bpe
from preschool.l2t.write import build_l2t

PARA = ("The boat left the harbour at dawn and the sailors sang. Nobody on the shore could hear them. "
        "By noon the wind had turned, and the sea grew rough. The captain ordered the sails down. ")


def _docs(n=40):
    rng = np.random.default_rng(0)
    docs = []
    for i in range(n):
        k = int(rng.integers(1, 6))
        docs.append(f"Chapter {i}.\n\n" + PARA * k + f"It was day {i} of {n}.")
    return docs


@pytest.fixture(scope="module")
def tok():
    return train_bpe(_docs(), 400)


CFG = {"seq_len": 255, "l2t": {"chunk_tokens": 48, "min_num_words": 10}, "val_fraction": 0.1, "pack_batch": 16}


def _read(path):
    ss = ShardSet(path)
    return {k: ss.rows(range(len(ss)), k) for k in ("tokens", "loss_mask", "segments")}


def test_one_and_two_workers_identical(tmp_path, tok):
    m1 = build_l2t(_docs(), tmp_path / "a", CFG, tok, workers=1)
    m2 = build_l2t(_docs(), tmp_path / "b", CFG, tok, workers=2)
    for split in ("train", "val"):
        a, b = _read(tmp_path / "a" / split), _read(tmp_path / "b" / split)
        for k in a:
            assert a[k].shape == b[k].shape and (a[k] == b[k]).all(), (split, k)
    assert m1["splits"] == m2["splits"]
    s1 = json.loads((tmp_path / "a" / "stats.json").read_text())
    assert s1 == json.loads((tmp_path / "b" / "stats.json").read_text())
    tr = s1["train"]
    assert tr["documents_by_route"]["raw"] > 0 and tr["documents_by_route"]["l2t"] > 0
    assert sum(tr["documents_by_task"].values()) == tr["documents_by_route"]["l2t"]
    assert (tmp_path / "a" / "tokenizer" / "tokenizer.json").is_file()


def test_progress_bar_leaves_the_output_unchanged(tmp_path, tok, capsys):
    # the bar has no total (documents are streamed): it must count, not be tested for truth
    m1 = build_l2t(_docs(), tmp_path / "a", CFG, tok)
    m2 = build_l2t(_docs(), tmp_path / "b", CFG, tok, progress=True)
    assert m1["splits"] == m2["splits"]
    assert "transform l2t" in capsys.readouterr().err


def test_rows_start_with_bos_and_segments(tmp_path, tok):
    build_l2t(_docs(), tmp_path / "o", {**CFG, "raw_ratio": 0.0}, tok)
    d = _read(tmp_path / "o" / "train")
    assert (d["tokens"][:, 0] == 0).all()  # every L2T row starts with a sample's BOS
    assert (d["loss_mask"] == 1).all()  # reference: loss on every token incl. padding
    for t, s in zip(d["tokens"], d["segments"]):
        starts = np.flatnonzero(np.diff(s.astype(int))) + 1
        assert (t[starts] == 0).all()  # each new segment starts with BOS (or padding, also id 0)


def test_shared_uses_every_document_twice(tmp_path, tok):
    build_l2t(_docs(), tmp_path / "s", {**CFG, "scenario": "shared", "val_fraction": 0.0}, tok)
    st = json.loads((tmp_path / "s" / "stats.json").read_text())["train"]
    assert st["documents_by_route"] == {"both": 40}
    assert st["raw_packing"]["documents"] == 40


def test_answer_only_loss(tmp_path, tok):
    build_l2t(_docs(), tmp_path / "q", {**CFG, "raw_ratio": 0.0, "loss": "answer",
                                         "l2t": {"tasks": ["one"], "chunk_tokens": 48, "min_num_words": 10}}, tok)
    d = _read(tmp_path / "q" / "train")
    text = tok.decode(d["tokens"][0][d["loss_mask"][0] == 1].tolist())
    assert 0 < d["loss_mask"].mean() < 1
    assert "Chapter" in text or "boat" in text  # the completion (whole chunk) is trained
    assert (d["loss_mask"][d["tokens"] == 0] == 0).all()  # BOS/padding untrained


def test_token_ratio(tmp_path, tok):
    m = build_l2t(_docs(), tmp_path / "t", {**CFG, "ratio_by": "tokens", "raw_ratio": 0.5, "val_fraction": 0.0}, tok)
    st = json.loads((tmp_path / "t" / "stats.json").read_text())["train"]
    raw = st["raw_packing"]["tokens_in"]
    l2t = st["l2t_packing"]["tokens_in"]
    assert abs(raw / (raw + l2t) - 0.5) < 0.1
    assert m["splits"]["train"]["n_rows"] > 0


def test_curriculum_and_concat_packer(tmp_path, tok):
    m = build_l2t(_docs(), tmp_path / "c", {**CFG, "curriculum": [1.0, 0.0], "packer": "concat",
                                            "val_fraction": 0.0}, tok)
    prof = m["splits"]["train"]["l2t_share_by_tenth"]
    assert prof[0] > prof[-1]


def test_token_caps_stop_early_and_keep_mix(tmp_path, tok):
    # reading stops at a work-unit boundary: small units (about 8 documents) let it stop early
    full = build_l2t(_docs(), tmp_path / "f", {**CFG, "val_fraction": 0.0}, tok, unit_tokens=500)
    n = full["splits"]["train"]["n_rows"]
    cap = (n // 3) * 256
    m = build_l2t(_docs(), tmp_path / "c", {**CFG, "val_fraction": 0.0, "train_tokens": cap}, tok, unit_tokens=500)
    s = m["splits"]["train"]
    assert s["n_rows"] == n // 3 and m["documents"] < 40
    assert 0 < s["l2t_rows"] < s["n_rows"]
    assert ShardSet(tmp_path / "c" / "train").n_rows == n // 3
