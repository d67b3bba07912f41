from pathlib import Path
import json
import math

import pytest
import torch

from preschool.errors import ConfigError, DataError
from preschool.evals import EVALUATORS
from preschool.evals.verbatim import (
    VerbatimConfig,
    build_stimuli,
    builtin_lists,
    intervening_text,
    load_noun_lists,
    load_rnn_inputs,
    load_vignettes,
)


def word_tokenizer(texts):
    """A word-level HF tokenizer: one token per word or punctuation mark (hand-checkable)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0}
    pre = pre_tokenizers.Whitespace()
    for t in texts:
        for w, _ in pre.pre_tokenize_str(t):
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


class CopyModel(torch.nn.Module):
    """Known log-probs: the actual next token gets NLL 1 nat if it occurred earlier in the sequence, else 3 nats."""

    def __init__(self, vocab_size):
        super().__init__()
        self.V = vocab_size
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None):
        B, L = input_ids.shape
        logits = torch.zeros(B, L, self.V)
        for b in range(B):
            for i in range(L - 1):
                nxt = int(input_ids[b, i + 1])
                seen = bool((input_ids[b, : i + 1] == nxt).any())
                p = math.exp(-1.0 if seen else -3.0)
                # softmax with one logit L and V-1 zeros gives p = e^L / (e^L + V - 1)
                logits[b, i, nxt] = math.log((self.V - 1) * p / (1 - p))
        return type("Out", (), {"logits": logits})()


def test_metric_arithmetic_with_known_log_probs(tmp_path):
    cfg = {"list_lengths": [3], "intervening_words": [0], "n_lists": 2, "conditions": ["repeat", "control"],
           "bootstrap_resamples": 200, "batch_size": 3}
    ev = EVALUATORS.build("verbatim", cfg)
    stims = build_stimuli(ev.cfg)
    tok = word_tokenizer([s.text for s in stims])
    summary = ev.run(CopyModel(len(tok)), tok, out_dir=tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    rep = [r for r in rows if r["condition"] == "repeat"]
    # list-1 nouns are new (3 nats), list-2 nouns repeat them (1 nat): x_perc = 1/3 * 100
    for r in rep:
        assert r["n_tokens_list1"] == 3 and r["n_tokens_list2"] == 3  # commas and full stops are dropped
        assert r["nll_list1"] == pytest.approx(3.0, abs=1e-4)
        assert r["nll_list2"] == pytest.approx(1.0, abs=1e-4)
        assert r["x_perc"] == pytest.approx(100 / 3, abs=1e-3)
        assert r["x_del"] == pytest.approx(-0.5, abs=1e-4)
        assert r["retrieval_success"] == 1.0
        assert r["word_pos_list2"] == pytest.approx([1.0, 1.0, 1.0], abs=1e-4)
    # control lists are novel nouns: no retrieval
    for r in (r for r in rows if r["condition"] == "control"):
        assert r["x_perc"] == pytest.approx(100.0, abs=1e-3) and r["retrieval_success"] == 0.0
    m = summary["metrics"]
    assert m["x_perc"] == pytest.approx(100 / 3, abs=1e-3)
    assert m["x_perc/n3"] == pytest.approx(100 / 3, abs=1e-3)
    assert m["control/x_perc"] == pytest.approx(100.0, abs=1e-3)
    assert m["armeni/x_perc_median"] == pytest.approx(100 / 3, abs=1e-3)
    assert summary["extra"]["positions"]["repeat"]["n3"]["list1"] == pytest.approx([3.0] * 3, abs=1e-4)
    assert json.loads((tmp_path / "summary.json").read_text())["evaluator"] == "verbatim"


def test_stimulus_construction():
    cfg = VerbatimConfig(list_lengths=[3, 10], intervening_words=[0, 25], n_lists=20,
                         conditions=["repeat", "permute", "control"])
    stims = build_stimuli(cfg)
    assert len(stims) == 1 * 2 * 2 * 3 * 20
    s = stims[0]
    assert s.text.endswith(" .") and " : " in s.text  # NLTK-style spacing by default
    rep = [s for s in stims if s.condition == "repeat"]
    per = [s for s in stims if s.condition == "permute"]
    ctl = [s for s in stims if s.condition == "control"]
    assert all(s.list1 == s.list2 for s in rep)
    assert all(s.list1 != s.list2 and sorted(s.list1) == sorted(s.list2) for s in per)
    assert all(not set(s.list1) & set(s.list2) for s in ctl if s.list_len == 10)
    # list words carry their marker and position
    words = [(s.text[a:b], m, p) for a, b, m, p in stims[0].spans if m in (1, 3)]
    assert [w for w, m, _ in words if m == 1] == stims[0].list1
    assert [p for _, m, p in words if m == 3] == [0, 1, 2]
    # circular shifts put every noun in every position; shorter lists are prefixes
    lists = builtin_lists("categorized", 3, seed=7)
    assert len(lists) == 30 and lists[1] == lists[0][-1:] + lists[0][:-1]
    assert {lst[0] for lst in lists[:10]} == set(lists[0])
    assert builtin_lists("categorized", 3, seed=7) == lists and builtin_lists("categorized", 3, seed=8) != lists
    assert all(len(set(lst)) == 10 for lst in builtin_lists("random", 4, seed=0))
    # intervening texts grow with the word budget, in whole sentences
    sents = load_vignettes()["anna"]["intervening"]
    assert intervening_text(sents, 0) == []
    lens = [sum(len(x.split()) for x in intervening_text(sents, n)) for n in (25, 50, 100, 200)]
    assert lens == sorted(lens) and lens[0] >= 25 and lens[-1] >= 200
    nat = build_stimuli(VerbatimConfig(spacing="natural", list_lengths=[3], intervening_words=[0], n_lists=1))[0]
    assert ": " in nat.text and " ," not in nat.text
    with pytest.raises(ConfigError, match="vignettes"):
        build_stimuli(VerbatimConfig(vignettes=["nobody"]))
    with pytest.raises(ConfigError, match=r"conditions\[0\]"):
        VerbatimConfig(conditions=["shuffle"]).validate()


def test_published_lists_loader(shared_data, tmp_path):
    lists = load_noun_lists(shared_data / "verbatim" / "categorized_lists.json")
    assert sorted(lists) == [3, 5, 7, 10] and all(len(v) == 230 for v in lists.values())
    assert lists[10][1] == lists[10][0][-1:] + lists[10][0][:-1]
    assert lists[5][0] == lists[10][0][:5]
    rnd = load_noun_lists(shared_data / "verbatim", kind="random")
    assert len(rnd[7]) == 230
    cfg = VerbatimConfig(source="file", lists_path=str(shared_data / "verbatim"), n_lists=3,
                         list_lengths=[5], intervening_words=[25])
    stims = build_stimuli(cfg)
    assert [s.list1 for s in stims] == lists[5][:3]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"n3": [["a", "b"]]}))
    with pytest.raises(DataError, match=r"n3\[0\]"):
        load_noun_lists(bad)
    with pytest.raises(DataError, match="not found"):
        load_noun_lists(tmp_path / "missing.json")


@pytest.fixture(scope="module")
def micro():
    from transformers import GPT2Config, GPT2LMHeadModel

    from preschool.data.tokenizer import as_hf, train_bpe

    texts = [s.text for s in build_stimuli(VerbatimConfig(intervening_words=[0, 50], n_lists=10))]
    tok = as_hf(train_bpe(texts, vocab_size=400, min_frequency=1))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=32, n_layer=2, n_head=2,
                                      bos_token_id=0, eos_token_id=0))
    return model.eval(), tok


def test_micro_model_batch_size_independent_and_truncation(micro):
    model, tok = micro
    base = {"list_lengths": [3, 10], "intervening_words": [0, 50], "n_lists": 3, "bootstrap_resamples": 100}
    r1 = EVALUATORS.build("verbatim", {**base, "batch_size": 1}).evaluate(model, tok)
    r7 = EVALUATORS.build("verbatim", {**base, "batch_size": 7}).evaluate(model, tok)
    for a, b in zip(r1.items, r7.items):
        assert a["nll_list1"] == pytest.approx(b["nll_list1"], abs=1e-5)
        assert a["nll_list2"] == pytest.approx(b["nll_list2"], abs=1e-5)
    assert all(math.isfinite(v) for v in r1.metrics.values())
    assert r1.metrics["n_skipped"] == 0
    assert 0 <= r1.metrics["retrieval_success"] <= 1
    # a context too short for the longer stimuli truncates from the left or skips
    r = EVALUATORS.build("verbatim", {**base, "max_length": 40}).evaluate(model, tok)
    assert r.extra["n_truncated"] + r.metrics["n_skipped"] > 0
    assert r.extra["n_scored"] + r.metrics["n_skipped"] == r.extra["n_stimuli"]


def _write_rnn_inputs(folder, lines, markers, name="mylists_sce9_repeat"):
    (folder / f"{name}.txt").write_text("\n".join(lines) + "\n")
    rows = ["stimid\tmarkers\tlist_len\tprompt_len"]
    rows += [f"{i}\t{m}\t{n}\t{p}" for i, (m, n, p) in enumerate(markers)]
    (folder / f"{name}_markers.txt").write_text("\n".join(rows) + "\n")
    return folder / f"{name}.txt"


def test_rnn_input_files_are_read_verbatim(tmp_path):
    # Our own two stimuli in the Armeni input-file layout (text + per-word marker TSV).
    lines = ["Tom made a list : cup , pan . Later he read it : cup , pan .",
             "Tom made a list : owl , hawk . Later , at home , he read it : owl , hawk ."]
    m1 = [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3]
    m2 = [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3]
    path = _write_rnn_inputs(tmp_path, lines, [(m1, 2, 1), (m2, 2, 2)])
    cfg = VerbatimConfig(source="rnn_inputs", input_files=[str(path)], list_lengths=[2], n_lists=None)
    stims = build_stimuli(cfg)
    assert [s.text for s in stims] == lines  # exact text, NLTK spacing kept
    assert stims[0].list1 == ["cup", "pan"] and stims[1].list2 == ["owl", "hawk"]
    assert stims[1].intervening == 2 and stims[0].vignette == "mylists_sce9" and stims[0].condition == "repeat"
    tok = word_tokenizer(lines)
    res = EVALUATORS.build("verbatim", {"source": "rnn_inputs", "input_files": [str(path)], "list_lengths": [2],
                                        "bootstrap_resamples": 50}).evaluate(CopyModel(len(tok)), tok)
    assert res.metrics["x_perc"] == pytest.approx(100 / 3, abs=1e-3)
    assert res.metrics["n_stimuli"] == 2
    bad = _write_rnn_inputs(tmp_path, lines[:1], [(m1[:-1], 2, 1)], name="bad_repeat")
    with pytest.raises(DataError, match="17 markers for 18 words"):
        load_rnn_inputs(bad)
    with pytest.raises(ConfigError, match="input_files"):
        VerbatimConfig(source="rnn_inputs").validate()


def test_verify_ppt_preset_reads_the_published_inputs_and_reports_say_which(tmp_path):
    """preset verify_ppt: Armeni's categorized_lists_sce{1..5}_repeat files from a folder the user gives."""
    from preschool.evals.verbatim import VerbatimEvaluator

    line = "Tom made a list : cup , pan . Later he read it : cup , pan ."
    marks = [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3]
    for k in (1, 2, 3, 4, 5):
        _write_rnn_inputs(tmp_path, [line] * 45, [(marks, 2, 1)] * 45, name=f"categorized_lists_sce{k}_repeat")
    cfg = EVALUATORS.build_config("verbatim", {"preset": "verify_ppt", "inputs_dir": str(tmp_path),
                                               "list_lengths": [2], "bootstrap_resamples": 20})
    assert cfg.source == "rnn_inputs" and cfg.n_lists is None and cfg.conditions == ["repeat"] and not cfg.add_bos
    assert [Path(f).name for f in cfg.input_files] == [f"categorized_lists_sce{k}_repeat.txt" for k in range(1, 6)]
    stims = build_stimuli(cfg)
    assert len(stims) == 5 * 45  # every list (the default keeps 40 per group), every scenario
    ev = VerbatimEvaluator(cfg)
    assert ev.setup() == "preset verify_ppt: published input files (Armeni et al.)"
    ours = VerbatimEvaluator(EVALUATORS.build_config("verbatim", {}))
    assert ours.setup().startswith("preset ours: our own stimuli") and "not comparable" in ours.setup()
    with pytest.raises(ConfigError, match="inputs_dir"):
        EVALUATORS.build_config("verbatim", {"preset": "verify_ppt"})
    with pytest.raises(ConfigError, match="inputs_dir"):
        EVALUATORS.build_config("verbatim", {"preset": "verify_ppt", "inputs_dir": str(tmp_path / "missing")})


def test_report_headlines_the_list_surprisals_lower_is_better_beside_retrieval_success(micro, tmp_path):
    """Verbatim retrieval's continuous proxy is its loss (issue #30 item 3): the list-2 surprisal is headlined
    beside the 0/1 retrieval success, lower is better, as summary.json records it."""
    model, tok = micro
    s = EVALUATORS.build("verbatim", {"list_lengths": [3], "intervening_words": [0], "n_lists": 2,
                                      "bootstrap_resamples": 10}).run(model, tok, out_dir=tmp_path)
    for m in ("nll_list2", "nll_list1", "x_perc", "x_del"):
        assert m in s["reported"] and s["higher_is_better"][m] is False, m
    assert "retrieval_success" in s["reported"] and s["higher_is_better"]["retrieval_success"] is True
    assert "n_stimuli" not in s["reported"] and "repeat/nll_list2" not in s["reported"]
