import numpy as np
import pytest
import torch

from preschool.data.tokenizer import as_hf, train_bpe
from preschool.errors import ConfigError
from preschool.evals import EVALUATORS

TASK = {"n_nodes": 6, "max_hops": 3, "n_queries": 3, "alphabet": 6, "length": 96}


@pytest.fixture(scope="module")
def hf_tok():
    tok = train_bpe([" ".join(str(i) for i in range(100)) + " "] * 6, vocab_size=400, split_digits=True)
    return as_hf(tok)


class Oracle(torch.nn.Module):
    """Predicts the next input token (it sees the future): every answer is right. ``lag=0`` repeats the
    current token instead, which is never the next answer token here."""

    def __init__(self, vocab, lag=1):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.config = type("C", (), {"vocab_size": vocab})()
        self.vocab, self.lag = vocab, lag

    def forward(self, input_ids, attention_mask=None):
        nxt = torch.roll(input_ids, -self.lag, dims=1)
        logits = torch.nn.functional.one_hot(nxt, self.vocab).float() * 20 + self.w
        return type("O", (), {"logits": logits})()


def micro_model(vocab):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Qwen2ForCausalLM(cfg).eval()


@pytest.mark.parametrize("render", ["text", "reserved"])
def test_oracle_scores_one_and_a_wrong_model_zero(render, hf_tok):
    ev = EVALUATORS.build("depo", {"task": TASK, "instances": 5, "render": render, "batch_size": 4, "hops": [1, 2, 3]})
    vocab = len(hf_tok) + 40
    res = ev.evaluate(Oracle(vocab), hf_tok)
    assert res.metrics["acc"] == 1.0 and {"acc/k1", "acc/k2", "acc/k3"} <= set(res.metrics)
    assert res.metrics["n/k2"] == 15  # 5 instances x 3 queries
    assert all(r["answer_tokens"] >= (2 if render == "reserved" else 4) for r in res.items)
    assert EVALUATORS.build("depo", {"task": TASK, "instances": 5, "render": render}).evaluate(
        Oracle(vocab, lag=0), hf_tok).metrics["acc"] == 0.0


def test_items_are_held_out_and_fixed_per_hop(hf_tok):
    ev = EVALUATORS.build("depo", {"task": {**TASK, "seed": 7}, "instances": 3, "hops": [2, 3]})
    docs = ev.documents(hf_tok)
    assert [d["k"] for d in docs] == [2, 2, 2, 3, 3, 3]
    from preschool.synthetic import GENERATORS

    train = GENERATORS.build("depo", {**TASK, "seed": 7}).item(0).symbols
    held = ev.generator(2).item(0).symbols
    assert not np.array_equal(train, held)
    for k in (2, 3):
        assert {q["k"] for q in ev.generator(k).item(0).meta["queries"]} == {k}


def test_held_out_graphs_have_the_full_node_count_as_the_reference_eval(hf_tok):
    ev = EVALUATORS.build("depo", {"task": TASK, "instances": 20, "hops": [1]})
    assert {it.meta["n_nodes"] for it in ev.generator(1).items(0, 20)} == {TASK["n_nodes"]}
    trained = EVALUATORS.build("depo", {"task": TASK, "instances": 20, "hops": [1], "nodes": "train"})
    assert len({it.meta["n_nodes"] for it in trained.generator(1).items(0, 40)}) > 1


def test_real_micro_model_is_batch_size_independent(hf_tok):
    model = micro_model(len(hf_tok) + 40)
    kw = {"task": TASK, "instances": 4, "render": "reserved", "hops": [1, 2, 3]}
    a = EVALUATORS.build("depo", {**kw, "batch_size": 1}).evaluate(model, hf_tok).metrics
    b = EVALUATORS.build("depo", {**kw, "batch_size": 7}).evaluate(model, hf_tok).metrics
    assert 0.0 <= a["acc"] <= 1.0
    for k in (1, 2, 3):
        assert a[f"nll/k{k}"] == pytest.approx(b[f"nll/k{k}"], abs=1e-4)
        assert a[f"acc/k{k}"] == b[f"acc/k{k}"]


def test_summary_written(tmp_path, hf_tok):
    ev = EVALUATORS.build("depo", {"task": TASK, "instances": 2})  # default hops: 1, 2 and max_hops 3
    s = ev.run(Oracle(len(hf_tok)), hf_tok, out_dir=tmp_path)
    assert s["metrics"]["acc"] == 1.0 and (tmp_path / "items.jsonl").read_text().count("\n") == 18


@pytest.mark.parametrize("cfg, field", [
    ({"task": TASK, "hops": [4]}, "hops[0]"),
    ({"task": {**TASK, "seed": 5}, "seed": 5}, "seed"),
    ({"task": {**TASK, "length": 10}}, "task.length"),
    ({"task": {**TASK, "hops": [1]}}, "task.hops"),
])
def test_bad_config_names_the_field(cfg, field):
    with pytest.raises(ConfigError) as e:
        EVALUATORS.build("depo", cfg)
    assert e.value.field == field


def test_vocab_too_small_for_reserved_ids(hf_tok):
    from preschool.errors import DataError

    ev = EVALUATORS.build("depo", {"task": TASK, "instances": 1, "render": "reserved"})
    with pytest.raises(DataError, match="vocab_size"):
        ev.evaluate(Oracle(len(hf_tok)), hf_tok)


def test_default_hops_are_the_reference_powers_of_two_up_to_max_hops(hf_tok):
    """The reference evaluates k in powers of two up to K, and K (spec stack_and_compartmentalization.md A.5)."""
    task = {**TASK, "max_hops": 5, "length": 160}
    docs = EVALUATORS.build("depo", {"task": task, "instances": 1}).documents(hf_tok)
    assert sorted({d["k"] for d in docs}) == [1, 2, 4, 5]
    assert sorted({d["k"] for d in EVALUATORS.build("depo", {"task": {**TASK, "max_hops": 4}, "instances": 1}
                                                    ).documents(hf_tok)}) == [1, 2, 4]


def test_report_headlines_each_hop_counts_accuracy_and_answer_nll():
    """Beyond Perplexity's acquisition curves are per hop count: each acc/k<k> gets table, gain and
    efficiency rows, and so does its continuous proxy nll/k<k> (issue #30 item 3), lower is better."""
    from preschool.evals.depo import DepoEval

    assert DepoEval.reported("acc") and DepoEval.reported("acc/k1") and DepoEval.reported("acc/k4")
    assert DepoEval.reported("nll/k1") and DepoEval.reported("nll") and not DepoEval.reported("n/k1")
    assert DepoEval.direction("acc/k2") and DepoEval.direction("nll/k2") is False
    assert DepoEval.direction("nll") is False


def test_answer_nll_per_hop_equals_a_hand_computation(hf_tok):
    """nll/k<k>: per query, the mean NLL of its answer tokens given the document so far; the mean over queries
    of hop count k; nll: the mean over hop counts (as acc is)."""
    model = micro_model(len(hf_tok) + 40)
    ev = EVALUATORS.build("depo", {"task": TASK, "instances": 3, "render": "reserved", "hops": [1, 3]})
    res = ev.evaluate(model, hf_tok)
    per_k = {1: [], 3: []}
    for d in ev.documents(hf_tok):
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.as_tensor(d["ids"])[None]).logits[0].double(), -1)
        for a, e in d["spans"]:  # the answer tokens a..e-1, each predicted at the position before it
            per_k[d["k"]].append(-float(np.mean([logp[t - 1, d["ids"][t]] for t in range(a, e)])))
    for k, nlls in per_k.items():
        assert len(nlls) == res.metrics[f"n/k{k}"] and res.metrics[f"nll/k{k}"] == pytest.approx(np.mean(nlls), abs=1e-4)
    assert res.metrics["nll"] == pytest.approx((np.mean(per_k[1]) + np.mean(per_k[3])) / 2, abs=1e-4)


def test_reference_hops_append_max_hops_when_it_is_not_a_power_of_two():
    """The reference scores the powers of two below K and K itself (issue #31 item 9)."""
    from preschool.evals.depo import reference_hops

    assert reference_hops(6) == [1, 2, 4, 6] and reference_hops(3) == [1, 2, 3] and reference_hops(1) == [1]
    assert reference_hops(4) == [1, 2, 4] and reference_hops(8) == [1, 2, 4, 8]


def test_prompts_start_as_training_rows_do_without_an_eos_in_front(hf_tok):
    """A DEPO document padded to ``length`` plus its EOS is one training row when seq_len = length (the
    studies' setup), so a training row starts with the document's first token, never with EOS; the
    evaluator's prompts start the same way unless ``prepend_eos`` asks for the concat stream's EOS."""
    from preschool.synthetic import GENERATORS, Item
    from preschool.synthetic.write import SymbolEncoder

    ev = EVALUATORS.build("depo", {"task": TASK, "instances": 2, "hops": [1]})
    gen = EVALUATORS.build("depo", {"task": TASK, "hops": [1]}).generator(1)
    it = next(iter(gen.items(0, 1)))
    first = SymbolEncoder("text", hf_tok.backend_tokenizer.to_str(), max_digits=0).encode(
        Item(it.symbols[:4], it.loss_mask[:4], it.meta)).ids[0]
    doc = ev.documents(hf_tok)[0]
    assert doc["ids"][0] == first != hf_tok.eos_token_id
    with_eos = EVALUATORS.build("depo", {"task": TASK, "instances": 2, "hops": [1], "prepend_eos": True})
    assert with_eos.documents(hf_tok)[0]["ids"][0] == hf_tok.eos_token_id
    assert GENERATORS.build("depo", TASK).cfg.length == TASK["length"]
