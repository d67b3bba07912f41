"""An experiment on a Hugging Face tokenizer whose EOS is not id 0, end to end: prepare -> train -> eval -> report.

The tokenizers are local folders shaped like the papers' (conftest.build_hf_tokenizer): Llama-3 / SmolLM3
style (specials after the vocabulary; documents end with ``<|end_of_text|>``, renamed from its chat EOS as
verify-ppt does) and Mistral style (``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2). Every place that treats an id
as EOS, BOS or PAD is checked against the tokenizer: the data, the model config, the checkpoint's tokenizer,
the evaluators' prefix token and the reserved ids of a synthetic dataset.
"""

import json

import numpy as np
import pytest
import yaml

from preschool.data.shards import ShardSet
from preschool.data.tokenizer import load_hf_tokenizer, special_ids
from preschool.experiment import load_experiment, run_experiment


def _experiment(tok_dir, renames: dict) -> dict:
    return {
        "name": "hf_tokenizer", "seed": 0, "seeds": [0], "seq_len": 64,
        "corpora": {"storybook": {"source": "storybook", "seed": 0}},
        "tokenizer": {"kind": "hf", "name": str(tok_dir), **renames},
        "data": {"pt": {"corpus": "storybook", "tokens": 8192, "val_tokens": 520, "unit_tokens": 4096},
                 "dyck": {"generator": "shuffle_dyck", "params": {"k": 4, "length": 24}, "render": "reserved",
                          "tokens": 2048}},
        "minimal_pairs": {"per_paradigm": 4},
        "model": {"preset": "micro", "vocab_multiple": 64},
        "train": {"batch_size": 8, "eval_every": 4, "checkpoint_every": 4, "val": ["pt"], "val_rows": 4},
        "arms": [{"name": "pt_only", "stages": [{"name": "pt", "data": "pt", "tokens": 2048}]},
                 {"name": "ppt", "stages": [{"name": "ppt", "data": "dyck", "tokens": 1024, "counts_as_pt": False},
                                            {"name": "pt", "data": "pt", "tokens": 2048, "reset_optimizer": True}]}],
        "evals": [{"name": "minimal_pairs", "params": {"path": "${data}/minimal_pairs", "preset": "preschool"}},
                  {"name": "verbatim", "params": {"n_base_lists": 2, "n_lists": 2, "list_lengths": [3],
                                                  "intervening_words": [0], "bootstrap_resamples": 10,
                                                  "add_bos": True}}],
        "report": {"baseline": "pt_only"},
    }


@pytest.mark.parametrize("style, renames", [("llama3", {"eos_token": "<|end_of_text|>"}), ("mistral", {})])
def test_hf_tokenizer_experiment_end_to_end(tmp_path, hf_tokenizer, style, renames):
    from preschool.evals.runner import load_checkpoint

    folder = hf_tokenizer(style)
    tok = load_hf_tokenizer(folder, **renames)
    sp, n = special_ids(tok), len(tok)
    assert sp.eos != 0 and sp.eos != sp.bos
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(folder, renames)))
    out = tmp_path / "run"
    report = run_experiment(load_experiment(path, [f"out={out}"]), progress=False).read_text()
    assert "minimal_pairs" in report and "verbatim" in report

    man = json.loads((out / "data" / "manifest.json").read_text())
    assert man["tokenizer"]["special_ids"] == sp.as_dict() and man["tokenizer"]["vocab_size"] == n
    # natural text: EOS exactly at each document end; the tokenizer's other specials never appear
    pt = ShardSet(out / "data" / "pt" / "train")
    toks, segs = pt.rows(range(len(pt))), pt.rows(range(len(pt)), "segments")
    ends = np.zeros_like(toks, bool)
    ends[:, :-1] = segs[:, 1:] != segs[:, :-1]
    assert ends.any() and (toks[ends] == sp.eos).all() and (toks[:, :-1] == sp.eos).sum() == ends.sum()
    others = [t for t in tok.all_special_ids if t != sp.eos]
    assert not np.isin(toks, others).any()
    # synthetic symbols on reserved ids right after len(tokenizer), their documents ending with the EOS
    dyck = ShardSet(out / "data" / "dyck" / "train")
    d = dyck.rows(range(len(dyck)))
    assert set(np.unique(d[d < n])) == {sp.eos} and d.max() == n + 2 * 4 - 1

    for arm in ("pt_only", "ppt"):
        run = out / "arms" / arm / "seed0"
        last = sorted((run / "checkpoints").iterdir())[-1]
        cfg = json.loads((last / "config.json").read_text())
        assert (cfg["bos_token_id"], cfg["eos_token_id"], cfg["pad_token_id"]) == (sp.bos, sp.eos, sp.pad)
        assert cfg["vocab_size"] == -(-(n + 8) // 64) * 64  # tokenizer + 8 Dyck symbols, padded to 64
        model, ck_tok = load_checkpoint(last)
        assert special_ids(ck_tok) == sp  # the checkpoint's tokenizer names the same ids (renames kept)
        summary = json.loads((run / "evals" / last.name / "minimal_pairs" / "summary.json").read_text())
        assert summary["extra"]["prefix_token_id"] == sp.bos  # sentences are conditioned on BOS, not id 0
