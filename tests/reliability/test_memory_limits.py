"""Sizes are refused before they are allocated (issue 34, item 4): a YAML alias bomb (a few lines whose
anchors expand to millions of values) or an alias that contains itself is refused while the config is loaded,
before the copy that expands it; `generate --seq-len` and an experiment's `seq_len` beyond the memory this
machine has available are refused before the first row is built. Each in one line naming the file or field."""

import time
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.config import load_yaml, override_value
from preschool.errors import ConfigError


def _bomb(levels: int) -> str:
    """YAML whose anchors expand to 10**levels values in a few hundred bytes."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        p = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([p] * 10)}]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text("name: x\n" + _bomb(6))  # a million values; the reported one had billions
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="alias") as e:
        load_yaml(path)
    assert time.perf_counter() - t0 < 5
    assert e.value.field == str(path)


def test_a_yaml_alias_inside_itself_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("name: x\nloop: &l [1, *l]\n")
    with pytest.raises(ConfigError, match="itself") as e:
        load_yaml(path)
    assert e.value.field == str(path)


def test_anchors_within_the_budget_still_become_copies(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("stage: &s {tokens: 5}\narms: [{stages: [*s]}, {stages: [*s]}]\n")
    data = load_yaml(path)
    data["arms"][0]["stages"][0]["tokens"] = 6  # an override of one arm's stage changes that arm only
    assert data["arms"][1]["stages"][0]["tokens"] == 5


def test_a_set_value_alias_bomb_is_refused():
    bomb = "{" + _bomb(6).strip().replace("\n", ", ") + "}"
    with pytest.raises(ConfigError, match="alias"):
        override_value(bomb)


def test_an_experiment_with_an_alias_bomb_stops_in_one_line(tiny_experiment, capsys, one_line_error):
    tiny_experiment.write_text(tiny_experiment.read_text() + "bomb:\n" + "".join(
        "  " + line + "\n" for line in _bomb(6).splitlines()))
    out = tiny_experiment.parent / "out"
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    one_line_error(tiny_experiment, "alias")
    assert not out.exists()


def test_generate_refuses_a_seq_len_beyond_the_machine_before_allocating(tmp_path, capsys, one_line_error):
    out = tmp_path / "gen"
    t0 = time.perf_counter()
    assert main(["generate", "stack", "--tokens", "1000", "--seq-len", str(10**12), "--out", str(out),
                 "--quiet"]) == 2
    assert time.perf_counter() - t0 < 10
    one_line_error("--seq-len", "memory")
    assert not out.exists()


def test_transform_l2t_refuses_a_seq_len_beyond_the_machine(tmp_path, capsys, one_line_error):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat. " * 50 + "\n")
    out = tmp_path / "l2t"
    assert main(["transform", "l2t", "--input", str(corpus), "--out", str(out), "--seq-len", str(10**12)]) == 2
    one_line_error("--seq-len", "memory")
    assert not out.exists()


def test_generate_measures_against_the_memory_available(tmp_path, monkeypatch, capsys, one_line_error):
    """The issue's 100M-token rows (9 GB after a minute) are refused on a machine with 2 GB free."""
    from preschool import device

    monkeypatch.setattr(device, "available_memory", lambda: 2 << 30)
    out = tmp_path / "gen"
    assert main(["generate", "stack", "--tokens", "1000", "--seq-len", "100000000", "--out", str(out),
                 "--quiet"]) == 2
    one_line_error("--seq-len", "GB")
    assert not out.exists()
    assert main(["generate", "stack", "--tokens", "1000", "--seq-len", "512", "--out", str(out), "--quiet"]) == 0


def test_prepare_refuses_a_seq_len_beyond_the_machine(tiny_experiment, capsys, one_line_error):
    out = tiny_experiment.parent / "out"
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress",
                 "--set", f"seq_len={10**12}", "--set", f"data.pt.tokens={4 * 10**12}",
                 "--set", f"data.pt.val_tokens={2 * 10**12}"]) == 2
    one_line_error("seq_len", "memory")
    assert not (out / "data" / "pt").exists()


# issue 40, item 13: a rung of hidden 65,536 and FFN 10^6 (some 4e11 parameters, 6 TB to train) was built and
# allocated until the kernel killed the process
HUGE = {"hidden_size": 65536, "intermediate_size": 10**6, "num_attention_heads": 1, "num_key_value_heads": 1}


def test_train_refuses_a_model_beyond_the_machine_before_building_it(tmp_path, micro_cfg, datasets, capsys,
                                                                     one_line_error):
    import yaml

    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump({"train": micro_cfg(model={"preset": "micro", "overrides": HUGE}),
                                   "datasets": {"text": str(datasets["text"])}}))
    out = tmp_path / "run"
    t0 = time.perf_counter()
    assert main(["train", str(cfg), "--out", str(out)]) == 2
    assert time.perf_counter() - t0 < 30
    one_line_error("model", "parameters", "GB", "65,536")
    assert not out.exists() or not any(out.iterdir())  # the run folder's lock came and went; nothing written


def test_a_model_is_measured_against_the_memory_available(tmp_path, micro_cfg, datasets, monkeypatch):
    """Weights, gradients and AdamW's two moments in fp32: 16 bytes a parameter, against what the device
    (here the host: a CPU run) has available; a model that fits trains."""
    from preschool import device
    from preschool.errors import ConfigError
    from preschool.train.model import describe
    from preschool.train.trainer import Trainer, train

    cfg = from_dict_train(micro_cfg())
    params = describe(cfg.model, 64)["params_total"]
    monkeypatch.setattr(device, "available_memory", lambda: 16 * params - 1)
    with pytest.raises(ConfigError, match="model") as e:
        Trainer(cfg, tmp_path / "run", datasets)
    assert f"{params:,} parameters" in str(e.value)
    monkeypatch.setattr(device, "available_memory", lambda: 16 * params + (8 << 20))  # and a micro-batch's activations
    Trainer(cfg, tmp_path / "run", datasets)  # fits: built as before


def from_dict_train(data):
    from preschool.config import from_dict
    from preschool.train.configs import TrainConfig

    return from_dict(TrainConfig, data)


def test_a_ladder_rung_beyond_the_machine_stops_the_run_in_one_line(tmp_path, tiny_experiment, capsys,
                                                                    one_line_error):
    import yaml

    data = yaml.safe_load(tiny_experiment.read_text())
    data["ladder"] = {"tokens": {"rule": "multiplier"},
                      "rungs": [{"name": "small", "multiplier": 1}, {"name": "huge", "multiplier": 1,
                                                                      "model": {"overrides": HUGE}}]}
    tiny_experiment.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--rung", "huge"]) == 2
    one_line_error("model", "parameters", "GB")


def test_on_cuda_the_device_holds_the_training_state_and_the_host_the_build(monkeypatch):
    """No GPU needed: the check's arithmetic against a CUDA device's free memory (faked), FSDP shards included."""
    import torch

    from preschool import device
    from preschool.errors import ConfigError

    gpu, params = torch.device("cuda", 0), 10**9  # 16 GB to train, 4 GB to build
    monkeypatch.setattr(device, "available_memory", lambda: 8 * 10**9)
    monkeypatch.setattr(device, "cuda_free_memory", lambda d: 20 * 10**9)
    device.check_model_memory(params, gpu)  # 16 GB on a card with 20 free, 4 GB on a host with 8
    monkeypatch.setattr(device, "cuda_free_memory", lambda d: 10 * 10**9)
    with pytest.raises(ConfigError, match="cuda:0") as e:
        device.check_model_memory(params, gpu)
    assert e.value.field == "model"
    device.check_model_memory(params, gpu, shards=2)  # each FSDP rank holds half: 8 GB (after the whole 4 GB)
    device.check_model_memory(params, gpu, param_bytes=2)  # pure_bf16: 8 GB
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # four ranks build their fp32 copy on one host: 16 GB > 8
    with pytest.raises(ConfigError, match="host"):
        device.check_model_memory(params, gpu, shards=4)


# Issue 48, item 13: sizes that were never estimated. A batch of 10^7 rows loaded its rows for minutes (its
# activations, some 900 GB, were never estimated); a ladder trained its small rungs before refusing the one
# that could not fit; `data.pt.tokens: 1e12` and `minimal_pairs.per_paradigm: 1e9` started building for hours.

def test_a_batch_whose_activations_cannot_fit_is_refused_before_its_rows_load(tmp_path, micro_cfg, datasets, capsys):
    import yaml

    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump({"train": micro_cfg(batch_size=10_000_000), "datasets": {"text": str(datasets["text"])}}))
    t0 = time.perf_counter()
    assert main(["train", str(cfg), "--out", str(tmp_path / "run")]) == 2
    assert time.perf_counter() - t0 < 30
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[preschool]")]  # progress notes
    assert len(err) == 1 and "batch_size:" in err[0] and "10,000,000 rows x 16 tokens" in err[0], err
    assert "activations" in err[0] and "GB" in err[0]


def test_the_activation_check_names_micro_batch_size_and_passes_what_fits(tmp_path, micro_cfg, datasets, monkeypatch):
    from preschool import device
    from preschool.errors import ConfigError
    from preschool.train.trainer import Trainer

    monkeypatch.setattr(device, "available_memory", lambda: 64 << 20)  # 64 MiB: the micro model and small batches
    with pytest.raises(ConfigError) as e:
        Trainer(from_dict_train(micro_cfg(batch_size=4096, micro_batch_size=4096)), tmp_path / "run", datasets)
    assert e.value.field == "micro_batch_size" and "activations" in str(e.value)
    Trainer(from_dict_train(micro_cfg(batch_size=4096, micro_batch_size=4)), tmp_path / "run", datasets)


def test_every_run_of_a_ladder_is_checked_before_any_trains(tmp_path, tiny_experiment, capsys, one_line_error):
    import yaml

    data = yaml.safe_load(tiny_experiment.read_text())
    data["ladder"] = {"tokens": {"rule": "multiplier"},
                      "rungs": [{"name": "small", "multiplier": 1}, {"name": "huge", "multiplier": 1,
                                                                      "model": {"overrides": HUGE}}]}
    tiny_experiment.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["run", str(tiny_experiment), "--out", str(out), "--no-progress"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[preschool]")]
    assert len(err) == 1 and "rung huge arm a seed 0" in err[0] and "parameters" in err[0], err
    assert not list(out.rglob("DONE")) and not list(out.rglob("metrics.jsonl"))  # the small rung did not train


@pytest.mark.parametrize("setting, field", [("data.pt.tokens=1e12", "data.pt.tokens"),
                                            ("minimal_pairs.per_paradigm=1e9", "minimal_pairs.per_paradigm")])
def test_a_data_budget_beyond_the_disk_or_memory_is_refused_before_building(tiny_experiment, capsys, one_line_error,
                                                                            setting, field):
    out = tiny_experiment.parent / "out"
    t0 = time.perf_counter()
    assert main(["prepare", str(tiny_experiment), "--out", str(out), "--no-progress", "--set", setting]) == 2
    assert time.perf_counter() - t0 < 30
    one_line_error(field, "GB")
    assert not (out / "data" / "tokenizer").exists()  # refused before anything was built


def test_minimal_pairs_are_measured_against_the_free_disk(tmp_path, monkeypatch, one_line_error):
    from preschool import device

    monkeypatch.setattr(device, "free_disk", lambda path: 10_000)
    assert main(["corpus", "pairs", str(tmp_path / "mp"), "--per-paradigm", "100"]) == 2
    one_line_error("--per-paradigm", "free at")
    assert main(["corpus", "pairs", str(tmp_path / "mp"), "--per-paradigm", "2"]) == 0


@pytest.mark.parametrize("setting, field", [
    (["ladder.rungs.2.multiplier=1e308"], "ladder.rungs[2].multiplier"),
    (["ladder.tokens.rule=per_param", "ladder.tokens.ratio=1e300", *(f"ladder.rungs.{k}.multiplier=null"
                                                                     for k in range(3))], "ladder.tokens.ratio"),
    (["arms.0.stages.0.tokens=1e300"], "arms[0].stages[0].tokens"),
])
def test_a_token_budget_past_2_to_the_53_is_one_line(capsys, one_line_error, setting, field):
    ladder = Path(__file__).resolve().parents[1] / "ladder_micro.yaml"
    assert main(["plan", str(ladder), *(x for s in setting for x in ("--set", s))]) == 2
    err = one_line_error(field, "2^53")
    assert len(err) < 400  # no 300-digit count


def test_the_check_before_training_counts_the_fsdp_ranks_torchrun_will_start(tmp_path, micro_cfg, datasets,
                                                                              monkeypatch):
    """The runner checks each run before train() makes the process group: an FSDP run's share per rank comes
    from torchrun's WORLD_SIZE, so a model that fits sharded over four ranks is not refused as if whole."""
    from preschool import device
    from preschool.errors import ConfigError
    from preschool.train.model import describe
    from preschool.train.trainer import check_run_fits

    cfg = from_dict_train(micro_cfg(parallel="fsdp", batch_size=4, micro_batch_size=1,
                                    model={"preset": "micro", "overrides": {"hidden_size": 512,
                                                                            "intermediate_size": 1024}}))
    params = describe(cfg.model, 64)["params_total"]
    monkeypatch.setattr(device, "available_memory", lambda: 8 * params + (2 << 20))  # half the model's 16 bytes
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # one rank per node
    with pytest.raises(ConfigError, match="model"):
        check_run_fits(cfg, datasets)
    monkeypatch.setenv("WORLD_SIZE", "4")
    check_run_fits(cfg, datasets)  # a quarter per rank fits
