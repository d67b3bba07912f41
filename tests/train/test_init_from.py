"""init_from (train/init_from.py): a run or a stage starts from a local Hugging Face folder, checked before any
work, recorded in the run folder."""

import json

import pytest
import torch
import yaml

from preschool.errors import ConfigError
from preschool.train.callbacks import Callback
from preschool.train.trainer import train


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from preschool.data.tokenizer import save_tokenizer, train_bpe

    folder = tmp_path_factory.mktemp("tok")
    save_tokenizer(train_bpe(["the cat sleeps on the mat", "a dog barks"] * 10 + [str(i) for i in range(40)],
                             vocab_size=300), folder)
    return folder


def hf_folder(folder, tok_dir, family="gpt2", vocab=None, seed=0):
    """A model saved as a public checkpoint is: transformers' own classes and init, save_pretrained, the tokenizer."""
    import shutil

    from transformers import AutoConfig, AutoModelForCausalLM

    n = vocab or json.loads((tok_dir / "tokenizer.json").read_text())["model"]["vocab"].__len__() + 1
    kw = dict(n_embd=32, n_layer=2, n_head=2, n_positions=64) if family == "gpt2" else \
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64)
    cfg = AutoConfig.for_model(family, vocab_size=n, **kw)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(folder)
    for f in tok_dir.iterdir():
        shutil.copy2(f, folder / f.name)
    return folder


def vocab_size(tok_dir):
    from preschool.data.tokenizer import load_tokenizer, tokenizer_size

    return tokenizer_size(load_tokenizer(tok_dir))


class Capture(Callback):
    """Keeps the weights (and AdamW moments) each stage starts from."""

    def __init__(self):
        self.weights, self.moments = {}, {}

    def on_stage_start(self, trainer, stage):
        self.weights[stage.name] = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        self.moments[stage.name] = {i: s["exp_avg"].clone()
                                    for i, s in trainer.optimizer.state_dict()["state"].items()}


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_a_run_starts_from_a_public_style_folder_of_another_family(tmp_path, datasets, micro_cfg, tok_dir):
    src = hf_folder(tmp_path / "gpt2-tiny", tok_dir, vocab=vocab_size(tok_dir))
    cap = Capture()
    cfg = micro_cfg(init_from={"path": str(src)})  # model: says micro qwen2; the folder's model is what trains
    res = train(cfg, tmp_path / "run", datasets, tok_dir, callbacks=[cap])
    start = _weights(src)
    got = cap.weights["pt"]
    for k, v in start.items():
        assert torch.equal(got[k], v), k
    assert res["model"]["family"] == "gpt2" and res["model"]["hidden_size"] == 32 and str(src) in res["model"]["preset"]
    last = tmp_path / "run" / "checkpoints" / "step-00000008"
    assert json.loads((last / "config.json").read_text())["model_type"] == "gpt2"
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    start_row = next(r for r in rows if r["event"] == "init_from")
    assert start_row["path"] == str(src) and start_row["step"] == 0 and start_row["optimizer"] == "reset"
    rec = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert rec["train"]["init_from"]["path"] == str(src) and len(rec["start_sha256"]["init_from"]) == 64


def test_continuing_a_toolkit_checkpoint_with_its_optimizer_and_a_mid_run_stage_switch(
        tmp_path, datasets, micro_cfg, tok_dir, capfd):
    base = tmp_path / "base"
    train(micro_cfg(), base, datasets, tok_dir)
    src = base / "checkpoints" / "step-00000008"
    st = torch.load(src / "trainer_state.pt", weights_only=True)
    cap = Capture()
    cfg = micro_cfg(init_from={"path": str(src), "optimizer": "keep"},
                    stages=[{"name": "anneal", "data": "text", "tokens": 4 * 16 * 4,
                             "schedule": {"name": "linear", "warmup": 0, "min_lr_ratio": 0}},
                            {"name": "again", "data": "synth", "tokens": 4 * 16 * 2,
                             "init_from": {"path": str(base / "checkpoints" / "step-00000004")}}])
    train(cfg, tmp_path / "anneal", datasets, tok_dir, callbacks=[cap])
    for k, v in _weights(src).items():
        assert torch.equal(cap.weights["anneal"][k], v), k
    saved = st["optimizer"]["state"]
    assert cap.moments["anneal"].keys() == saved.keys()
    assert all(torch.equal(cap.moments["anneal"][i], saved[i]["exp_avg"]) for i in saved)
    for k, v in _weights(base / "checkpoints" / "step-00000004").items():  # the stage's own start
        assert torch.equal(cap.weights["again"][k], v), k
    assert cap.moments["again"] == {}  # optimizer: reset (fresh moments)
    err = capfd.readouterr().err
    assert "init_from: weights and AdamW state (the source's schedule position: step 8 (stage 'pt', its step 8" in err
    rows = [json.loads(x) for x in (tmp_path / "anneal" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["where"], r["step"], r["source_step"]) for r in rows if r["event"] == "init_from"] == \
        [("init_from", 0, 8), ("stages[1].init_from", 4, 4)]


def test_refusals_before_any_work_each_in_one_line(tmp_path, datasets, micro_cfg, tok_dir):
    from preschool.data.tokenizer import save_tokenizer, train_bpe

    def refused(init, match, field="init_from.path"):
        out = tmp_path / "never"
        with pytest.raises(ConfigError) as e:
            train(micro_cfg(init_from=init), out, datasets, tok_dir)
        assert e.value.field == field and "\n" not in str(e.value), str(e.value)
        assert __import__("re").search(match, e.value.message), e.value.message
        assert not out.exists()  # nothing written

    refused({"path": str(tmp_path / "nope")}, "nope: no such folder")
    (tmp_path / "empty").mkdir()
    refused({"path": str(tmp_path / "empty")}, "no config.json")
    good = hf_folder(tmp_path / "good", tok_dir, family="llama", vocab=vocab_size(tok_dir))

    def variant(name, edit):
        import shutil

        d = tmp_path / name
        shutil.copytree(good, d)
        edit(d)
        return {"path": str(d)}

    def to_bin(d):
        (d / "model.safetensors").unlink()
        torch.save({"x": torch.zeros(1)}, d / "pytorch_model.bin")

    refused(variant("pickled", to_bin), r"weights are pickles \(pytorch_model.bin\).*safetensors")

    def remote(d):
        c = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**c, "auto_map": {"AutoModelForCausalLM": "m.Model"}}))

    refused(variant("remote", remote), "names its own Python code")

    def other_family(d):
        c = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**c, "model_type": "mamba"}))

    refused(variant("mamba", other_family), r"model_type 'mamba' is not a family the trainer can train \(known: .*gpt2")

    def other_tokenizer(d):
        save_tokenizer(train_bpe(["completely different words here"] * 10, vocab_size=280), d)

    refused(variant("othertok", other_tokenizer), rf"its tokenizer \(\d+ tokens\) differs from the data's \({tok_dir}, "
                                                  r"\d+ tokens\): '.*' is id \d+ there")
    small = hf_folder(tmp_path / "small", tok_dir, family="llama", vocab=40)
    refused({"path": str(small)}, r"its model has 40 embedding rows, but the data uses ids up to")
    refused({"path": str(good), "optimizer": "keep"}, "keep needs the AdamW state", field="init_from.optimizer")
    with pytest.raises(ConfigError, match=r"init_from: give a folder \(path\) or an arm"):
        train(micro_cfg(init_from={}), tmp_path / "never", datasets, tok_dir)
    with pytest.raises(ConfigError, match=r"init_from.step: only with arm"):
        train(micro_cfg(init_from={"path": str(good), "step": 3}), tmp_path / "never", datasets, tok_dir)
    with pytest.raises(ConfigError, match=r"init_from.arm: names an arm \(base\) of an experiment"):
        train(micro_cfg(init_from={"arm": "base"}), tmp_path / "never", datasets, tok_dir)
    # a stage's start must be the run's architecture
    with pytest.raises(ConfigError, match=r"stages\[1\].init_from.path: .*good: a llama model; the run trains a qwen2"):
        train(micro_cfg(stages=[{"name": "a", "data": "text", "tokens": 64},
                                {"name": "b", "data": "text", "tokens": 64, "init_from": {"path": str(good)}}]),
              tmp_path / "never", datasets, tok_dir)
    assert not (tmp_path / "never").exists()


def test_a_changed_start_is_refused_on_the_run_folder_like_a_changed_config(tmp_path, datasets, micro_cfg, tok_dir,
                                                                            stop_at):
    a = hf_folder(tmp_path / "a", tok_dir, family="llama", vocab=vocab_size(tok_dir), seed=0)
    b = hf_folder(tmp_path / "b", tok_dir, family="llama", vocab=vocab_size(tok_dir), seed=1)
    run = tmp_path / "run"
    train(micro_cfg(init_from={"path": str(a)}), run, datasets, tok_dir, callbacks=[stop_at(4)])
    with pytest.raises(ConfigError, match=r"train.init_from.path: differs from the run already in"):
        train(micro_cfg(init_from={"path": str(b)}), run, datasets, tok_dir)
    with pytest.raises(ConfigError, match=r"train.init_from: differs from the run already in"):
        train(micro_cfg(), run, datasets, tok_dir)
    # the same folder, other weights in it
    (a / "model.safetensors").write_bytes((b / "model.safetensors").read_bytes())
    with pytest.raises(ConfigError, match=r"train.init_from.path: differs .*\(the weights in that folder changed"):
        train(micro_cfg(init_from={"path": str(a)}), run, datasets, tok_dir)
