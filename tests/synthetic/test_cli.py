
import numpy as np

from preschool.cli import main
from preschool.data.shards import ShardSet
from preschool.data.tokenizer import save_tokenizer


def test_list_shows_every_task_parameters_and_presets(capsys):
    assert main(["generate", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("shuffle_dyck", "mp_struct_core", "nca", "set", "stack", "queue", "depo", "retrieval"):
        assert f"{name}:" in out
    assert "p_open = 0.5" in out and "preset dyck_hu2025" in out and "# symbols per document" in out


def test_list_shows_a_fields_comment_but_not_a_type_checker_pragma(capsys):
    assert main(["generate", "--list"]) == 0
    queue = capsys.readouterr().out.split("\nqueue:")[1].split("\n\n")[0]
    # QueueConfig narrows Stack's answer_order under `# type: ignore[...]`: no parameter doc; inherited docs stay
    assert "    answer_order = 'front_first'  (Literal['front_first', 'back_first'])\n" in queue
    assert "length = 128  (int)  # symbols per document (padded); must be >= 2 * n_ops" in queue


def test_preview_prints_decoded_items(capsys):
    assert main(["generate", "stack", "--preview", "2", "--set", "n_ops=8", "--set", "length=16"]) == 0
    out = capsys.readouterr().out
    assert out.count("--- item") == 2 and "answers:" in out and "pop" in out and "meta:" in out


def test_generate_reserved_and_text(tmp_path, capsys, number_tokenizer):
    out = tmp_path / "q"
    assert main(["generate", "queue", "--tokens", "2k", "--out", str(out), "--seq-len", "64", "--quiet",
                 "--set", "n_ops=16", "--workers", "2"]) == 0
    s = ShardSet(out)
    assert s.row_len == 65 and len(s) == 31 and s.manifest["source"]["config"]["length"] == 65
    save_tokenizer(number_tokenizer, tmp_path / "tok")
    out2 = tmp_path / "d"
    assert main(["generate", "--preset", "dyck_hu2025", "--tokens", "3000", "--out", str(out2), "--seq-len", "256",
                 "--tokenizer", str(tmp_path / "tok"), "--quiet"]) == 0
    s = ShardSet(out2)
    assert s.manifest["render"] == "text" and s.manifest["source"]["config"]["length"] == 128
    assert s.manifest["source"]["config"]["p_open"] == 0.51
    assert np.all(s.rows(range(len(s)))[:, -1] == 0)  # one document + EOS per row


def test_user_errors_name_the_field(tmp_path, capsys):
    assert main(["generate", "stack", "--tokens", "1000", "--out", str(tmp_path / "x"), "--set", "n_ops=99",
                 "--set", "length=100", "--no-exact-fill"]) == 2
    assert "length:" in capsys.readouterr().err
    assert main(["generate", "stak", "--preview", "1"]) == 2
    assert "did you mean 'stack'" in capsys.readouterr().err
    assert main(["generate", "nca", "--tokens", "1000", "--out", str(tmp_path / "y"), "--render", "text"]) == 2
    assert "tokenizer" in capsys.readouterr().err
    assert main(["generate", "set", "--out", str(tmp_path / "z")]) == 2
    assert "tokens" in capsys.readouterr().err
    assert not any(p.name in ("x", "y", "z") for p in tmp_path.iterdir())


def test_generate_with_an_hf_tokenizer_folder_uses_its_eos_and_size(tmp_path, hf_tokenizer):
    """--tokenizer pointing at an HF tokenizer (Mistral style: </s> = 2 ends documents, <unk> = 0 does not):
    symbols go after len(tokenizer) and every document ends with its EOS."""
    from transformers import PreTrainedTokenizerFast

    folder = hf_tokenizer("mistral")
    n = len(PreTrainedTokenizerFast.from_pretrained(str(folder)))
    out = tmp_path / "d"
    assert main(["generate", "shuffle_dyck", "--tokens", "2k", "--out", str(out), "--seq-len", "64", "--quiet",
                 "--set", "k=4", "--tokenizer", str(folder), "--render", "reserved"]) == 0
    rows = ShardSet(out).rows(range(len(ShardSet(out))))
    assert set(np.unique(rows[rows < n])) == {2} and rows.max() == n + 7 and (rows[:, -1] == 2).all()
