"""One discovery rule: a part is one new file. Each recipe of CONTRIBUTING.md ("Where a new part goes") is
written into its real package under a fresh name; its registry must find it on first use (nothing else
edited, nothing imported by the test) and the part must work. Plug-in parts are found the same way."""

import importlib
import re
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import preschool
from preschool.errors import ConfigError

SRC = Path(preschool.__file__).resolve().parent
CONTRIBUTING = SRC.parents[1] / "CONTRIBUTING.md"
RECIPE = re.compile(r"^(?P<kind>[^\n`]+?) — `src/preschool/(?P<path>[\w/]+)\.py`:\n\n```python\n(?P<code>.*?)^```",
                    re.M | re.S)


def recipes() -> dict[str, tuple[str, str]]:
    """``{kind: (path under src/preschool without .py, code)}`` as CONTRIBUTING.md gives them."""
    return {m["kind"]: (m["path"], m["code"]) for m in RECIPE.finditer(CONTRIBUTING.read_text(encoding="utf-8"))}


def registry_of(kind: str):
    from preschool.analysis.sections import SECTIONS
    from preschool.data.builder import DATASET_BUILDERS
    from preschool.evals import EVALUATORS
    from preschool.l2t.base import L2T_TASKS
    from preschool.synthetic import GENERATORS
    from preschool.corpora.base import SOURCES
    from preschool.train.callbacks.registry import CALLBACKS
    from preschool.train.model import MODEL_PRESETS

    return {"Model preset": MODEL_PRESETS, "Text source": SOURCES, "Generator": GENERATORS, "L2T task": L2T_TASKS, "Evaluator": EVALUATORS,
            "Dataset builder": DATASET_BUILDERS, "Derived dataset kind": DATASET_BUILDERS, "Report section": SECTIONS,
            "Report section for an evaluator": SECTIONS, "Trainer callback": CALLBACKS}[kind]


@pytest.fixture
def drop(monkeypatch):
    """``drop(registry, rel_path, code) -> name``: write ``code`` as a new module of the real package (a fresh
    stem replacing the file's own), make the registry look again; everything is removed afterwards."""
    dropped: list[tuple[Path, str]] = []

    def put(registry, rel: str, code: str) -> str:
        registry.discover()  # the modules already there stay imported, so the copy below must hold their parts
        stem = rel.rsplit("/", 1)[-1]
        name = f"{stem}_{uuid.uuid4().hex[:8]}"
        path = SRC / f"{rel.rsplit('/', 1)[0]}/{name}.py"
        module = "preschool." + str(path.relative_to(SRC).with_suffix("")).replace("/", ".")
        dropped.append((path, module))
        path.write_text(code.replace(stem, name), encoding="utf-8")
        importlib.invalidate_caches()
        # a fresh view of the registry: forgets what this test adds, looks at the package's modules again
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_discovered", False)
        assert module not in sys.modules  # only the registry's own discovery may import it
        return name

    yield put
    for path, module in dropped:
        path.unlink(missing_ok=True)
        for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


def test_contributing_has_a_one_file_recipe_for_every_kind_of_part():
    assert set(recipes()) == {"Generator", "L2T task", "Evaluator", "Dataset builder", "Derived dataset kind",
                              "Report section", "Report section for an evaluator", "Trainer callback",
                              "Model preset", "Text source"}


def test_a_new_generator_file_is_found_and_generates(drop):
    reg = registry_of("Generator")
    name = drop(reg, *recipes()["Generator"])
    assert name in reg.names()
    gen = reg.build(name, {"length": 33, "values": 5})
    items = [gen.item(i) for i in range(6)]
    for it in items:
        assert len(it.symbols) == 33 and it.symbols.max() < gen.vocab_size
        gen.check(it)
    assert gen.item(2).symbols.tobytes() == items[2].symbols.tobytes()
    bad = items[0]
    bad.symbols[-2] = (bad.symbols[-2] + 1) % 5
    with pytest.raises(AssertionError):
        gen.check(bad)
    with pytest.raises(ConfigError, match="length"):
        reg.build(name, {"length": 2})


def test_a_new_l2t_task_file_is_found_and_makes_pairs(drop):
    from preschool.config import from_dict
    from preschool.l2t.base import Chunk, Context
    from preschool.l2t.transform import L2TConfig

    reg = registry_of("L2T task")
    name = drop(reg, *recipes()["L2T task"])
    pair = reg.build(name, {"min_num_words": 0}).make(Chunk(["The cat sat.", "A dog ran."]),
                                                     np.random.default_rng(0), Context())
    assert (pair.prompt, pair.completion) == ("ran. dog A sat. cat The", "The cat sat. A dog ran.")
    assert from_dict(L2TConfig, {"tasks": [name, "one"]}).tasks == [name, "one"]  # a YAML can name it


def test_a_new_evaluator_file_is_found_and_scores_a_model(drop):
    import torch

    reg = registry_of("Evaluator")
    name = drop(reg, *recipes()["Evaluator"])
    model = torch.nn.Linear(4, 3)
    assert reg.build(name, {}).evaluate(model, None).metrics == {"params_m": 15 / 1e6}
    model.bias.requires_grad_(False)
    assert reg.build(name, {"trainable_only": True}).evaluate(model, None).metrics == {"params_m": 12 / 1e6}


def test_a_new_dataset_builder_file_is_found_read_from_yaml_and_prepared(drop, tmp_path, capsys):
    """The recipe's one file: its spec variant is what a YAML naming its key reads, with its own fields only,
    and prepare builds, records and reuses the dataset like any other."""
    from preschool.config import from_dict
    from preschool.corpora.base import CorpusConfig
    from preschool.data.builder import DatasetSpec, builder_of
    from preschool.data.prepare import prepare_data
    from preschool.data.shards import ShardSet
    from preschool.data.tokenizer import TokenizerConfig, encode_batch, load_tokenizer, special_ids

    reg = registry_of("Dataset builder")
    name = drop(reg, *recipes()["Dataset builder"])
    text = "the cat sat on the mat."
    spec = from_dict(DatasetSpec, {name: text, "tokens": 6 * 33, "val_tokens": 33}, "data.rep")
    assert type(spec).__name__ == "MyBuilderSpec" and builder_of(spec).registry_name == name
    with pytest.raises(ConfigError, match=f"does not apply to a {name} dataset") as e:
        from_dict(DatasetSpec, {name: text, "tokens": 33, "render": "reserved"}, "data.rep")
    assert e.value.field == "data.rep.render"
    with pytest.raises(ConfigError, match="give a text") as e:
        from_dict(DatasetSpec, {name: " ", "tokens": 33}, "data.rep")
    assert e.value.field == f"data.rep.{name}"

    def prepare():
        return prepare_data(tmp_path, TokenizerConfig(vocab_size=300, sample_documents=100),
                            {"sb": CorpusConfig(source="storybook", seed=0)}, {"rep": spec}, seq_len=32,
                            progress=False)

    manifest = prepare()
    tok = load_tokenizer(tmp_path / "tokenizer")
    doc = [*encode_batch(tok, [text])[0], special_ids(tok).eos]
    train = ShardSet(tmp_path / "rep" / "train")
    assert len(train) == 6 and len(ShardSet(tmp_path / "rep" / "val")) == 1
    stream = train.rows(range(6)).reshape(-1).tolist()
    assert stream == (doc * (len(stream) // len(doc) + 1))[:len(stream)]
    assert manifest["datasets"]["rep"]["spec"] == {"tokens": 6 * 33, "val_tokens": 33,
                                                   "unit_tokens": spec.unit_tokens, name: text}
    capsys.readouterr()
    assert prepare() == manifest and "rep: up to date" in capsys.readouterr().out


def test_a_new_dataset_kind_file_is_found_and_builds(drop, tmp_path):
    from preschool.data.builders.derived import DerivedSpec
    from preschool.data.shards import ShardSet, ShardWriter

    reg = registry_of("Derived dataset kind")
    name = drop(reg, *recipes()["Derived dataset kind"])
    src = tmp_path / "base"
    rows = np.arange(24).reshape(6, 4) % 10
    for split, n in (("train", 6), ("val", 2)):
        with ShardWriter(src / split, 4, 10, arrays=["loss_mask"]) as w:
            w.add_rows(rows[:n], loss_mask=np.ones((n, 4), np.uint8))
    from preschool.data.builders.derived import kind_of

    kind = kind_of(DerivedSpec(kind=name, source="base", params={"rows": 3}), "data.small")
    written = kind.build(src, tmp_path / "small")
    assert sorted(written) == ["train", "val"]
    assert np.array_equal(ShardSet(tmp_path / "small" / "train").rows(range(3)), rows[:3])
    assert len(ShardSet(tmp_path / "small" / "train")) == 3 and len(ShardSet(tmp_path / "small" / "val")) == 2
    with pytest.raises(ConfigError, match=r"data\.small\.params\.rows"):
        kind_of(DerivedSpec(kind=name, source="base", params={"rows": 0}), "data.small")


def test_a_new_report_section_file_is_found_and_writes(drop, tmp_path):
    from preschool.analysis.sections import SectionContext, build_section

    reg = registry_of("Report section")
    name = drop(reg, *recipes()["Report section"])
    for arm, seed, last in (("a", 0, 7), ("a", 1, 5), ("b", 0, 3)):
        run = tmp_path / "arms" / arm / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text(f'{{"event": "train", "step": 1}}\n{{"event": "val", "step": {last}}}\n')
    ctx = SectionContext(tmp_path, {"arms": [{"name": "a"}, {"name": "b"}]}, ["a", "b"], [0, 1], "a")
    results, lines = build_section(name, {"min_runs": 2}).write(ctx)
    inputs = results.pop("inputs")  # what it read of the runs, kept in results.json for a re-render
    assert results == {"a": {"runs": 2, "last_step": 7}, "b": {"runs": 1, "last_step": 3}}
    assert lines[-1] == "| b | 1 (too few) | 3 |"
    # re-rendered from results.json alone (the run folders gone): the same section
    import shutil

    shutil.rmtree(tmp_path / "arms")
    stored = {"sections": {name: {**results, "inputs": inputs}}}
    again = SectionContext(tmp_path, ctx.config, ["a", "b"], [0, 1], "a", stored=stored)
    assert build_section(name, {"min_runs": 2}).write(again) == ({**results, "inputs": inputs}, lines)


def test_a_new_report_section_for_an_evaluator_appears_once_it_has_results(drop, tmp_path):
    """The recipe's section file joins write_report (report.py untouched) exactly when its evaluator ran."""
    import json

    from preschool.analysis.report import write_report
    from preschool.evals.base import EvalResult
    from preschool.evals.depo import DepoEval
    from preschool.experiment import load_experiment
    from preschool.layout import checkpoint_dir, evals_dir, metrics_path, run_dir

    name = drop(registry_of("Report section for an evaluator"), *recipes()["Report section for an evaluator"])
    cfg = load_experiment(SRC.parents[1] / "examples" / "quickstart.yaml", [f"out={tmp_path}", "evals=[]"])
    runs = {arm.name: run_dir(tmp_path, arm.name, 0) for arm in cfg.cfg.arms}
    for run in runs.values():
        metrics_path(run).parent.mkdir(parents=True)
        metrics_path(run).write_text(json.dumps({"event": "val", "step": 2, "tokens": 64, "pt_tokens": 64,
                                                 "stage": "pt", "val/pt": 4.0}) + "\n")
    write_report(cfg)
    assert "## DEPO at the end" not in (tmp_path / "report.md").read_text()  # depo never ran: no section
    assert json.loads((tmp_path / "results.json").read_text())["sections"] == {}

    class Scored(DepoEval):  # what depo writes, without a model
        def setup(self):
            return ""

        def evaluate(self, model, tokenizer):
            return EvalResult(metrics={"acc": self.acc})

    for i, run in enumerate(runs.values()):
        checkpoint_dir(run, 2).mkdir(parents=True)
        ev = Scored(None)
        ev.acc = 0.25 * i
        ev.run(None, None, evals_dir(run, 2) / "depo")
    write_report(cfg)
    text = (tmp_path / "report.md").read_text()
    assert "## DEPO at the end" in text and "| ppt_dyck | depo/acc | 0.250 |" in text
    assert json.loads((tmp_path / "results.json").read_text())["sections"][name] == {
        "pt_only": {"depo/acc": 0.0}, "ppt_dyck": {"depo/acc": 0.25}, "ppt_dyck_reinit": {"depo/acc": 0.5}}


def test_a_new_callback_file_is_found_and_an_arm_can_name_it(drop, tmp_path):
    from preschool.train.callbacks.registry import CallbackContext, build_callbacks

    reg = registry_of("Trainer callback")
    name = drop(reg, *recipes()["Trainer callback"])
    ctx = CallbackContext(arm="a", seed=3, datasets={}, stage_datasets=[], data_dir=tmp_path)
    (cb,) = build_callbacks({name: {"prefix": "run_"}}, ctx, "arms[0].callbacks")
    row = {"step": 1}
    cb.on_log(None, row)
    assert row == {"step": 1, "run_arm": "a", "run_seed": 3}


def test_a_new_preset_file_is_found_and_builds_its_shape(drop):
    from preschool.train.model import ModelConfig, describe

    reg = registry_of("Model preset")
    name = drop(reg, *recipes()["Model preset"])
    assert name in reg.names()
    desc = describe(ModelConfig(preset=name), 300)
    assert (desc["hidden_size"], desc["layers"], desc["heads"]) == (48, 2, 3)


def test_a_new_source_file_is_found_and_read_by_iter_documents(drop, tmp_path):
    from preschool.corpora.sources import iter_documents

    reg = registry_of("Text source")
    name = drop(reg, *recipes()["Text source"])
    (tmp_path / "lines.txt").write_text("The cat sat.\n\nA dog ran.\n", encoding="utf-8")
    docs = list(iter_documents({"source": name, "path": str(tmp_path / "lines.txt")}))
    assert [(d.id, d.text) for d in docs] == [("lines.txt:1", "The cat sat."), ("lines.txt:3", "A dog ran.")]
    with pytest.raises(ConfigError, match="reads one text file"):
        list(iter_documents({"source": name, "path": str(tmp_path)}))


NOTES_FORMAT = '''"""my_notes: `.notes` files read as plain text, and by `auto` too (after the built-in formats)."""

from ..base import SOURCES, CorpusConfig
from .text import TextSource


@SOURCES.register("my_notes", config=CorpusConfig)
class MyNotes(TextSource):
    """Plain-text `.notes` files."""

    extensions = (".notes",)
    auto_order = 10
'''


def test_a_new_file_format_source_joins_auto_from_its_own_file(drop, tmp_path):
    from preschool.corpora.base import ReadStats
    from preschool.corpora.sources import iter_documents

    (tmp_path / "a.txt").write_text("A story.\n")
    (tmp_path / "b.notes").write_text("A note.\n")
    stats = ReadStats()
    assert [d.id for d in iter_documents({"source": "auto", "path": str(tmp_path)}, stats)] == ["a.txt"]
    assert stats.drops["unsupported_file"] == 1
    name = drop(registry_of("Text source"), "corpora/sources/my_notes", NOTES_FORMAT)
    docs = list(iter_documents({"source": "auto", "path": str(tmp_path)}))
    assert [(d.id, d.text.strip()) for d in docs] == [("a.txt", "A story."), ("b.notes", "A note.")]
    assert [d.id for d in iter_documents({"source": name, "path": str(tmp_path)})] == ["b.notes"]


GPU_ROW = '''"""my_gpu: a made-up accelerator."""

from ..flops import GIB, GPU, GPUS

GPUS.register("my_gpu")(GPU("Made-up X9", 100e12, 64 * GIB, "a test row", device_words=("made-up", "x9")))
'''

COMMAND = '''"""`preschool my_command`: the report command under another name."""

from .report import add_arguments, run  # noqa: F401

HELP = "the report, under another name"
ORDER = 75
'''


def test_a_new_gpu_file_is_a_plan_choice_and_names_its_device(drop):
    from preschool.train.flops import GPUS, gpu_for_device_name

    name = drop(GPUS, "train/gpus/my_gpu", GPU_ROW)
    assert name in GPUS.names() and GPUS[name].bf16_flops == 100e12
    assert gpu_for_device_name("Made-Up X9 PCIe") is GPUS[name]
    assert gpu_for_device_name("NVIDIA A100-SXM4-80GB") is GPUS["a100-80gb"]  # the most specific row
    assert gpu_for_device_name("NVIDIA A100-SXM4-40GB") is GPUS["a100-40gb"]
    assert gpu_for_device_name("Tesla T4") is None


def test_a_new_command_file_is_a_command(drop, capsys):
    from preschool.cli import COMMANDS, main

    name = drop(COMMANDS, "commands/my_command", COMMAND)
    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith(f"usage: preschool {name} ")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert name in capsys.readouterr().out


def test_a_module_that_fails_to_import_raises_every_time_and_private_ones_are_skipped(drop):
    reg = registry_of("Report section")
    drop(reg, "analysis/_my_helper", "raise RuntimeError('a private helper is never imported')\n")
    assert "plateau" in reg.names()  # the plug-in's sections are found too
    broken = drop(reg, "analysis/my_broken", "raise RuntimeError('broken part')\n")
    for _ in range(2):  # a broken part is never silently missing, not even on the next listing
        with pytest.raises(RuntimeError, match="broken part"):
            reg.names()
    with pytest.raises(RuntimeError, match="broken part"):
        reg.get(broken)  # nor when looked up by its file name


def test_every_registry_finds_its_parts_and_the_plugins_without_importing_torch():
    """Finding parts is cheap (a plug-in's torch modules load when used), so validating a config stays fast."""
    code = ("import sys\n"
            "from preschool.analysis.sections import SECTIONS\n"
            "from preschool.data.builder import DATASET_BUILDERS\n"
            "from preschool.evals import EVALUATORS\n"
            "from preschool.l2t.base import L2T_TASKS\n"
            "from preschool.synthetic import GENERATORS\n"
            "from preschool.train.callbacks.registry import CALLBACKS\n"
            "from preschool.plugins import checkpoint_hooks\n"
            "for r in (SECTIONS, CALLBACKS, GENERATORS, L2T_TASKS, EVALUATORS, DATASET_BUILDERS):\n"
            "    print(' '.join(r.names()))\n"
            "print(len(checkpoint_hooks()), sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    sections, callbacks, generators, tasks, evaluators, builders, last = out.strip().split("\n")
    # the core's evaluator sections and the plug-in's (found by module name)
    assert sections == ("after_stages arms audit_gap axes difference doses efficiency fields3 fields3_margin "
                        "final_stage ladder nonfinite overview phenomena phenomena_margin plateau results similarity slowdown "
                        "structural_ties verbatim_positions")  # the standard tables are sections too (analysis/standard_tables.py)
    assert callbacks == "compartment_model infonce"
    assert {"shuffle_dyck", "nca", "stack"} <= set(generators.split()) and len(tasks.split()) >= 14
    assert {"minimal_pairs", "heldout", "lm_eval"} <= set(evaluators.split())
    # one dataset registry: how prepare builds each dataset (data/builders/), the plug-in's derived kinds too
    assert builders == "compartmented corpus derived generator l2t shifted"
    assert last == "1 []"


def test_looking_a_part_up_by_name_imports_only_its_module():
    """The file name is the registry name, so a lookup imports that one module; listing imports them all."""
    code = ("import sys\n"
            "from preschool.synthetic import GENERATORS\n"
            "from preschool.evals import EVALUATORS\n"
            "from preschool.l2t.base import L2T_TASKS\n"
            "from preschool.analysis.sections import SECTIONS\n"
            "GENERATORS.build('stack', {}); EVALUATORS.get('heldout'); L2T_TASKS.get('typo')\n"
            "SECTIONS.get('verbatim_positions')\n"
            "for pkg in ('synthetic', 'evals', 'l2t.tasks', 'analysis', 'compartments'):\n"
            "    print(' '.join(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith(f'preschool.{pkg}.'))))\n"
            "GENERATORS.names()\n"
            "print('nca' in sys.modules.get('preschool.synthetic').__dict__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    synthetic, evals, tasks, analysis, compartments, listed = out.strip().split("\n")
    assert synthetic == "base stack" and evals == "base heldout" and tasks == "typo"
    # the section registry, the records it reads and the one section looked up; no plug-in module either
    assert analysis == "records sections verbatim_positions" and compartments == ""
    assert listed == "True"  # listing found every generator module
