"""Real, messy text: the shared novels (BOM, CRLF, front matter, very long lines)."""

import json
from collections import Counter

import pytest

from preschool.l2t.inputs import iter_texts
from preschool.l2t.transform import ALL_TASKS, L2TTransform

FEW = ["Woolf_Lighthouse_1927.txt", "Doyle_Hound_1902.txt", "Stevenson_Treasure_1883.txt"]


def _check(r, name):
    assert r.task == name
    for s in r.samples:
        assert s.task == name and "\n\n" in s.text and 0 < s.answer_start <= len(s.text)


def test_every_task_on_three_novels(shared_data):
    texts = [t for f in FEW for _, t in iter_texts(shared_data / "novels" / f)]
    tfs = {n: L2TTransform({"tasks": [n]}) for n in ALL_TASKS}
    splitter = tfs["half"]
    drops: Counter = Counter()
    samples: Counter = Counter()
    prev_text, prev_sents = None, None
    for i, text in enumerate(texts):
        sents = splitter.sentences(text)
        assert len(sents) > 1000
        for name, tf in tfs.items():
            r = tf(i, text, prev_text, sentences=sents, prev_sentences=prev_sents)
            _check(r, name)
            drops.update(r.drops)
            samples[name] += len(r.samples)
        prev_text, prev_sents = text, sents
    assert set(samples) == set(ALL_TASKS) and min(samples.values()) > 50, samples
    assert all(k.split("/")[0] in ALL_TASKS for k in drops), drops


@pytest.mark.slow
def test_build_all_novels_two_workers(shared_data, tmp_path):
    from preschool.cli import main

    out = tmp_path / "l2t"
    assert main(["transform", "l2t", "--input", str(shared_data / "novels"), "--out", str(out),
                 "--workers", "2", "--seq-len", "1024", "--val-fraction", "0.05"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    st = json.loads((out / "stats.json").read_text())
    # every document the reader yields for the folder is built: the 90 novels, the longest cut into
    # pieces of at most max_chars characters (ids <file>#<piece>)
    from preschool.l2t.inputs import iter_texts

    ids = [i for i, _ in iter_texts(shared_data / "novels")]
    assert len({i.split("#")[0] for i in ids}) == 90 and m["documents"] == len(ids) > 90
    tr = st["train"]
    assert tr["l2t_rows"] > 0 and tr["raw_rows"] > 0
    print(json.dumps({s: st[s]["drops"] for s in st}, indent=1))
