import json

import numpy as np
import pytest
import torch

from preschool.errors import ConfigError, DataError
from preschool.evals import EVALUATORS
from preschool.evals.qa_f1 import best_scores, exact_match, f1_score, load_qa, normalize_answer

OBJECTS = ["ball", "cup", "hat", "box", "kite", "lamp", "sock", "bell"]
COLORS = ["red", "blue", "green", "yellow", "black", "white"]


def synthetic_qa(n, seed):
    """Tiny context QA: which colour does the context give the asked-about object?"""
    rows = []
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        objs = rng.choice(len(OBJECTS), size=3, replace=False)
        cols = rng.choice(len(COLORS), size=3, replace=False)
        ctx = " ".join(f"The {OBJECTS[o]} is {COLORS[c]}." for o, c in zip(objs, cols))
        q = int(rng.integers(3))
        rows.append({"id": f"s{seed}-{i}", "context": ctx, "question": f"What colour is the {OBJECTS[objs[q]]}?",
                     "answer": COLORS[cols[q]], "type": "lookup"})
    return rows


def test_squad_normalisation_and_f1_by_hand():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("a cat, an owl and THE dog") == "cat owl and dog"
    # pred {cat, sat}, gold {cat, sat, down}: P = 1, R = 2/3, F1 = 0.8
    assert f1_score("The cat sat", "cat sat down") == pytest.approx(0.8)
    # pred {blue, red, red}, gold {red, red, green}: 2 shared, P = R = 2/3
    assert f1_score("blue red red", "red red green") == pytest.approx(2 / 3)
    assert f1_score("Paris", "London") == 0.0
    assert f1_score("the", "a") == 1.0  # both normalise to empty
    assert f1_score("", "Paris") == 0.0
    assert exact_match("The Beatles.", "beatles") == 1.0
    assert best_scores("New York City", ["NYC", "New York"]) == (pytest.approx(0.8), 0.0)
    with pytest.raises(DataError):
        best_scores("x", [])


def test_loaders_musique_hotpot_2wiki_plain(tmp_path):
    mus = tmp_path / "musique_dev.jsonl"
    mus.write_text("\n".join(json.dumps(r) for r in [
        {"id": "2hop__1_2", "question": "Who?", "answer": "Ann", "answer_aliases": ["Anne"], "answerable": True,
         "paragraphs": [{"idx": 0, "title": "A", "paragraph_text": "Ann wrote it.", "is_supporting": True},
                        {"idx": 1, "title": "B", "paragraph_text": "Noise.", "is_supporting": False}]},
        {"id": "3hop1__9", "question": "Where?", "answer": "", "answerable": False, "paragraphs": []},
    ]) + "\n")
    ex = load_qa(mus)
    assert len(ex) == 1 and ex[0].qtype == "2hop" and ex[0].answers == ["Ann", "Anne"]
    assert ex[0].context == "A: Ann wrote it."  # gold paragraphs only
    assert "Noise." in load_qa(mus, context="all")[0].context
    hot = tmp_path / "hotpot_dev_distractor.json"
    hot.write_text(json.dumps([{"_id": "h1", "question": "Which?", "answer": "yes", "type": "comparison",
                                "supporting_facts": [["T1", 0]],
                                "context": [["T1", ["First.", " Second."]], ["T2", ["Distractor."]]]}]))
    h = load_qa(hot)[0]
    assert h.context == "T1: First. Second.\nT2: Distractor." and h.qtype == "comparison"
    assert load_qa(hot, context="gold")[0].context == "T1: First. Second."
    wiki = tmp_path / "2wiki_dev.json"
    wiki.write_text(json.dumps({"data": [{"_id": "w1", "type": "compositional", "question": "Q?", "answer": "B",
                                          "evidences": [], "supporting_facts": {"title": ["X"], "sent_id": [0]},
                                          "context": {"title": ["X", "Y"], "sentences": [["x1"], ["y1"]]}}]}))
    w = load_qa(wiki)[0]
    assert w.context == "X: x1\nY: y1" and w.qtype == "compositional"
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([{"question": "q", "context": ["c1", "c2"], "answers": {"text": ["a", "b"]}}]))
    assert load_qa(plain)[0].answers == ["a", "b"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a"}\n{not json}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2"):
        load_qa(bad)
    noans = tmp_path / "noans.json"
    noans.write_text(json.dumps([{"question": "q", "context": "c"}]))
    with pytest.raises(DataError, match="answer"):
        load_qa(noans)
    with pytest.raises(ConfigError, match="eval_path"):
        EVALUATORS.build("qa_f1", {})
    with pytest.raises(ConfigError, match="format"):
        EVALUATORS.build("qa_f1", {"eval_path": "x", "format": "squad"})


def _qa_setup(tmp_path):
    """(tiny GPT-2 with dropout, its BPE tokenizer, a qa_f1 config) over synthetic train/dev files."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from preschool.data.tokenizer import as_hf, train_bpe

    train, dev = synthetic_qa(160, seed=1), synthetic_qa(24, seed=2)
    for name, rows in (("train", train), ("dev", dev)):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    texts = [f"{r['context']}\n\nQuestion: {r['question']}\nAnswer: {r['answer']}" for r in train]
    tok = as_hf(train_bpe(texts, vocab_size=400, min_frequency=1))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=96, n_embd=32, n_layer=2, n_head=2,
                                       bos_token_id=0, eos_token_id=0, pad_token_id=0)).eval()
    cfg = {"train_path": str(tmp_path / "train.jsonl"), "eval_path": str(tmp_path / "dev.jsonl"),
           "lr": 1e-2, "schedule": "constant", "batch_size": 8, "max_new_tokens": 4, "eval_batch_size": 5, "seed": 3}
    return model, tok, cfg


def test_finetune_improves_loss_and_scores(tmp_path):
    model, tok, cfg = _qa_setup(tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ev = EVALUATORS.build("qa_f1", cfg)
    summary = ev.run(model, tok, out_dir=tmp_path / "out")
    m = summary["metrics"]
    assert m["n_train"] == 160 and m["n_eval"] == 24 and m["n_train_dropped"] == 0
    assert m["train_loss_last"] < 0.5 * m["train_loss_first"]
    assert 0 <= m["em"] <= m["f1"] <= 100
    assert "f1/type/lookup" in m
    items = [json.loads(x) for x in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    # after the fine-tune the model answers with colour words (greedy decoding stops at EOS)
    assert sum(r["prediction"] in COLORS for r in items) >= len(items) // 2
    # F1 in the summary is the mean of per-item F1 recomputed from the predictions
    assert m["f1"] == pytest.approx(np.mean([100 * best_scores(r["prediction"], r["answers"])[0] for r in items]))
    # the evaluated checkpoint itself is untouched
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # same seed -> same fine-tune, and the generation batch size does not change the answers
    small = {**cfg, "max_train_examples": 16}
    a = EVALUATORS.build("qa_f1", {**small, "eval_batch_size": 24}).evaluate(model, tok)
    b = EVALUATORS.build("qa_f1", {**small, "eval_batch_size": 1}).evaluate(model, tok)
    assert a.extra["train_losses"] == b.extra["train_losses"]
    assert [r["prediction"] for r in a.items] == [r["prediction"] for r in b.items]
    # a context limit below every training example's length drops them all
    with pytest.raises(DataError, match="fits"):
        EVALUATORS.build("qa_f1", {**cfg, "max_length": 16}).evaluate(model, tok)


def test_an_interrupted_qa_fine_tune_resumes_to_the_same_scores(tmp_path, monkeypatch):
    """The fine-tune is a trainer run in <out>/finetune/: stopped mid-way (the trainer's should_stop), the
    evaluation fails naming it, and a rerun resumes it from its checkpoint to the scores of an
    uninterrupted evaluation; the folder is deleted once summary.json is written."""
    import preschool.train.finetune as ft
    from preschool.errors import TrainingError
    from preschool.train.callbacks import Callback

    model, tok, cfg = _qa_setup(tmp_path)
    cfg = {**cfg, "epochs": 2, "schedule": "linear", "warmup_steps": 3, "batch_size": 7, "checkpoint_every": 4}
    ref = EVALUATORS.build("qa_f1", cfg).run(model, tok, out_dir=tmp_path / "ref")
    assert not (tmp_path / "ref" / "finetune").exists()

    class StopAt(Callback):
        def on_step_end(self, trainer):
            trainer.should_stop = trainer.step == 10

    real = ft.finetune
    monkeypatch.setattr(ft, "finetune", lambda *a, **kw: real(*a, **{**kw, "callbacks": [StopAt()]}))
    with pytest.raises(TrainingError, match="step 10 of 46"):
        EVALUATORS.build("qa_f1", cfg).run(model, tok, out_dir=tmp_path / "out")
    work = tmp_path / "out" / "finetune"
    assert sorted(p.name for p in (work / "checkpoints").iterdir()) == \
        ["step-00000004", "step-00000008", "step-00000010"]
    assert not (tmp_path / "out" / "summary.json").exists()
    monkeypatch.setattr(ft, "finetune", real)
    again = EVALUATORS.build("qa_f1", cfg).run(model, tok, out_dir=tmp_path / "out")
    assert again["metrics"] == ref["metrics"]
    assert again["extra"]["train_losses"] == ref["extra"]["train_losses"]
    read = lambda d: (d / "items.jsonl").read_text()  # noqa: E731
    assert read(tmp_path / "out") == read(tmp_path / "ref")
    assert not work.exists()
