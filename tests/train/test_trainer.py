import json

import pytest
import torch

from preschool.config import from_dict
from preschool.errors import ConfigError
from preschool.train.callbacks import Callback
from preschool.train.attention import doc_attention_mask
from preschool.train.trainer import TrainConfig, train


def rows(run, event="train"):
    return [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if json.loads(l)["event"] == event]


class Crash(Callback):
    def __init__(self, step):
        self.at = step

    def on_step_end(self, trainer):
        if trainer.step == self.at:
            raise RuntimeError("simulated crash")


def test_config_errors_name_fields(micro_cfg):
    with pytest.raises(ConfigError, match=r"stages\[1\]\.tokens"):
        from_dict(TrainConfig, micro_cfg(stages=[{"name": "a", "data": "x", "tokens": 10},
                                                {"name": "b", "data": "x", "tokens": -5}]))
    with pytest.raises(ConfigError, match=r"stages\[0\]\.embeddings_at_start"):
        from_dict(TrainConfig, micro_cfg(stages=[{"name": "a", "data": "x", "tokens": 10, "embeddings_at_start": "mean"}]))
    with pytest.raises(ConfigError, match=r"stages\[1\]\.schedule\.lr"):
        from_dict(TrainConfig, micro_cfg(stages=[{"name": "a", "data": "x", "tokens": 10, "group": "g"},
                                                {"name": "b", "data": "x", "tokens": 10, "group": "g",
                                                 "schedule": {"lr": 1.0}}]))


def test_unknown_dataset_names_stage(tmp_path, datasets, micro_cfg):
    with pytest.raises(ConfigError, match=r"stages\[0\]\.data.*nope"):
        train(micro_cfg(stages=[{"name": "a", "data": "nope", "tokens": 64}]), tmp_path / "r", datasets)


def test_run_folder_layout_and_learning(tmp_path, datasets, micro_cfg):
    from transformers import AutoModelForCausalLM

    run = tmp_path / "run"
    res = train(micro_cfg(stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 24}], lr=1e-2), run, datasets)
    assert (run / "DONE").is_file() and (run / "config.yaml").is_file()
    assert res["steps"] == 24 and res["tokens"] == 24 * 64
    tr = rows(run)
    assert [r["step"] for r in tr] == list(range(1, 25))
    assert tr[-1]["loss"] < tr[0]["loss"] - 0.5  # it learns the progression
    val = rows(run, "val")
    assert [r["step"] for r in val] == [4, 8, 12, 16, 20, 24] and "val/text" in val[0] and "val/synth" not in val[0]
    ck = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert ck == [f"step-{s:08d}" for s in (4, 8, 12, 16, 20, 24)]
    last = run / "checkpoints" / ck[-1]
    meta = json.loads((last / "meta.json").read_text())
    assert meta == {"step": 24, "stage": "pt", "stage_index": 0, "tokens": 1536, "pt_tokens": 1536, "stage_tokens": 1536,
                    "tokens_by_stage": {"pt": 1536}, "tokens_by_source": {"text": 1536}}
    assert (last / "trainer_state.pt").is_file() and not (run / "checkpoints" / ck[0] / "trainer_state.pt").exists()
    model = AutoModelForCausalLM.from_pretrained(last)
    assert model.config.hidden_size == 32
    # DONE short-circuits
    assert train(micro_cfg(stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 24}], lr=1e-2), run, datasets)["steps"] == 24


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_resume_reproduces_uninterrupted_run(tmp_path, datasets, how, micro_cfg, stop_at):
    cfg = micro_cfg(stages=[{"name": "ppt", "data": "synth", "tokens": 4 * 16 * 5, "schedule": {"warmup": 2}},
                            {"name": "pt", "data": {"text": 3, "synth": 1}, "tokens": 4 * 16 * 9,
                             "schedule": {"name": "wsd", "wsd_decay": 0.3}}],
                    checkpoint_every=3, log_every=2, attention_reset_between_docs=True)
    train(cfg, tmp_path / "a", datasets)
    b = tmp_path / "b"
    if how == "stop":
        r = train(cfg, b, datasets, callbacks=[stop_at(7)])
        assert r["stopped"] and not (b / "DONE").exists()
    else:
        with pytest.raises(RuntimeError, match="simulated"):
            train(cfg, b, datasets, callbacks=[Crash(8)])  # last checkpoint: step 6; rows of 7-8 get dropped
    r = train(cfg, b, datasets)
    assert r["resumed_from"] and not r["stopped"] and (b / "DONE").is_file()
    ra, rb = rows(tmp_path / "a"), rows(b)
    assert [x["step"] for x in ra] == [x["step"] for x in rb]
    for x, y in zip(ra, rb):
        assert x["loss"] == pytest.approx(y["loss"], abs=1e-6) and x["lr"] == y["lr"] and x["tokens"] == y["tokens"]
    va, vb = rows(tmp_path / "a", "val"), rows(b, "val")
    assert [v["step"] for v in va] == [v["step"] for v in vb]
    assert va[-1]["val/text"] == pytest.approx(vb[-1]["val/text"], abs=1e-6)


def test_resume_refuses_changed_config(tmp_path, datasets, micro_cfg, stop_at):
    cfg = micro_cfg()
    train(cfg, tmp_path / "r", datasets, callbacks=[stop_at(4)])
    with pytest.raises(ConfigError, match=r"train.stages\[0\].tokens"):
        train(micro_cfg(stages=[{"name": "pt", "data": "text", "tokens": 999}]), tmp_path / "r", datasets)
    with pytest.raises(ConfigError, match="train.lr"):
        train(micro_cfg(lr=0.5), tmp_path / "r", datasets)
    train(micro_cfg(log_every=3), tmp_path / "r", datasets)  # logging settings may change


def test_grad_accumulation_matches_full_batch(tmp_path, datasets, micro_cfg):
    stages = [{"name": "pt", "data": {"text": 1, "synth": 1}, "tokens": 4 * 16 * 4}]
    # fp32 on CPU: under bf16 autocast (CUDA default) the two paths differ by ~1e-4
    train(micro_cfg(stages=stages, checkpoint_every=100, device="cpu"), tmp_path / "full", datasets)
    train(micro_cfg(stages=stages, checkpoint_every=100, micro_batch_size=1, device="cpu"), tmp_path / "acc", datasets)
    for x, y in zip(rows(tmp_path / "full"), rows(tmp_path / "acc")):
        assert x["loss"] == pytest.approx(y["loss"], abs=1e-5)


def test_reset_optimizer_and_group_schedule(tmp_path, datasets, micro_cfg):
    wsd = {"name": "wsd", "warmup": 2, "wsd_decay": 0.25}
    cfg = micro_cfg(stages=[
        {"name": "pt1", "data": "text", "tokens": 4 * 16 * 4, "group": "pt", "schedule": wsd},
        {"name": "syn", "data": "synth", "tokens": 4 * 16 * 2, "counts_as_pt": False,
         "schedule": {"warmup": 1, "lr": 1e-3}},
        {"name": "pt2", "data": "text", "tokens": 4 * 16 * 4, "group": "pt", "schedule": wsd},
    ], lr=4e-3, checkpoint_every=100)
    seen = {}

    class Spy(Callback):
        def on_stage_start(self, trainer, stage):
            seen[stage.name] = (trainer.sched_base, trainer.data_base, len(trainer.optimizer.state))

    res = train(cfg, tmp_path / "r", datasets, callbacks=[Spy()])
    tr = rows(tmp_path / "r")
    lrs = [r["lr"] for r in tr]
    # one 8-step WSD schedule across pt1+pt2: warm-up 2, stable, decay over the last 2 steps
    assert lrs[:4] == pytest.approx([2e-3, 4e-3, 4e-3, 4e-3])
    assert lrs[4:6] == pytest.approx([1e-3, 1e-3])  # the inserted stage's own constant-after-warmup cosine
    assert lrs[6:8] == pytest.approx([4e-3, 4e-3]) and lrs[9] == pytest.approx(4e-4)
    assert seen["pt1"] == (0, 0, 0) and seen["syn"][2] == 0  # fresh moments for the inserted stage
    assert seen["pt2"][:2] == (4, 4) and seen["pt2"][2] > 0  # group moments + schedule + data stream restored
    assert res["pt_tokens"] == 8 * 64 and res["tokens"] == 10 * 64
    assert [r["pt_tokens"] for r in tr][4:6] == [256, 256]


def test_embeddings_at_start(tmp_path, datasets, micro_cfg):
    captured = {}

    class Grab(Callback):
        def on_stage_start(self, trainer, stage):
            captured[stage.name] = trainer.model.get_input_embeddings().weight.detach().clone()

        def on_stage_end(self, trainer, stage):
            captured[stage.name + "_end"] = trainer.model.get_input_embeddings().weight.detach().clone()

    cfg = micro_cfg(stages=[{"name": "a", "data": "synth", "tokens": 128},
                            {"name": "b", "data": "text", "tokens": 128, "embeddings_at_start": "mean"},
                            {"name": "c", "data": "text", "tokens": 128, "embeddings_at_start": "reinit"}],
                    reserved_ids=[40, 64], checkpoint_every=100)
    train(cfg, tmp_path / "r", datasets, callbacks=[Grab()])
    b = captured["b"]
    assert torch.equal(b[40:], captured["a_end"][40:])
    assert torch.allclose(b[:40], captured["a_end"][40:64].mean(0).expand(40, -1))
    c = captured["c"]
    assert not torch.allclose(c, captured["b_end"]) and 0.01 < c.std().item() < 0.03


def test_extra_loss_hook_and_hidden_states(tmp_path, datasets, micro_cfg):
    class L2Hidden(Callback):
        needs_hidden_states = True

        def __init__(self):
            self.calls = 0

        def extra_loss(self, model, batch, outputs):
            self.calls += 1
            assert outputs.hidden_states is not None and batch["input_ids"].shape[0] == 2
            return 10.0 * outputs.hidden_states[-1].pow(2).mean()

    cb = L2Hidden()
    train(micro_cfg(micro_batch_size=2, checkpoint_every=100), tmp_path / "r", datasets, callbacks=[cb])
    assert cb.calls == 16  # 8 steps x 2 micro-batches
    train(micro_cfg(micro_batch_size=2, checkpoint_every=100), tmp_path / "base", datasets)
    assert rows(tmp_path / "r")[-1]["loss"] != rows(tmp_path / "base")[-1]["loss"]  # the aux term changed training


def test_values_a_callback_adds_reach_every_writer_whatever_the_callback_order(tmp_path, datasets, micro_cfg):
    """A value added in ``on_log`` is in metrics.jsonl and in every ``write_log``, even from a callback listed
    after the writers (the metrics logger is built in, so user callbacks always come after it)."""

    class Writer(Callback):  # listed before the contributor: must still see its value
        def __init__(self):
            self.rows = []

        def write_log(self, trainer, row):
            self.rows.append(dict(row))
            with pytest.raises(TypeError):  # the row is read-only in the write phase
                row["changed"] = 1

    class Contributor(Callback):
        def on_log(self, trainer, row):
            if row["event"] == "train":
                row.setdefault("aux", 2.0 * row["step"])

    writer = Writer()
    train(micro_cfg(checkpoint_every=100), tmp_path / "r", datasets, callbacks=[writer, Contributor()])
    logged = rows(tmp_path / "r")
    assert [r["aux"] for r in logged] == [2.0 * s for s in range(1, 9)]
    assert [r for r in writer.rows if r["event"] == "train"] == logged


def test_log_checkpoint_schedule(tmp_path, datasets, micro_cfg):
    cfg = micro_cfg(stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 12}], checkpoint_schedule="log",
                    checkpoints_per_decade=4, keep_optimizer_state="all", eval_every=0)
    train(cfg, tmp_path / "r", datasets)
    steps = sorted(int(p.name.split("-")[1]) for p in (tmp_path / "r" / "checkpoints").iterdir())
    assert steps == [1, 2, 3, 6, 10, 12]  # round(10**(k/4)) = 1,2,3,6,10 (+ stage end)
    assert all((tmp_path / "r" / "checkpoints" / f"step-{s:08d}" / "trainer_state.pt").is_file() for s in steps)
    assert rows(tmp_path / "r", "val")[0]["step"] == 12


def test_doc_attention_mask_blocks_other_documents(tmp_path):
    seg = torch.tensor([[0, 0, 1, 1, 1]])
    m = doc_attention_mask(seg)[0, 0]
    assert m[3].tolist() == [False, False, True, True, False]
    assert m[1].tolist() == [True, True, False, False, False]


def test_tokenizer_copied_into_checkpoints(tmp_path, datasets, micro_cfg):
    from preschool.data.tokenizer import save_tokenizer, train_bpe

    tok = train_bpe(["hello world"] * 10 + [str(i) for i in range(50)], vocab_size=300)
    tdir = tmp_path / "tok"
    save_tokenizer(tok, tdir)
    train(micro_cfg(checkpoint_every=100), tmp_path / "r", datasets, tokenizer_dir=tdir)
    ck = tmp_path / "r" / "checkpoints" / "step-00000008"
    assert (ck / "tokenizer.json").is_file()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert AutoModelForCausalLM.from_pretrained(ck).config.vocab_size == tok.get_vocab_size()
    assert AutoTokenizer.from_pretrained(ck).eos_token == "<|endoftext|>"


def test_tensorboard_needs_package(tmp_path, datasets, micro_cfg):
    from preschool.errors import MissingDependency

    try:
        import tensorboard  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependency, match="preschool\\[tensorboard\\]"):
            train(micro_cfg(tensorboard=True), tmp_path / "r", datasets)
    else:
        train(micro_cfg(tensorboard=True, checkpoint_every=100), tmp_path / "r", datasets)
        assert any((tmp_path / "r" / "tensorboard").iterdir())


def test_on_model_built_runs_before_optimizer(tmp_path, datasets, micro_cfg):
    class Freeze(Callback):
        def on_model_built(self, trainer):
            assert not hasattr(trainer, "optimizer")
            trainer.model.get_input_embeddings().weight.requires_grad_(False)
            self.before = trainer.model.get_input_embeddings().weight.detach().clone()

    cb = Freeze()
    train(micro_cfg(checkpoint_every=100), tmp_path / "r", datasets, callbacks=[cb])
    from safetensors.torch import load_file

    w = load_file(str(tmp_path / "r" / "checkpoints" / "step-00000008" / "model.safetensors"))
    assert torch.equal(w["model.embed_tokens.weight"], cb.before)  # frozen: the optimizer never saw it


def test_stop_on_last_step_of_grouped_stage_resumes_group(tmp_path, datasets, micro_cfg, stop_at):
    warm = {"warmup": 1}
    cfg = micro_cfg(stages=[{"name": "a", "data": "text", "tokens": 4 * 16 * 3, "group": "pt", "schedule": warm},
                            {"name": "s", "data": "synth", "tokens": 4 * 16 * 2},
                            {"name": "b", "data": "text", "tokens": 4 * 16 * 3, "group": "pt", "schedule": warm}],
                    checkpoint_every=100, eval_every=0)
    train(cfg, tmp_path / "straight", datasets)
    train(cfg, tmp_path / "r", datasets, callbacks=[stop_at(3)])  # stop exactly at the end of stage a
    train(cfg, tmp_path / "r", datasets)
    for x, y in zip(rows(tmp_path / "straight"), rows(tmp_path / "r")):
        assert x["lr"] == y["lr"] and x["loss"] == pytest.approx(y["loss"], abs=1e-6)


@pytest.mark.parametrize("decay_embeddings", [False, True])
def test_decay_embeddings_puts_embeddings_in_the_decayed_group(tmp_path, datasets, micro_cfg, decay_embeddings):
    """HF Trainer (L2T) decays every matrix, embeddings included; our default keeps them out."""
    class Groups(Callback):
        def on_stage_start(self, trainer, stage):
            emb = trainer.model.get_input_embeddings().weight
            self.decayed = {id(p) for g in trainer.optimizer.param_groups if g["weight_decay"] > 0
                            for p in g["params"]}
            self.emb_decayed = id(emb) in self.decayed
            self.norms_decayed = any(id(p) in self.decayed for n, p in trainer.model.named_parameters() if p.ndim == 1)

    cb = Groups()
    train(micro_cfg(decay_embeddings=decay_embeddings, checkpoint_every=100), tmp_path / "r", datasets, callbacks=[cb])
    assert cb.emb_decayed is decay_embeddings
    assert not cb.norms_decayed  # norms and biases never decay


def test_decay_all_params_leaves_no_parameter_out_of_weight_decay(tmp_path, datasets, micro_cfg):
    """Nanotron (verify-ppt) excludes nothing from weight decay: norms, biases and embeddings decay too."""
    class Groups(Callback):
        def on_stage_start(self, trainer, stage):
            self.groups = [(g["weight_decay"], len(g["params"])) for g in trainer.optimizer.param_groups]
            self.n_params = len(list(trainer.model.parameters()))

    cb = Groups()
    train(micro_cfg(decay_all_params=True, weight_decay=0.1, checkpoint_every=100), tmp_path / "r", datasets,
          callbacks=[cb])
    assert [wd for wd, n in cb.groups if n] == [0.1]  # no no-decay group holding anything
    assert sum(n for _, n in cb.groups) == cb.n_params


def test_runs_written_before_a_new_field_resume_at_its_default(tmp_path, datasets, micro_cfg, stop_at):
    import yaml

    cfg = micro_cfg()
    train(cfg, tmp_path / "r", datasets, callbacks=[stop_at(4)])
    path = tmp_path / "r" / "config.yaml"
    tree = yaml.safe_load(path.read_text())
    del tree["train"]["decay_embeddings"]  # as a run written before the field existed
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    train(cfg, tmp_path / "r", datasets)  # resumes: the default is the behaviour that run had
    with pytest.raises(ConfigError, match="train.decay_embeddings"):
        train(micro_cfg(decay_embeddings=True), tmp_path / "r", datasets)


def test_token_account_per_stage_and_source_and_language_share_of_a_mixture(tmp_path, micro_cfg, write_dataset):
    """A mixture stage counts only its language share as PT; checkpoints record tokens per stage and source."""
    import json as _json

    lang = write_dataset(tmp_path / "data", "lang", seed=1)
    syn = write_dataset(tmp_path / "data", "syn", stride=3, seed=2)
    man = syn / "train" / "manifest.json"  # mark it as a generator's output, as synthetic/write.py does
    m = _json.loads(man.read_text())
    m["source"] = {"kind": "generator", "name": "stack"}
    man.write_text(_json.dumps(m))
    stages = [{"name": "ppt", "data": "syn", "tokens": 2 * 4 * 16, "counts_as_pt": False},
              {"name": "mixed", "data": {"lang": 3, "syn": 1}, "tokens": 4 * 4 * 16},
              {"name": "task", "data": "syn", "tokens": 2 * 4 * 16, "counts_as_pt": False}]
    run = tmp_path / "r"
    train(micro_cfg(stages=stages, checkpoint_every=100), run, {"lang": lang, "syn": syn})
    meta = _json.loads((run / "checkpoints" / "step-00000008" / "meta.json").read_text())
    # batch 4 x 16 tokens; the mixture puts 3 lang rows and 1 syn row in every batch
    assert meta["tokens_by_stage"] == {"ppt": 128, "mixed": 256, "task": 128}
    assert meta["tokens_by_source"] == {"syn": 128 + 64 + 128, "lang": 192}
    assert meta["pt_tokens"] == 192  # the language share only (was all 256 mixture tokens)
    mid = _json.loads((run / "checkpoints" / "step-00000006" / "meta.json").read_text())
    assert mid["tokens_by_stage"] == {"ppt": 128, "mixed": 256} and mid["pt_tokens"] == 192
    vals = [r for r in rows(run, "val") if r["step"] == 8]
    assert vals and vals[-1]["tokens_by_source"] == meta["tokens_by_source"]
    explicit = [{**stages[1], "pt_sources": ["lang", "syn"]}]
    train(micro_cfg(stages=explicit, checkpoint_every=100), tmp_path / "r2", {"lang": lang, "syn": syn})
    assert _json.loads((tmp_path / "r2" / "checkpoints" / "step-00000004" / "meta.json").read_text())["pt_tokens"] == 256
    with pytest.raises(ConfigError, match=r"pt_sources\[0\]"):
        from_dict(TrainConfig, micro_cfg(stages=[{**stages[1], "pt_sources": ["nope"]}]))


def test_log_eval_schedule_validates_at_step_zero_log_steps_and_the_end(tmp_path, datasets, micro_cfg):
    run = tmp_path / "run"
    train(micro_cfg(eval_schedule="log", evals_per_decade=2, eval_every=1,
                    stages=[{"name": "pt", "data": "text", "tokens": 4 * 16 * 7}]), run, datasets)
    # steps round(10 ** (k / 2)) <= 7 are 1 and 3; eval_every is ignored under the log schedule
    assert [r["step"] for r in rows(run, "val")] == [0, 1, 3, 7]


def test_dropout_draws_from_the_run_seed_so_runs_and_resumes_repeat(tmp_path, datasets, micro_cfg, stop_at):
    """Ops that sample from torch's global RNG (dropout here) start from the run's seed: two runs of one config
    give the same numbers whatever ran before them in the process, and a stopped run resumes onto them."""
    cfg = micro_cfg(model={"preset": "micro", "overrides": {"hidden_size": 32, "intermediate_size": 64,
                                                           "attention_dropout": 0.5}}, checkpoint_every=3)
    train(cfg, tmp_path / "a", datasets)
    torch.rand(7)  # whatever else the process drew in between
    train(cfg, tmp_path / "b", datasets)
    assert [r["loss"] for r in rows(tmp_path / "a")] == [r["loss"] for r in rows(tmp_path / "b")]
    train(cfg, tmp_path / "c", datasets, callbacks=[stop_at(4)])
    torch.rand(7)
    train(cfg, tmp_path / "c", datasets)
    assert [r["loss"] for r in rows(tmp_path / "a")] == [r["loss"] for r in rows(tmp_path / "c")]
    other = micro_cfg(**{**cfg, "seed": 1})
    train(other, tmp_path / "d", datasets)
    assert rows(tmp_path / "a")[-1]["loss"] != rows(tmp_path / "d")[-1]["loss"]
