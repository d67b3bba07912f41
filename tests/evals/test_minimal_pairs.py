import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from preschool.errors import ConfigError, DataError
from preschool.evals import EVALUATORS
from preschool.evals.minimal_pairs import (
    MinimalPairs,
    encode_for_scoring,
    load_pairs,
    score_pairs,
    score_sentences,
)

WORDS = ["<|endoftext|>", "the", "cat", "cats", "sleeps", "sleep", "dog", "dogs", "barks", "bark", "."]


def word_tokenizer(with_bos=True):
    """Whitespace word-level tokenizer: ids are known, so log-probs can be computed by hand."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    kw = {"bos_token": WORDS[0]} if with_bos else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=WORDS[0], pad_token=WORDS[0], **kw)


class BigramLM(torch.nn.Module):
    """logits at position t = W[input_ids[t]]: the HF causal-LM call signature with a hand-checkable answer."""

    def __init__(self, W):
        super().__init__()
        self.W = torch.nn.Parameter(torch.as_tensor(W, dtype=torch.float32))

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=self.W[input_ids])


def hand_logp(W, ids):
    W = np.asarray(W, dtype=np.float64)
    lsm = W - np.log(np.exp(W).sum(-1, keepdims=True))
    return sum(lsm[ids[t - 1], ids[t]] for t in range(1, len(ids))), len(ids) - 1


def micro_model(vocab_size, seed=0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256)
    with torch.random.fork_rng():  # HF init draws from the global RNG; keep the caller's state untouched
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(cfg).eval()


SENTENCES = [
    "The cat sleeps on the mat.", "The cats sleep on the mats.", "Who did the dog see before barking?",
    "A child has eaten the apples.", "These books were read by every teacher.", "No student ever left early.",
]


@pytest.fixture(scope="module")
def bpe():
    from preschool.data.tokenizer import as_hf, train_bpe

    return as_hf(train_bpe(SENTENCES * 5, vocab_size=300, min_frequency=1))


def write_pairs(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def pair(uid, pid, good, bad, field="morphology", term="agreement"):
    return {"sentence_good": good, "sentence_bad": bad, "UID": uid, "pairID": str(pid),
            "field": field, "linguistics_term": term}


@pytest.mark.parametrize("bos", ["prepend", "none"])
def test_hand_computed_logprobs(bos):
    rng = np.random.default_rng([7, 0])
    W = rng.normal(size=(len(WORDS), len(WORDS))) * 2
    tok = word_tokenizer()
    sents = ["the cat sleeps .", "the cats sleeps .", "dogs bark", "cat"]
    lp, nt = score_sentences(BigramLM(W), tok, sents, bos=bos, batch_size=3)
    for s, got, n in zip(sents, lp, nt):
        ids = [WORDS.index(w) for w in s.split()]
        if bos == "prepend":
            ids = [0, *ids]  # BOS (= <|endoftext|>, id 0) then every word scored
        want, want_n = hand_logp(W, ids)
        assert n == want_n
        assert got == pytest.approx(want, abs=1e-5)
    # 'none' leaves the first word unscored: a one-word sentence scores 0 over 0 tokens
    if bos == "none":
        assert nt[3] == 0 and lp[3] == 0.0


def test_prepend_uses_eos_without_bos_and_never_doubles():
    tok = word_tokenizer(with_bos=False)
    assert encode_for_scoring(tok, ["the cat"], "prepend") == [[0, 1, 2]]
    # a sentence already starting with the prefix token gets no second one (lm-eval's rule)
    assert encode_for_scoring(tok, ["<|endoftext|> the"], "prepend") == [[0, 1]]


def test_batch_size_independent(bpe):
    model = micro_model(len(bpe))
    sents = SENTENCES + [s.lower() for s in SENTENCES] + ["Cats.", "A dog barks loudly at night."]
    lp1, n1 = score_sentences(model, bpe, sents, batch_size=1)
    lp8, n8 = score_sentences(model, bpe, sents, batch_size=8)
    assert (n1 == n8).all()
    np.testing.assert_allclose(lp1, lp8, atol=1e-4, rtol=0)
    # and of the order the sentences come in
    lpr, _ = score_sentences(model, bpe, sents[::-1], batch_size=5)
    np.testing.assert_allclose(lp1, lpr[::-1], atol=1e-4, rtol=0)


def test_swapping_good_and_bad_flips_accuracy(bpe, tmp_path):
    model = micro_model(len(bpe), seed=3)
    rows = [pair("p1", i, SENTENCES[i], SENTENCES[(i + 1) % 6]) for i in range(6)]
    rows += [pair("p2", i, SENTENCES[i].lower(), SENTENCES[i]) for i in range(6)]
    fwd = write_pairs(tmp_path / "fwd.jsonl", rows)
    rev = write_pairs(tmp_path / "rev.jsonl", [{**r, "sentence_good": r["sentence_bad"], "sentence_bad": r["sentence_good"]}
                                               for r in rows])
    a = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(fwd)})).evaluate(model, bpe)
    b = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(rev)})).evaluate(model, bpe)
    # position carries no information: the swapped file scores exactly the complement
    assert a.metrics["acc_micro"] == pytest.approx(1 - b.metrics["acc_micro"])
    assert a.metrics["acc_tokmean_micro"] == pytest.approx(1 - b.metrics["acc_tokmean_micro"])
    assert a.metrics["ties"] == b.metrics["ties"]
    for ra, rb in zip(a.items, b.items):
        assert ra["logp_good"] == pytest.approx(rb["logp_bad"], abs=1e-4)
        assert ra["correct"] + rb["correct"] == 1.0


def _tied_pairs(tmp_path):
    """A zero-logit bigram LM (every token has log-prob -log V, so equal-length sentences tie exactly), its
    tokenizer, and three pairs: two ties and one (shorter bad sentence) that is not."""
    rows = [pair("agr", 0, "the cat sleeps .", "the cats sleeps ."), pair("agr", 1, "the dog barks", "the dogs barks"),
            pair("agr", 2, "the cat sleeps .", "the cat sleeps")]
    return np.zeros((len(WORDS), len(WORDS))), word_tokenizer(), write_pairs(tmp_path / "ties.jsonl", rows)


def test_ties_count_half(tmp_path):
    W, tok, path = _tied_pairs(tmp_path)
    res = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(path), "preset": "preschool"})
                       ).evaluate(BigramLM(W), tok)
    assert [r["correct"] for r in res.items] == [0.5, 0.5, 0.0]  # the longer good sentence loses by summed logp
    assert [r["correct_tokmean"] for r in res.items] == [0.5, 0.5, 0.5]  # but ties by token-mean
    assert res.metrics["ties"] == 2 and res.metrics["ties_tokmean"] == 3
    assert res.metrics["acc"] == pytest.approx(1 / 3)
    assert res.items[0]["logp_good"] == pytest.approx(-4 * np.log(len(WORDS)), abs=1e-5)  # 4 words, all scored after BOS


def test_subset_is_first_n_by_pair_id(tmp_path):
    rows = [pair("u", pid, f"the cat {pid}", f"cat the {pid}") for pid in (10, 2, 0, 1)]
    path = write_pairs(tmp_path / "u.jsonl", rows)
    pairs, sources = load_pairs(path, max_pairs_per_paradigm=3)
    assert [p.pair_id for p in pairs] == ["0", "1", "2"]  # numeric order, not file or string order
    assert sources[0]["sha256"] and sources[0]["file"] == str(path)


def test_bad_input_names_file_and_line(tmp_path):
    good = pair("u", 0, "a b", "b a")
    path = write_pairs(tmp_path / "bad.jsonl", [good, {"sentence_good": "x", "UID": "u", "pairID": "1"}])
    with pytest.raises(DataError, match=r"bad\.jsonl:2: missing field 'sentence_bad'"):
        load_pairs(path)
    path.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(DataError, match=r"bad\.jsonl:2: not valid JSON"):
        load_pairs(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl:2: duplicate pair"):
        load_pairs(path)
    path.write_text(json.dumps(good) + "\n")
    with pytest.raises(ConfigError, match="paradigms"):
        load_pairs(path, paradigms=["nope"])
    with pytest.raises(ConfigError, match="bos"):
        EVALUATORS.build_config("minimal_pairs", {"path": str(path), "bos": "append"})
    with pytest.raises(ConfigError, match="path"):
        EVALUATORS.build_config("minimal_pairs", {"path": str(tmp_path / "missing")})


def test_real_blimp_subset(shared_data, bpe, tmp_path):
    model = micro_model(len(bpe), seed=1)
    ev = EVALUATORS.build("blimp", {"path": str(shared_data / "blimp"), "max_pairs_per_paradigm": 2})
    summary = ev.run(model, bpe, out_dir=tmp_path / "out", checkpoint="micro")
    m = summary["metrics"]
    assert summary["evaluator"] == "blimp" and m["n_paradigms"] == 67 and m["n_pairs"] == 134
    terms = [k for k in m if k.startswith("acc/term/")]
    fields = sorted(k.split("/")[-1] for k in m if k.startswith("acc/field/"))
    assert len(terms) == 12
    assert fields == ["morphology", "semantics", "syntax", "syntax_semantics"]  # after LABEL_FIXES
    assert all(0.0 <= v <= 1.0 for k, v in m.items() if k.startswith("acc"))
    items = [json.loads(x) for x in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    assert len(items) == 134 and {"UID", "pairID", "logp_good", "logp_bad", "n_tokens_good", "correct"} <= set(items[0])
    assert m["acc_micro"] == pytest.approx(np.mean([r["correct"] for r in items]))
    assert summary["extra"]["paradigms"]["adjunct_island"]["linguistics_term"] == "island_effects"
    # BLiMP's stray labels are folded into the paper's phenomena
    assert summary["extra"]["paradigms"]["animate_subject_passive"]["linguistics_term"] == "argument_structure"
    assert summary["extra"]["paradigms"]["principle_A_case_2"]["field"] == "syntax_semantics"


class Bf16BigramLM(BigramLM):
    """Emits bf16 logits, as a bf16 model would."""

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=self.W[input_ids].to(torch.bfloat16))


def test_bf16_logits_normalised_in_fp32():
    rng = np.random.default_rng([7, 1])
    W = rng.normal(size=(len(WORDS), len(WORDS))) * 8
    Wb = torch.as_tensor(W, dtype=torch.float32).to(torch.bfloat16).double().numpy()  # what the model emits
    sents = ["the cat sleeps .", "dogs bark .", "the dogs bark"]
    lp, _ = score_sentences(Bf16BigramLM(W), word_tokenizer(), sents)
    for s, got in zip(sents, lp):
        want, _ = hand_logp(Wb, [0, *[WORDS.index(w) for w in s.split()]])
        assert got == pytest.approx(want, abs=1e-4)  # a bf16 log-softmax misses by > 1e-3 (checked below)
    # and that tolerance would catch it: normalising in bf16 gives a visibly different number
    logits = torch.as_tensor(Wb, dtype=torch.bfloat16)
    ids = [0, *[WORDS.index(w) for w in sents[0].split()]]
    bf16_sum = float(sum(torch.log_softmax(logits[ids[t - 1]], -1)[ids[t]] for t in range(1, len(ids))))
    assert abs(bf16_sum - lp[0]) > 1e-3


def test_full_blimp_loads_and_validates(shared_data):
    pairs, sources = load_pairs(shared_data / "blimp")
    assert len(pairs) == 67000 and len(sources) == 67
    per_uid = {}
    for p in pairs:
        per_uid[p.uid] = per_uid.get(p.uid, 0) + 1
    assert len(per_uid) == 67 and set(per_uid.values()) == {1000}
    assert len({p.term for p in pairs}) == 12 and len({p.field for p in pairs}) == 4


def test_lm_eval_preset_is_the_default_and_counts_a_tie_as_correct(tmp_path):
    """lm-eval's blimp (both papers): " " + sentence, and argmax picks the good sentence on a tie."""
    W, tok, path = _tied_pairs(tmp_path)
    cfg = EVALUATORS.build_config("minimal_pairs", {"path": str(path)})
    assert (cfg.preset, cfg.sentence_prefix, cfg.ties) == ("lm_eval", " ", "correct")
    ev = MinimalPairs(cfg)
    res = ev.evaluate(BigramLM(W), tok)
    assert [r["correct"] for r in res.items] == [1.0, 1.0, 0.0]
    assert res.metrics["ties"] == 2 and res.metrics["acc"] == pytest.approx(2 / 3)
    assert ev.setup() == "preset lm_eval" and res.extra["preset"] == "lm_eval"
    own = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(path), "preset": "preschool"}))
    assert (own.cfg.sentence_prefix, own.cfg.ties) == ("", "half") and own.setup() == "preset preschool"
    # a field set against the preset is named beside it
    mixed = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(path), "ties": "half"}))
    assert mixed.setup() == "preset lm_eval (ties='half')"
    with pytest.raises(ConfigError, match="preset"):
        EVALUATORS.build_config("minimal_pairs", {"path": str(path), "preset": "babylm"})


def test_l2t_three_field_grouping_puts_binding_and_control_raising_under_syntax(tmp_path):
    from preschool.evals.minimal_pairs import FIELDS3, summarize

    rows = []
    for uid, field, term, c in (("p_bind", "syntax_semantics", "binding", 1.0),
                                ("p_ctrl", "syntax_semantics", "control_raising", 0.0),
                                ("p_isl", "syntax", "island_effects", 1.0),
                                ("p_npi", "syntax_semantics", "npi_licensing", 1.0),
                                ("p_dn", "morphology", "determiner_noun_agreement", 0.0)):
        rows.append({"UID": uid, "pairID": "0", "field": field, "linguistics_term": term, "correct": c,
                     "correct_tokmean": c, "tie": False, "tie_tokmean": False})
    m, _ = summarize(rows)
    assert m["acc/field/syntax_semantics"] == pytest.approx(2 / 3)  # BLiMP's own 4 fields stay
    assert m["acc/field3/syntax"] == pytest.approx(2 / 3)  # binding, control/raising, island
    assert m["acc/field3/semantics"] == 1.0 and m["acc/field3/morphology"] == 0.0
    assert set(FIELDS3.values()) == {"morphology", "syntax", "semantics"} and len(FIELDS3) == 13


def test_lm_eval_preset_counts_only_an_exact_tie_as_correct(tmp_path):
    """lm-eval's argmax has no tolerance: a bad sentence ahead by 4e-6 nats wins the pair (the preschool
    preset still calls that a tie, within its 1e-5)."""
    W = np.zeros((len(WORDS), len(WORDS)))
    W[WORDS.index("the"), WORDS.index("cats")] = 4e-6  # "the cats" is 4e-6 nats likelier than "the cat"
    path = write_pairs(tmp_path / "near.jsonl", [pair("agr", 0, "the cat sleeps .", "the cats sleeps ."),
                                                 pair("agr", 1, "the dog barks", "the dogs barks")])
    cfg = EVALUATORS.build_config("minimal_pairs", {"path": str(path)})
    assert cfg.tie_tolerance == 0.0
    res = MinimalPairs(cfg).evaluate(BigramLM(W), word_tokenizer())
    assert res.items[0]["logp_bad"] - res.items[0]["logp_good"] == pytest.approx(4e-6, abs=1e-6)
    assert [r["correct"] for r in res.items] == [0.0, 1.0]  # the near-tie is lost; the exact tie is won
    assert res.metrics["ties"] == 1
    own = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(path), "preset": "preschool"}))
    assert own.cfg.tie_tolerance == 1e-5
    assert [r["correct"] for r in own.evaluate(BigramLM(W), word_tokenizer()).items] == [0.5, 0.5]


def _logp_by_hand(model, ids):
    """Summed log-prob of ids[1:] given the prefix: one unpadded forward, log-softmax in float64."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].double()
    return float(torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].sum())


def test_log_prob_margins_equal_a_hand_computation(bpe, tmp_path):
    """The continuous proxies beside accuracy (issue #30 item 3): per pair logp(good) - logp(bad), summed and per
    token, averaged as accuracy is (macro over paradigms, then per phenomenon / field), higher is better."""
    model = micro_model(len(bpe), seed=5)
    rows = [pair("agr", i, SENTENCES[i], SENTENCES[i].lower(), "morphology", "agreement") for i in range(3)]
    rows += [pair("isl", i, SENTENCES[i + 3], SENTENCES[i], "syntax", "island_effects") for i in range(2)]
    path = write_pairs(tmp_path / "mp.jsonl", rows)
    ev = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(path), "preset": "preschool"}))
    res = ev.evaluate(model, bpe)
    margin, per_token = {"agr": [], "isl": []}, {"agr": [], "isl": []}
    for r in rows:
        (g, b) = encode_for_scoring(bpe, [r["sentence_good"], r["sentence_bad"]], "prepend")
        lg, lb = _logp_by_hand(model, g), _logp_by_hand(model, b)
        margin[r["UID"]].append(lg - lb)
        per_token[r["UID"]].append(lg / (len(g) - 1) - lb / (len(b) - 1))
    for key, hand in (("margin", margin), ("margin_tokmean", per_token)):
        per_uid = {u: np.mean(v) for u, v in hand.items()}
        assert res.metrics[key] == pytest.approx(np.mean(list(per_uid.values())), abs=1e-4)
        assert res.metrics[f"{key}_micro"] == pytest.approx(np.mean(hand["agr"] + hand["isl"]), abs=1e-4)
        assert res.metrics[f"{key}/term/agreement"] == pytest.approx(per_uid["agr"], abs=1e-4)
        assert res.metrics[f"{key}/term/island_effects"] == pytest.approx(per_uid["isl"], abs=1e-4)
        assert res.metrics[f"{key}/field/syntax"] == pytest.approx(per_uid["isl"], abs=1e-4)
        assert res.metrics[f"{key}/field3/syntax"] == pytest.approx(per_uid["isl"], abs=1e-4)
        assert res.metrics[f"{key}/uid/agr"] == pytest.approx(per_uid["agr"], abs=1e-4)
        # a report headlines the overall proxy beside acc, higher is better; breakdowns and micro means stay out
        assert MinimalPairs.reported(key) and MinimalPairs.direction(key)
        assert not MinimalPairs.reported(f"{key}_micro") and not MinimalPairs.reported(f"{key}/term/agreement")
    assert [r["margin"] for r in res.items] == pytest.approx(margin["agr"] + margin["isl"], abs=1e-4)
    assert res.extra["paradigms"]["isl"]["margin"] == pytest.approx(np.mean(margin["isl"]), abs=1e-4)


def test_identical_sentence_pairs_are_structural_ties_counted_apart(tmp_path):
    """Issue #45 item 7: BLiMP has seven pairs whose good and bad sentences are the same string (passive_1 324 and
    810; principle_A_case_2 105, 287, 372, 816, 967); under lm_eval they always count as correct. They are counted
    apart (ties_structural, each item flagged identical) and not as the model's ties."""
    rows = [pair("agr", 0, "the cat sleeps .", "the cat sleeps ."),  # identical: a tie for any model
            pair("agr", 1, "the dog barks", "the dogs barks"),       # an exact tie of this model only
            pair("agr", 2, "the cat sleeps .", "the cat sleeps")]
    path = write_pairs(tmp_path / "same.jsonl", rows)
    W, tok = np.zeros((len(WORDS), len(WORDS))), word_tokenizer()
    res = MinimalPairs(EVALUATORS.build_config("minimal_pairs", {"path": str(path)})).evaluate(BigramLM(W), tok)
    assert [r["identical"] for r in res.items] == [True, False, False]
    assert res.metrics["ties_structural"] == 1 and res.metrics["ties"] == 1  # the model's own tie only
    assert res.items[0]["correct"] == 1.0  # decided as lm-eval's argmax decides it
    assert res.extra["paradigms"]["agr"]["ties_structural"] == 1 and res.extra["paradigms"]["agr"]["ties"] == 1
    assert not MinimalPairs.reported("ties_structural")  # bookkeeping: recorded, never headlined


def test_the_blimp_files_have_the_seven_identical_pairs(shared_data):
    """The count the docs give (docs/evaluation.md), read from the shared BLiMP copy."""
    pairs, _ = load_pairs(shared_data / "blimp")
    same = sorted((p.uid, int(p.pair_id)) for p in pairs if p.good == p.bad)
    assert same == [("passive_1", 324), ("passive_1", 810), ("principle_A_case_2", 105), ("principle_A_case_2", 287),
                    ("principle_A_case_2", 372), ("principle_A_case_2", 816), ("principle_A_case_2", 967)]


def test_a_subset_builds_and_checks_only_the_pairs_it_keeps(tmp_path, monkeypatch, shared_data):
    """max_pairs_per_paradigm: the first N by pairID of each paradigm, the same pairs as a full load's first N;
    only those N are built and checked field by field (calls counted: 20 of BLiMP's 1,000 per file), every line
    is still parsed (a line that is not JSON is refused wherever it is), and a pairID that repeats at the cut
    is still a duplicate."""
    import preschool.evals.minimal_pairs as mp

    uids = ["adjunct_island", "anaphor_gender_agreement"]
    full, _ = load_pairs(shared_data / "blimp", uids)
    built = []
    real = mp._pair_from_obj
    monkeypatch.setattr(mp, "_pair_from_obj", lambda *a, **k: built.append(a[1]) or real(*a, **k))
    sub, _ = load_pairs(shared_data / "blimp", uids, max_pairs_per_paradigm=20)
    assert sub == [p for u in uids for p in [q for q in full if q.uid == u][:20]]
    assert len(built) == 40
    rows = [pair("u", pid, f"the cat {pid}", f"cat the {pid}") for pid in (3, 0, 2, 1)]
    path = write_pairs(tmp_path / "u.jsonl", rows + [{"sentence_good": "x", "UID": "u", "pairID": "9"}])
    assert [p.pair_id for p in load_pairs(path, max_pairs_per_paradigm=4)[0]] == ["0", "1", "2", "3"]
    with pytest.raises(DataError, match=r"u\.jsonl:5: missing field 'sentence_bad'"):
        load_pairs(path, max_pairs_per_paradigm=5)  # kept: checked
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(DataError, match=r"u\.jsonl:6: not valid JSON"):
        load_pairs(path, max_pairs_per_paradigm=1)
    write_pairs(path, rows + [pair("u", 1, "a b", "b a")])
    with pytest.raises(DataError, match=r"u\.jsonl:5: duplicate pair UID='u' pairID='1'"):
        load_pairs(path, max_pairs_per_paradigm=2)
