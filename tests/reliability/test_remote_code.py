"""Code from a downloaded folder never runs (issue 34, item 2): a checkpoint whose `config.json`, or a tokenizer
whose `tokenizer_config.json`, names its own Python classes (`auto_map`) makes transformers ask "run the custom
code?" and import the folder's module on "y". `eval --checkpoint` and `generate --tokenizer` (and a `kind: hf`
tokenizer of a folder) refuse such a folder in one line naming it, whatever is typed, and nothing is imported."""

import io
import json
import sys

import pytest

from preschool.cli import main

EVIL = """
import pathlib
pathlib.Path({marker!r}).write_text("the folder's code ran")
from transformers import PretrainedConfig, PreTrainedTokenizerFast
class EvilConfig(PretrainedConfig):
    model_type = "evil_model"
class EvilTokenizer(PreTrainedTokenizerFast):
    pass
"""


@pytest.fixture
def say_yes(monkeypatch):
    """Whoever is asked "Do you wish to run the custom code? [y/N]" answers yes."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n" * 10))


def _plant(folder, marker):
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)))


def test_eval_refuses_a_checkpoint_that_names_its_own_code(tmp_path, say_yes, capsys, one_line_error):
    ckpt, marker = tmp_path / "step-00000010", tmp_path / "ran.txt"
    ckpt.mkdir()
    _plant(ckpt, marker)
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(ckpt / "model.safetensors"))  # a readable weights file, so loading starts
    (ckpt / "config.json").write_text(json.dumps({
        "model_type": "evil_model", "architectures": ["EvilModel"],
        "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}}))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "the cat sat", "sentence_bad": "cat the sat", "UID": "u"}) + "\n")
    rc = main(["eval", "--checkpoint", str(ckpt), "--blimp", str(pairs),
               "--out", str(tmp_path / "evals"), "--device", "cpu"])
    assert not marker.exists(), "the checkpoint's own code was imported"
    assert rc == 2
    one_line_error(ckpt / "config.json", "auto_map")


@pytest.fixture
def tokenizer_folder(tmp_path):
    """A saved tokenizer folder (tokenizer.json + HF files), as `prepare` writes one."""
    from preschool.data.tokenizer import save_tokenizer, train_bpe

    folder = tmp_path / "tok"
    save_tokenizer(train_bpe((f"the cat sat on mat {i}" for i in range(200)), 300), folder)
    return folder


def _name_code(tokenizer_folder, marker):
    _plant(tokenizer_folder, marker)
    cfg_path = tokenizer_folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["auto_map"] = {"AutoTokenizer": [None, "evil.EvilTokenizer"]}
    cfg["tokenizer_class"] = "EvilTokenizer"
    cfg_path.write_text(json.dumps(cfg))
    return cfg_path


def test_generate_refuses_a_tokenizer_that_names_its_own_code(tmp_path, tokenizer_folder, say_yes, capsys,
                                                              one_line_error):
    marker = tmp_path / "ran.txt"
    cfg_path = _name_code(tokenizer_folder, marker)
    out = tmp_path / "gen"
    rc = main(["generate", "stack", "--tokens", "200", "--seq-len", "32", "--out", str(out),
               "--tokenizer", str(tokenizer_folder), "--quiet"])
    assert not marker.exists(), "the tokenizer's own code was imported"
    assert rc == 2
    one_line_error(cfg_path, "auto_map")
    assert not out.exists()


def test_an_hf_tokenizer_folder_with_its_own_code_is_refused_on_load(tmp_path, tokenizer_folder, say_yes):
    from preschool.data.tokenizer import load_hf_tokenizer
    from preschool.errors import PreschoolError

    marker = tmp_path / "ran.txt"
    cfg_path = _name_code(tokenizer_folder, marker)
    with pytest.raises(PreschoolError, match="auto_map") as e:
        load_hf_tokenizer(tokenizer_folder)
    assert str(cfg_path) in str(e.value)
    assert not marker.exists()


def test_every_transformers_load_in_the_package_passes_trust_remote_code_false():
    """A grep, so a new loader cannot forget it: each ``from_pretrained(`` call in src/ says
    ``trust_remote_code=False`` (transformers' own default asks on stdin)."""
    import re
    from pathlib import Path

    import preschool

    src = Path(preschool.__file__).parent
    missing = []
    for p in sorted(src.rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        for m in re.finditer(r"\.from_pretrained\(", text):
            depth, i = 1, m.end()
            while depth and i < len(text):
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            if "trust_remote_code=False" not in text[m.end():i]:
                missing.append(f"{p.relative_to(src)}:{text.count(chr(10), 0, m.start()) + 1}")
    assert missing == []


DEEP = "[" * 100_000 + "]" * 100_000  # nested beyond what Python's json reads (its recursion limit)


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
def test_eval_refuses_a_checkpoint_file_nested_too_deeply_naming_it(tmp_path, tokenizer_folder, capsys,
                                                                      one_line_error, name):
    """Issue 40, item 14: the `auto_map` check read the file with json.loads, which raised RecursionError."""
    import shutil

    import torch
    from safetensors.torch import save_file

    ckpt = tmp_path / "step-00000010"
    shutil.copytree(tokenizer_folder, ckpt)
    save_file({"w": torch.zeros(1)}, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (ckpt / name).write_text(DEEP)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "the cat sat", "sentence_bad": "cat the sat", "UID": "u"}) + "\n")
    rc = main(["eval", "--checkpoint", str(ckpt), "--blimp", str(pairs), "--out", str(tmp_path / "evals"),
               "--device", "cpu"])
    assert rc == 2
    assert "Recursion" not in one_line_error(ckpt / name, "nested")
    assert not (tmp_path / "evals").exists()


def test_generate_refuses_a_tokenizer_config_nested_too_deeply(tmp_path, tokenizer_folder, capsys, one_line_error):
    (tokenizer_folder / "tokenizer_config.json").write_text(DEEP)
    out = tmp_path / "gen"
    rc = main(["generate", "stack", "--tokens", "200", "--seq-len", "32", "--out", str(out),
               "--tokenizer", str(tokenizer_folder), "--quiet"])
    assert rc == 2
    one_line_error(tokenizer_folder / "tokenizer_config.json", "nested")
    assert not out.exists()
