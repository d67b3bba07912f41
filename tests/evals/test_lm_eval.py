import random

import numpy as np
import pytest
import torch

from preschool.errors import ConfigError
from preschool.evals import EVALUATORS
from preschool.evals.lm_eval import flatten_metrics, pair_scores, run_lm_eval, write_minimal_pair_task
from preschool.evals.minimal_pairs import load_pairs, score_pairs

pytest.importorskip("lm_eval")
pytest.importorskip("accelerate")  # lm-eval's HF backend imports it

PARADIGMS = ["adjunct_island", "determiner_noun_agreement_2"]


@pytest.fixture(scope="module")
def setup(shared_data, tmp_path_factory):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from preschool.data.tokenizer import as_hf, train_bpe

    pairs, _ = load_pairs(shared_data / "blimp", PARADIGMS, max_pairs_per_paradigm=15)
    texts = [s for p in pairs for s in (p.good, p.bad)]
    tok = as_hf(train_bpe(texts, vocab_size=400, min_frequency=1))
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(cfg).eval()
    tasks = tmp_path_factory.mktemp("lm_eval_tasks")  # the JSONL copy lives only here, never in the repo
    write_minimal_pair_task(shared_data / "blimp", tasks, task="mp_test", paradigms=PARADIGMS,
                            max_pairs_per_paradigm=15)
    return model, tok, pairs, tasks


def test_decisions_match_lm_eval(setup):
    model, tok, pairs, tasks = setup
    state = (random.getstate(), np.random.get_state()[1][:4].tolist(), torch.random.get_rng_state())
    res = run_lm_eval(model, tok, ["mp_test"], include_path=tasks, batch_size=16, log_samples=True,
                      include_defaults=False)
    # lm-eval reseeds the global RNGs; the bridge puts them back
    assert random.getstate() == state[0] and np.random.get_state()[1][:4].tolist() == state[1]
    assert torch.equal(torch.random.get_rng_state(), state[2])
    theirs = pair_scores(res, "mp_test")
    # lm-eval scores " " + sentence after the prefix (BOS) token: sentence_prefix=" " is the same request
    ours = score_pairs(model, tok, pairs, bos="prepend", batch_size=7, prefix=" ")
    assert len(theirs) == len(ours) == 30
    for a, b in zip(ours, theirs):
        assert (a["UID"], a["pairID"]) == (b["UID"], b["pairID"])
        assert a["logp_good"] == pytest.approx(b["logp_good"], abs=1e-4)
        assert a["logp_bad"] == pytest.approx(b["logp_bad"], abs=1e-4)
        if a["correct"] != 0.5:  # lm-eval scores a tie as correct (argmax picks index 0); ours gives 0.5
            assert a["correct"] == b["correct_lmeval"]
    acc = flatten_metrics(res)["mp_test/acc"]
    ties = sum(r["correct"] == 0.5 for r in ours)
    assert acc == pytest.approx((sum(r["correct"] for r in ours) + 0.5 * ties) / 30)
    # the lm_eval preset (the evaluator's default: " " prefix, tie = correct) is lm-eval's number
    same = score_pairs(model, tok, pairs, bos="prepend", batch_size=7, prefix=" ", ties="correct")
    assert [r["correct"] for r in same] == [b["correct_lmeval"] for b in theirs]
    assert sum(r["correct"] for r in same) / 30 == pytest.approx(acc)


def test_lm_eval_evaluator(setup):
    model, tok, _, tasks = setup
    ev = EVALUATORS.build("lm_eval", {"tasks": ["mp_test"], "include_path": str(tasks), "limit": 4,
                                    "include_defaults": False})
    res = ev.evaluate(model, tok)
    assert 0.0 <= res.metrics["mp_test/acc"] <= 1.0
    assert res.extra["n_samples"]["mp_test"]["effective"] == 4
    assert res.extra["prefix_token_id"] == 0  # our BPE: <|endoftext|>
    with pytest.raises(ConfigError, match="tasks"):
        EVALUATORS.build("lm_eval", {"tasks": []})


def test_the_correct_choices_log_likelihood_equals_a_hand_computation(setup):
    """The continuous proxy beside lm-eval's acc (issue #30 item 3): the gold choice's log-likelihood, summed
    (ll_correct) and per character of the choice as acc_norm normalises (ll_correct_norm), mean over docs."""
    from preschool.evals.lm_eval import LmEval
    from preschool.evals.minimal_pairs import encode_for_scoring

    model, tok, pairs, tasks = setup
    ev = EVALUATORS.build("lm_eval", {"tasks": ["mp_test"], "include_path": str(tasks), "limit": 5,
                                    "include_defaults": False})
    res = ev.evaluate(model, tok)
    lls, norm = [], []
    for p in pairs[:5]:  # lm-eval's docs are the pairs in order; the gold choice is the good sentence
        (ids,) = encode_for_scoring(tok, [" " + p.good], "prepend")  # BOS, then " " + sentence (its delimiter)
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1].double(), -1)
        lls.append(float(logp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].sum()))
        norm.append(lls[-1] / len(p.good))
    assert res.metrics["mp_test/ll_correct"] == pytest.approx(np.mean(lls), abs=1e-4)
    assert res.metrics["mp_test/ll_correct_norm"] == pytest.approx(np.mean(norm), abs=1e-5)
    for m in ("mp_test/ll_correct", "mp_test/ll_correct_norm"):
        assert LmEval.reported(m) and res.higher_is_better.get(m, LmEval.direction(m)) is True


def test_correct_choice_proxy_reads_the_gold_choice_and_skips_what_it_cannot_tell():
    from preschool.evals.lm_eval import correct_choice_likelihoods

    def smp(target, conts, lls, ctxs=None, filt="none"):
        ctxs = ctxs or ["Q:"] * len(conts)
        return {"target": target, "arguments": list(zip(ctxs, conts)), "filtered_resps": [(v, False) for v in lls],
                "filter": filt}

    mc = {"output_type": "multiple_choice", "target_delimiter": " "}
    res = {"configs": {"t": mc, "mi": {**mc, "metric_list": [{"metric": "acc_mutual_info"}]}, "gen": {},
                       "wino": mc},
           "samples": {
               "t": [smp(1, [" no", " yes"], [-3.0, -6.0]),  # an index: the 2nd choice, "yes" (3 characters)
                     smp("no", [" no", " yes"], [-2.0, -1.0]),  # a string: the choice it names
                     smp([0, 1], [" no", " yes"], [-1.0, -1.0]),  # several golds: left out
                     smp(1, [" no", " yes"], [0.0, 0.0], filt="other")],  # a second filter: left out
               # mutual information: the unconditional requests (the second half) are not the answer's
               "mi": [smp(0, [" ab", " c", " ab", " c"], [-4.0, -5.0, -1.0, -1.0], ["Q:", "Q:", "", ""])],
               "gen": [smp(0, [" x"], [-1.0])],
               # winogrande-style partial scoring: one continuation after each of two contexts
               "wino": [smp("x", [" x", " x"], [-1.0, -2.0], ["A", "B"])]}}
    got = correct_choice_likelihoods(res)
    assert got == {"t/ll_correct": pytest.approx(-4.0), "t/ll_correct_norm": pytest.approx((-6 / 3 - 2 / 2) / 2),
                   "mi/ll_correct": -4.0, "mi/ll_correct_norm": -2.0}


def test_per_task_num_fewshot_runs_each_task_with_its_shots(setup, shared_data, tmp_path):
    """verify-ppt / L2T run some tasks 5-shot and the rest 0-shot in one evaluator: num_fewshot per task."""
    model, tok, _, _ = setup
    for task in ("mp_a", "mp_b"):
        y = write_minimal_pair_task(shared_data / "blimp", tmp_path, task=task, paradigms=PARADIGMS[:1],
                                    max_pairs_per_paradigm=6)
        # lm-eval never overrides a task that pins 0 shots (as BLiMP's does): leave the count to the evaluator
        y.write_text(y.read_text().replace("num_fewshot: 0\n", ""))
    ev = EVALUATORS.build("lm_eval", {"tasks": ["mp_a", "mp_b"], "include_path": str(tmp_path), "limit": 2,
                                    "include_defaults": False, "num_fewshot": {"mp_a": 2}})
    res = ev.evaluate(model, tok)
    assert res.extra["n_shot"] == {"mp_a": 2, "mp_b": 0}
    assert {"mp_a/acc", "mp_b/acc"} <= set(res.metrics)
    with pytest.raises(ConfigError, match=r"num_fewshot\.mp_c"):
        EVALUATORS.build("lm_eval", {"tasks": ["mp_a"], "num_fewshot": {"mp_c": 5}})
    with pytest.raises(ConfigError, match=r"num_fewshot\.mp_a"):
        EVALUATORS.build("lm_eval", {"tasks": ["mp_a"], "num_fewshot": {"mp_a": -1}})


def test_minimal_pairs_match_lm_eval_with_an_hf_tokenizers_bos(shared_data, hf_tokenizer, tmp_path):
    """A Mistral-style tokenizer (BOS <s> = 1, EOS </s> = 2, a post-processor that prepends BOS): lm-eval
    conditions each sentence on BOS, and so does minimal_pairs (bos=prepend), with equal log-probs."""
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from preschool.evals.minimal_pairs import prefix_token_id

    tok = PreTrainedTokenizerFast.from_pretrained(str(hf_tokenizer("mistral")))
    assert prefix_token_id(tok) == 1
    pairs, _ = load_pairs(shared_data / "blimp", PARADIGMS, max_pairs_per_paradigm=5)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(cfg).eval()
    write_minimal_pair_task(shared_data / "blimp", tmp_path, task="mp_bos", paradigms=PARADIGMS,
                            max_pairs_per_paradigm=5)
    res = run_lm_eval(model, tok, ["mp_bos"], include_path=tmp_path, batch_size=8, log_samples=True,
                      include_defaults=False)
    theirs = pair_scores(res, "mp_bos")
    ours = score_pairs(model, tok, pairs, bos="prepend", batch_size=4, prefix=" ")
    assert len(theirs) == len(ours) == 10
    for a, b in zip(ours, theirs):
        assert a["logp_good"] == pytest.approx(b["logp_good"], abs=1e-4)
        assert a["logp_bad"] == pytest.approx(b["logp_bad"], abs=1e-4)


def test_every_metric_lm_eval_returns_for_a_task_is_reported_with_its_direction():
    """ReCoRD's f1/em, LAMBADA's perplexity and filtered scores reach the report (table, gain and efficiency
    rows) in lm-eval's own direction; standard errors stay out (issue #31 item 1)."""
    from preschool.evals.lm_eval import LmEval, lm_eval_directions

    res = {"results": {"record": {"alias": "record", "f1,none": 0.71, "f1_stderr,none": 0.01, "em,none": 0.70,
                                  "em_stderr,none": 0.01},
                       "lambada_openai": {"perplexity,none": 30.2, "perplexity_stderr,none": 1.1, "acc,none": 0.4},
                       "gsm8k": {"exact_match,strict-match": 0.1, "exact_match_stderr,strict-match": 0.01}},
           "higher_is_better": {"record": {"f1": True, "em": True}, "lambada_openai": {"perplexity": False, "acc": True},
                                "gsm8k": {"exact_match": True}}}
    metrics = flatten_metrics(res)
    reported = sorted(m for m in metrics if LmEval.reported(m))
    assert reported == ["gsm8k/exact_match@strict-match", "lambada_openai/acc", "lambada_openai/perplexity",
                        "record/em", "record/f1"]
    directions = lm_eval_directions(res, metrics)
    assert directions["record/f1"] and directions["record/em"] and not directions["lambada_openai/perplexity"]
