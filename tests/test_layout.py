import json
import re
from pathlib import Path

import pytest

from preschool import layout
from preschool.errors import DataError
from preschool.layout import (checkpoint_dir, evals_dir, final_checkpoint, list_checkpoints, read_metrics, run_dir,
                              step_dirname, step_of)


def test_paths_of_an_experiment_and_a_run(tmp_path):
    run = run_dir(tmp_path, "ppt", 3)
    assert run == tmp_path / "arms" / "ppt" / "seed3"
    assert step_dirname(120) == "step-00000120" and step_of("step-00000120") == 120 and step_of(".tmp-x") is None
    assert checkpoint_dir(run, 7) == run / "checkpoints" / "step-00000007"
    assert evals_dir(run, 7) == run / "evals" / "step-00000007"


def test_checkpoints_sorted_by_step_and_temp_folders_ignored(tmp_path):
    with pytest.raises(DataError, match="no checkpoints/"):
        list_checkpoints(tmp_path)
    assert list_checkpoints(tmp_path, required=False) == []
    with pytest.raises(DataError, match="no checkpoints"):
        final_checkpoint(tmp_path)
    for step in (100, 5, 20):
        checkpoint_dir(tmp_path, step).mkdir(parents=True)
    (tmp_path / "checkpoints" / ".step-00000200.tmp").mkdir()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [5, 20, 100]
    assert final_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 100)


def test_read_metrics_survives_a_line_cut_by_a_crash(tmp_path):
    rows = [{"event": "train", "step": 1, "loss": 3.0}, {"event": "val", "step": 1, "val/a": 2.0}]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "metrics.jsonl").write_text(text + '{"event": "val", "st')
    assert read_metrics(tmp_path) == rows
    assert read_metrics(tmp_path / "metrics.jsonl", event="val") == rows[1:]


def test_read_metrics_corruption_inside_the_file_names_the_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"event": "val", "step": 1}\nnot json\n{"event": "val", "step": 2}\n')
    with pytest.raises(DataError, match=r"metrics.jsonl:2"):
        read_metrics(tmp_path)


def test_read_metrics_missing_file(tmp_path):
    assert read_metrics(tmp_path) == []
    with pytest.raises(DataError, match="no metrics.jsonl"):
        read_metrics(tmp_path, missing_ok=False)


def test_device_names_resolve_once_for_trainer_and_evaluators():
    import torch

    from preschool.device import resolve_device
    from preschool.errors import ConfigError

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="device"):
        resolve_device("not-a-device")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            resolve_device("cuda:0")


def test_a_cuda_device_in_use_is_the_processs_current_one(monkeypatch):
    """Triton kernels (Liger's fused loss) launch on the current CUDA device, not on their tensors': a run on
    ``cuda:1`` makes cuda:1 current, or they would run on cuda:0 with cuda:1's memory. A CPU run sets none."""
    import torch

    from preschool.device import use_device

    made_current = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", made_current.append)
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert use_device("cuda:1") == torch.device("cuda", 1) and made_current == [torch.device("cuda", 1)]
    assert use_device("cuda") == torch.device("cuda", 2) and made_current[-1] == torch.device("cuda", 2)
    assert use_device("cpu") == torch.device("cpu") and len(made_current) == 2


def test_named_salts_keep_the_values_existing_data_was_made_with():
    import zlib

    from preschool import seeds

    # a changed salt silently changes every dataset built with it: these values are frozen
    assert seeds.L2T_DOCUMENT == zlib.crc32(b"l2t-document") and seeds.salt("storybook") == seeds.STORYBOOK
    assert (seeds.MIXTURE_LABELS, seeds.VAL_SEED_OFFSET, seeds.EMBEDDING_REINIT, seeds.COMPARTMENT_VECTORS) == \
        (1, 1_000_003, 7, 7919)
    named = [v for k, v in vars(seeds).items() if k.isupper() and v > 10_000_000]
    assert len(named) == len(set(named))  # no two purposes share a stream


# every file name a run, an experiment folder or its data folder gets, as its literal; only layout.py spells them
_RUN_FILE_LITERALS = re.compile(
    r"""["'](DONE|config\.yaml|metrics\.jsonl|wandb_id\.txt|meta\.json|model\.safetensors|trainer_state\.pt"""
    r"""|checksums\.json|sharded|summary\.json|items\.jsonl)["']"""
    r"""|\bdata["']?\s*/\s*["']manifest\.json["']"""
    # an experiment folder's files, a dataset's record and the tokenizer folder beside datasets: as a quoted
    # name, a path joined with `/`, a markdown link into plots/ or a manifest's relative path (prose in
    # docstrings and messages names them in backticks, which is not a path)
    r"""|["'](experiment\.yaml|dataset\.json|results\.json|report\.md|plots/?)["']"""
    r"""|/\s*["']tokenizer["']|["']path["']\s*:\s*["']tokenizer["']|\(plots/|["']\.\./tokenizer["']""")

def _spellers() -> dict[str, list[str]]:
    src = Path(layout.__file__).parent
    out = {}
    for p in sorted(src.rglob("*.py")):
        rel = p.relative_to(src).as_posix()
        hits = [f"{i}: {line.strip()}" for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                if _RUN_FILE_LITERALS.search(line.split("#", 1)[0])]
        if hits and rel != "layout.py":
            out[rel] = hits
    return out


def test_run_folder_file_names_are_spelled_in_layout_only():
    assert _spellers() == {}


def test_the_literal_grep_sees_each_name():
    for name in ("DONE", "config.yaml", "meta.json", "trainer_state.pt", "checksums.json", "sharded", "summary.json",
                 "items.jsonl", "metrics.jsonl", "wandb_id.txt", "model.safetensors"):
        assert _RUN_FILE_LITERALS.search(f'run / "{name}"'), name
    assert _RUN_FILE_LITERALS.search('out / "data" / "manifest.json"')
    assert _RUN_FILE_LITERALS.search('data / "manifest.json"')  # data = layout.data_dir(out)
    assert not _RUN_FILE_LITERALS.search('folder / "manifest.json"')  # a shard set's own manifest is data's
    for spelled in ('out / "experiment.yaml"', "dpath / 'dataset.json'", 'write_json(out / "results.json", r)',
                    'out / "report.md"', 'out / "plots"', 'f"[{p}](plots/{p})"', 'data_dir / "tokenizer"',
                    '{"path": "tokenizer", "sha256": h}', 'tok_name = "../tokenizer"'):
        assert _RUN_FILE_LITERALS.search(spelled), spelled
    for prose in ('"""Write ``report.md`` and ``results.json``."""', 'ConfigError("tokenizer", "no tokenizer")',
                  'manifest["tokenizer"]["vocab_size"]', '{"tokenizer": thash}'):
        assert not _RUN_FILE_LITERALS.search(prose), prose


def test_manifest_file_name_is_spelled_in_layout_only():
    # issue #39 item 7: every manifest.json (a shard set's, a dataset's, prepare's, a sharded checkpoint's) is
    # layout.MANIFEST; a string constant of the name anywhere else in the package is a second spelling
    import ast

    src = Path(__file__).resolve().parents[1] / "src" / "preschool"
    spelled = [f"{p.relative_to(src)}:{n.lineno}" for p in sorted(src.rglob("*.py")) if p.name != "layout.py"
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
               if isinstance(n, ast.Constant) and n.value == "manifest.json"]
    assert spelled == []


def test_auto_refuses_the_cpu_in_a_slurm_job_given_gpus(monkeypatch):
    """Issue 48 item 2: a Slurm job given GPUs whose torch sees no CUDA (a CPU-only wheel, a driver mismatch)
    trained on the CPU without a word and COMPLETED. Under a GPU allocation ``auto`` refuses the CPU in one
    line naming the allocation; ``cpu`` said outright still trains there, and a CPU job's ``auto`` is the CPU."""
    import torch

    from preschool.device import resolve_device
    from preschool.errors import ConfigError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for var in ("SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "2")
    with pytest.raises(ConfigError) as e:
        resolve_device("auto", "train.device")
    said = str(e.value)
    assert said.startswith("train.device: ") and "\n" not in said
    assert "SLURM_GPUS_ON_NODE=2" in said and "no CUDA" in said and "device: cpu" in said
    assert resolve_device("cpu") == torch.device("cpu")  # the CPU asked for by name is the user's choice
    monkeypatch.delenv("SLURM_GPUS_ON_NODE")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0,1")  # the batch step's variable (Slurm sets both in a GPU job)
    with pytest.raises(ConfigError, match="SLURM_JOB_GPUS=0,1"):
        resolve_device("auto")
    monkeypatch.delenv("SLURM_JOB_GPUS")  # a CPU job (--gpus-per-node 0): auto is the CPU
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "0")
    assert resolve_device("auto") == torch.device("cpu")
