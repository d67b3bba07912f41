"""Parts from outside the package: CONTRIBUTING's "Your own parts" recipe run from a temporary folder, an
installed distribution's entry point, one error line for a broken plug-in, and (slow) a run that uses a
plug-in part of every kind. Every command runs in its own process, as a user runs it, so the plug-ins never
reach the registries of the other tests."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

import preschool

SRC = Path(preschool.__file__).resolve().parent
CONTRIBUTING = SRC.parents[1] / "CONTRIBUTING.md"
OUTSIDE = re.compile(r"^Your parts[^`\n]*— `my_lab/(?P<file>\w+)\.py`.*?^```python\n(?P<code>.*?)^```", re.M | re.S)


def outside_recipes() -> dict[str, str]:
    """CONTRIBUTING's recipes for files outside the package: ``{file name: code}``."""
    return {f"{m['file']}.py": m["code"] for m in OUTSIDE.finditer(CONTRIBUTING.read_text(encoding="utf-8"))}


def outside_recipe() -> str:
    return outside_recipes()["parts.py"]


def preschool_cli(cwd: Path, *args: str, env: dict | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    """``preschool ARGS`` in a fresh process in ``cwd`` (the package of this checkout first on the path)."""
    env = dict(env or {})
    path = [str(SRC.parent), *filter(None, [env.pop("PYTHONPATH", "")])]
    full = {**os.environ, "PRESCHOOL_PLUGINS": "", **env, "PYTHONPATH": os.pathsep.join(path)}
    out = subprocess.run([sys.executable, "-c", "import sys; from preschool.cli import main; sys.exit(main())", *args],
                         cwd=cwd, env=full, capture_output=True, text=True, timeout=600)
    assert (out.returncode == 0) == ok, out.stdout + out.stderr
    return out


MICRO = {"seed": 0, "seeds": [0], "seq_len": 32, "workers": 1,
         "tokenizer": {"kind": "train", "vocab_size": 300, "sample_documents": 200},
         "train": {"batch_size": 4, "micro_batch_size": 4, "lr": 1e-3, "eval_every": 2, "checkpoint_every": 2,
                   "val_rows": 4, "log_every": 1}}


def test_the_contributing_recipe_runs_from_a_folder_outside_the_repository(tmp_path):
    """`plugins:` in the YAML (relative to the folder the command runs in, as every path is) brings the recipe's source and preset; `--plugins` its export
    format; experiment.yaml records the plug-in with the sha256 of its file."""
    lab = tmp_path / "my_lab"
    lab.mkdir()
    (lab / "parts.py").write_text(outside_recipe(), encoding="utf-8")
    exp = tmp_path / "exp" / "lab.yaml"
    exp.parent.mkdir()
    exp.write_text(yaml.safe_dump({
        "name": "lab", "out": str(tmp_path / "run"), "plugins": ["./my_lab/parts.py"], **MICRO,
        "corpora": {"rhymes": {"source": "my_source", "max_documents": 3000}},
        "data": {"pt": {"corpus": "rhymes", "tokens": 2048, "val_tokens": 128}},
        "model": {"preset": "my_preset"},
        "arms": [{"name": "a", "stages": [{"name": "pt", "data": "pt", "tokens": 256}]}]}))
    preschool_cli(tmp_path, "run", str(exp), "--only", "report", "--no-progress")
    saved = yaml.safe_load((tmp_path / "run" / "experiment.yaml").read_text())
    from preschool.io import sha256_file

    part = str((lab / "parts.py").resolve())
    assert saved["plugins"] == [part]
    assert saved["plugins_used"] == [{"plugin": part, "named_by": "plugins", "version": None,
                                      "sha256": sha256_file(lab / "parts.py")}]
    # every command sees the plug-ins of PRESCHOOL_PLUGINS (the export itself runs in the slow test below)
    usage = preschool_cli(tmp_path, "export", "--help", env={"PRESCHOOL_PLUGINS": "./my_lab/parts.py"}).stdout
    assert "one of: hf, megatron, my_format, nanotron, numpy" in " ".join(usage.split())
    # the same YAML read again from the run folder (absolute plug-in path, the old record dropped) validates
    preschool_cli(tmp_path, "plan", str(tmp_path / "run" / "experiment.yaml"))


def test_the_outside_recipe_for_a_generator_an_evaluator_and_a_section_loads_as_a_plugin(tmp_path):
    """CONTRIBUTING's `lab_parts.py` (absolute imports) from a folder outside: its generator generates, its
    evaluator and section are listed as the plug-in's (the slow run below uses all three)."""
    assert set(outside_recipes()) == {"parts.py", "lab_parts.py"}
    code = outside_recipes()["lab_parts.py"]
    assert "from ." not in code and "from preschool.synthetic.base import" in code
    (tmp_path / "my_lab").mkdir()
    (tmp_path / "my_lab" / "lab_parts.py").write_text(code, encoding="utf-8")
    named = ["--plugins", "./my_lab/lab_parts.py"]
    out = preschool_cli(tmp_path, "generate", "lab_repeat", "--preview", "2", *named).stdout
    rows = [ln.split(":", 1)[1].split() for ln in out.splitlines() if ln.strip().startswith("symbols:")]
    assert len(rows) == 2 and all(len(r) == 32 and r[:16] == r[16:] for r in rows) and rows[0] != rows[1]
    origin = f"[plug-in {(tmp_path / 'my_lab' / 'lab_parts.py').resolve()}]"
    evals = preschool_cli(tmp_path, "eval", "--list", *named).stdout
    assert re.search(rf"^lab_norms +v1 .*{re.escape(origin)}$", evals, re.M)


def _installed(site: Path, code: str, entry: str = "other = other_lab") -> Path:
    """``other_lab`` (``code`` as its ``__init__``), installed as distribution other-lab 0.3 in ``site``
    with a ``preschool.plugins`` entry point: what ``pip install`` leaves (a dist-info is enough)."""
    (site / "other_lab").mkdir(parents=True)
    (site / "other_lab" / "__init__.py").write_text(textwrap.dedent(code))
    info = site / "other_lab-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-lab\nVersion: 0.3\n")
    (info / "top_level.txt").write_text("other_lab\n")
    (info / "entry_points.txt").write_text(f"[preschool.plugins]\n{entry}\n")
    return site


EP_GENERATOR = '''
    """An installed plug-in: one generator."""
    from dataclasses import dataclass

    import numpy as np

    from preschool.synthetic.base import GENERATORS, Generator, GeneratorConfig, Item


    @dataclass
    class CountConfig(GeneratorConfig):
        length: int = 8


    @GENERATORS.register("ep_count", config=CountConfig)
    class Count(Generator):
        """0, 1, 2, ... (an installed generator)."""

        @property
        def vocab_size(self):
            return self.cfg.length

        def item(self, index):
            s = np.arange(self.cfg.length, dtype=np.int64)
            return Item(s, np.ones(self.cfg.length, dtype=bool), {})
'''


def test_an_installed_entry_point_is_found_by_every_command_and_listed_with_its_origin(tmp_path):
    site = _installed(tmp_path / "site", EP_GENERATOR)
    env = {"PYTHONPATH": str(site)}
    listing = preschool_cli(tmp_path, "generate", "--list", env=env).stdout
    line = next(ln for ln in listing.splitlines() if ln.startswith("ep_count:"))
    assert line.endswith("[plug-in other_lab (entry point 'other' of other-lab 0.3)]")
    assert re.search(r"^shuffle_dyck: .*\[preschool\]$", listing, re.M)
    preview = preschool_cli(tmp_path, "generate", "ep_count", "--preview", "1", env=env).stdout
    assert "symbols: 0 1 2 3 4 5 6 7" in preview
    evals = preschool_cli(tmp_path, "eval", "--list", env=env).stdout
    assert all(ln.endswith("[preschool]") for ln in evals.splitlines())


def test_a_plugin_that_fails_to_import_is_one_error_line_naming_it(tmp_path):
    (tmp_path / "broken.py").write_text("import json\n\nraise ValueError('no tasks today')\n")
    for args, env, named in (
            (["eval", "--list", "--plugins", "./broken.py"], {}, "--plugins: plug-in './broken.py'"),
            (["eval", "--list"], {"PRESCHOOL_PLUGINS": "broken.py"}, "PRESCHOOL_PLUGINS: plug-in 'broken.py'")):
        err = preschool_cli(tmp_path, *args, env=env, ok=False).stderr
        assert err.count("\n") == 1 and named in err and "failed to import: ValueError: no tasks today" in err
        assert f"({tmp_path / 'broken.py'}:3)" in err  # the plug-in's line that raised
    err = preschool_cli(tmp_path, "eval", "--list", "--plugins", "my_lab.nothing", ok=False).stderr
    assert err.count("\n") == 1 and "no module named 'my_lab.nothing'" in err
    site = _installed(tmp_path / "site", "raise ImportError('needs a GPU library')\n")
    err = preschool_cli(tmp_path, "eval", "--list", env={"PYTHONPATH": str(site)}, ok=False).stderr
    assert err.count("\n") == 1 and "entry point 'other' of other-lab 0.3" in err and "needs a GPU library" in err
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: x\nplugins: [./missing_parts.py]\narms: []\n")
    err = preschool_cli(tmp_path, "plan", str(exp), ok=False).stderr
    assert err.count("\n") == 1 and "plugins[0]: plug-in './missing_parts.py': no such file or folder" in err


# ----------------------------------------------------------------------------- a run with a part of each kind

INSIDE = re.compile(r"^(?P<kind>[^\n`]+?) — `src/preschool/(?P<path>[\w/]+)\.py`:\n\n```python\n(?P<code>.*?)^```",
                    re.M | re.S)


def absolute_imports(path: str, code: str) -> str:
    """An inside recipe (at ``src/preschool/<path>.py``) as a file outside: each relative import made absolute."""
    package = ["preschool", *path.split("/")[:-1]]

    def absolute(m: re.Match) -> str:
        up = len(m["dots"]) - 1
        base = package[:len(package) - up]
        return f"from {'.'.join(base + ([m['rest']] if m['rest'] else []))} import"

    return re.sub(r"^from (?P<dots>\.+)(?P<rest>[\w.]*) import", absolute, code, flags=re.M)


def lab_package(root: Path) -> Path:
    """A plug-in package with one part of every kind: the outside recipe and each inside recipe of
    CONTRIBUTING.md, moved out of the package."""
    lab = root / "my_lab"
    lab.mkdir(parents=True)
    (lab / "__init__.py").write_text('"""My lab\'s parts for preschool."""\n')
    for file, code in outside_recipes().items():
        (lab / file).write_text(code)
    for m in INSIDE.finditer(CONTRIBUTING.read_text(encoding="utf-8")):
        code = absolute_imports(m["path"], m["code"])
        assert "from ." not in code
        (lab / f"{m['path'].rsplit('/', 1)[-1]}.py").write_text(code)
    return lab


def test_inside_recipes_moved_out_keep_their_meaning():
    assert absolute_imports("data/builders/my_builder", "from ...config import check\nfrom ..builder import X\n"
                            "from .base import Y\n") == ("from preschool.config import check\n"
                                                        "from preschool.data.builder import X\n"
                                                        "from preschool.data.builders.base import Y\n")


@pytest.mark.slow
def test_a_run_uses_a_plugin_part_of_every_kind(tmp_path):
    lab = lab_package(tmp_path / "repo")
    exp = tmp_path / "repo" / "lab.yaml"
    exp.write_text(yaml.safe_dump({  # run from tmp_path: every relative path is the working folder's
        "name": "lab", "out": str(tmp_path / "run"), "plugins": ["./repo/my_lab"], **MICRO,
        "seq_len": 128, "corpora": {"rhymes": {"source": "my_source", "max_documents": 5000},
                                    "stories": {"source": "storybook", "seed": 0}},
        "data": {"pt": {"corpus": "rhymes", "tokens": 4096, "val_tokens": 512},
                 "copy": {"generator": "my_generator", "params": {"length": 33, "values": 5}, "render": "text",
                          "tokens": 1024, "val_tokens": 256},
                 "l2t": {"corpus": "stories", "l2t": {"l2t": {"tasks": ["my_task"], "min_num_words": 0,
                                                                 "task_params": {"my_task": {"min_num_words": 0}}},
                                                         "raw_ratio": 0.0},
                         "tokens": 1024, "val_tokens": 0},
                 "rep": {"my_builder": "the cat sat on the mat.", "tokens": 1024, "val_tokens": 0},
                 "small": {"kind": "my_kind", "source": "pt", "params": {"rows": 8}},
                 "lab": {"generator": "lab_repeat", "params": {"length": 32, "values": 5}, "render": "text",
                         "tokens": 1024, "val_tokens": 256}},
        "model": {"preset": "my_preset"},
        "arms": [{"name": "a", "callbacks": {"my_callback": {"prefix": "run_"}},
                  "stages": [{"name": "ppt", "data": "copy", "tokens": 256, "counts_as_pt": False},
                             {"name": "pt", "data": {"pt": 1.0, "l2t": 1.0, "rep": 1.0, "small": 1.0,
                                                     "lab": 1.0},
                              "tokens": 512}]}],
        "evals": [{"name": "my_evaluator"}, {"name": "lab_norms"}],
        "report": {"sections": {"my_section": {"min_runs": 1}}}}))
    preschool_cli(tmp_path, "run", str(exp), "--no-progress")
    run = tmp_path / "run"
    results = json.loads((run / "results.json").read_text())
    assert results["sections"]["my_section"]["a"]["runs"] == 1
    assert results["sections"]["lab_norms_table"]["a"] > 0  # the outside evaluator's section, switched on by it
    assert "## Embedding norm at the end" in (run / "report.md").read_text()
    metrics = [json.loads(ln) for ln in (run / "arms" / "a" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert any(r.get("run_arm") == "a" and r.get("run_seed") == 0 for r in metrics)  # the callback
    evals = sorted((run / "arms" / "a" / "seed0" / "evals").glob("step-*/my_evaluator/summary.json"))
    assert evals and json.loads(evals[-1].read_text())["metrics"]["params_m"] > 0  # preset's model, scored
    data = json.loads((run / "data" / "manifest.json").read_text())["datasets"]
    assert set(data) == {"pt", "copy", "l2t", "rep", "small", "lab"}
    from preschool.data.shards import ShardSet

    assert len(ShardSet(run / "data" / "small" / "train")) == 8  # the derived kind
    saved = yaml.safe_load((run / "experiment.yaml").read_text())
    assert [p["plugin"] for p in saved["plugins_used"]] == [str(lab.resolve())]
    # the export format, named for the command
    out = tmp_path / "exported"
    preschool_cli(tmp_path, "export", str(run / "data" / "pt"), "--format", "my_format", "--out", str(out),
                  "--plugins", str(lab))
    train = ShardSet(run / "data" / "pt" / "train")
    rows = [json.loads(line) for line in (out / "train" / "rows.jsonl").read_text().splitlines()]
    assert np.array_equal(np.asarray(rows), train.rows(range(len(train))))
    listing = preschool_cli(tmp_path, "generate", "--list", "--plugins", str(lab)).stdout
    assert re.search(rf"^my_generator: .*\[plug-in {re.escape(str(lab.resolve()))}\]$", listing, re.M)


# ----------------------------------------------------------------------------- what a plug-in may not do

PRESET = '''
from preschool.train.model import MODEL_PRESETS


@MODEL_PRESETS.register("micro"{override})
def micro():
    """1 layer, d=32: my own micro."""
    return {{"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
             "intermediate_size": 64, "rope_theta": 10000.0, "max_position_embeddings": 1024}}
'''

SHUFFLE_DYCK = '''
from preschool.synthetic.base import GENERATORS, Generator


@GENERATORS.register("shuffle_dyck")
class Mine(Generator):
    """Not the built-in."""
'''


def test_a_plugin_taking_a_builtin_name_is_refused_in_one_line_in_every_registry(tmp_path):
    (tmp_path / "my_micro.py").write_text(PRESET.format(override=""))
    (tmp_path / "my_dyck.py").write_text(SHUFFLE_DYCK)
    for file, what in (("my_micro.py", "model preset 'micro'"), ("my_dyck.py", "generator 'shuffle_dyck'")):
        for args, env in ((["generate", "--list", "--plugins", f"./{file}"], {}),
                          (["eval", "--list"], {"PRESCHOOL_PLUGINS": f"./{file}"})):
            err = preschool_cli(tmp_path, *args, env=env, ok=False).stderr
            assert err.count("\n") == 1, err
            assert f"plug-in {tmp_path / file}: registers {what}, a built-in name" in err
            assert "override=True" in err


def test_a_plugin_that_overrides_a_builtin_on_purpose_is_used_and_recorded(tmp_path):
    (tmp_path / "my_micro.py").write_text(PRESET.format(override=", override=True"))
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "over", "out": str(tmp_path / "run"), "plugins": ["./my_micro.py"], **MICRO,
        "corpora": {"sb": {"source": "storybook", "seed": 0}},
        "data": {"pt": {"corpus": "sb", "tokens": 2048, "val_tokens": 128, "unit_tokens": 2048}},
        "model": {"preset": "micro"},
        "arms": [{"name": "a", "stages": [{"name": "pt", "data": "pt", "tokens": 256}]}]}))
    plan = preschool_cli(tmp_path, "plan", str(exp))
    assert "arm a: micro (qwen2, 1 x 32, 1/1 heads of 32, FFN 64," in plan.stdout  # the plug-in's shape
    preschool_cli(tmp_path, "run", str(exp), "--only", "report", "--no-progress")
    saved = yaml.safe_load((tmp_path / "run" / "experiment.yaml").read_text())
    (used,) = saved["plugins_used"]
    assert used["overrides"] == [{"registry": "model preset", "name": "micro"}]
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"Plug-in override: model preset `micro` is replaced by plug-in {tmp_path / 'my_micro.py'}" in report


def test_loading_a_plugin_prints_its_file_and_hash(tmp_path):
    from preschool.io import sha256_file

    (tmp_path / "my_parts.py").write_text("X = 1\n")
    err = preschool_cli(tmp_path, "generate", "--list", "--plugins", "./my_parts.py").stderr
    line = f"[preschool] loaded plug-in {tmp_path / 'my_parts.py'} (sha256 {sha256_file(tmp_path / 'my_parts.py')[:12]}"
    assert [ln for ln in err.splitlines() if ln.startswith("[preschool] loaded")] == [
        line + "; named by --plugins)"]


@pytest.mark.parametrize("name", ["json", "tokenizers", "safetensors", "matplotlib"])
def test_a_plugin_file_named_after_an_installed_or_standard_module_is_refused_before_import(tmp_path, name):
    # (in a sub-folder: `python -c` puts the working folder first on sys.path, so a json.py there would
    # shadow json before preschool starts; the `preschool` script does not)
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / f"{name}.py").write_text("raise SystemExit('this file must never run')\n")
    err = preschool_cli(tmp_path, "eval", "--list", "--plugins", f"./lab/{name}.py", ok=False).stderr
    assert err.count("\n") == 1 and f"would be imported as module {name!r}" in err and "rename it" in err
    # the same for a file of a folder plug-in (nothing of the folder runs)
    (folder / "a_part.py").write_text("raise SystemExit('nor this one')\n")
    err = preschool_cli(tmp_path, "eval", "--list", "--plugins", "./lab", ok=False).stderr
    assert err.count("\n") == 1 and f"would be imported as module {name!r}" in err


@pytest.mark.parametrize("code, said", [("import sys\nsys.exit(3)\n", "called sys.exit(3)"),
                                        ("raise SystemExit\n", "called sys.exit(None)"),
                                        ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt")])
def test_a_plugin_that_exits_at_import_is_one_line_and_exit_2(tmp_path, code, said):
    (tmp_path / "quitter.py").write_text(code)
    err = preschool_cli(tmp_path, "generate", "--list", "--plugins", "./quitter.py", ok=False)
    assert err.returncode == 2
    assert err.stderr.count("\n") == 1 and f"plug-in './quitter.py' {said} while being imported" in err.stderr


def test_every_registry_refuses_a_builtin_name_from_outside_the_package(tmp_path):
    """The rule lives in Registry.register, so it holds in every registry: a part registered from a module
    outside the package under the name of a built-in part is refused, naming that module's file, the
    registry and the name (checked in a fresh process: nothing is registered in this one)."""
    code = textwrap.dedent('''
        import gc, importlib, sys, types
        from preschool.registry import Registry
        from preschool.errors import ConfigError
        for m in ("preschool.cli", "preschool.commands.transform", "preschool.synthetic.base", "preschool.l2t.base",
                  "preschool.evals.base", "preschool.evals.minimal_pairs", "preschool.data.builder",
                  "preschool.data.export", "preschool.analysis.sections", "preschool.train.callbacks.registry",
                  "preschool.train.model", "preschool.train.flops", "preschool.corpora.base",
                  "preschool.corpora.storybook", "preschool.compartments.presentation"):
            importlib.import_module(m)
        registries = [o for o in gc.get_objects() if isinstance(o, Registry)]
        outside = types.ModuleType("my_outside_parts")
        outside.__file__ = sys.argv[1]
        sys.modules["my_outside_parts"] = outside
        for reg in sorted(registries, key=lambda r: r.kind):
            name = reg.names()[0]
            outside.reg, outside.name = reg, name
            try:
                exec("reg.register(name)(object())", outside.__dict__)
            except ConfigError as e:
                print(reg.kind, "|", e)
            else:
                print(reg.kind, "| accepted")
        ''')
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "my_outside_parts.py")], capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(SRC.parent),
                                                     "PRESCHOOL_PLUGINS": ""}).stdout
    rows = dict(line.split(" | ", 1) for line in out.strip().splitlines())
    assert {"generator", "generator preset", "l2t task", "evaluator", "dataset builder", "export format",
            "report section", "callback", "model preset", "GPU", "source", "storybook paradigm", "minimal-pairs preset",
            "command", "transform kind", "presentation"} <= set(rows)
    for kind, said in rows.items():
        assert said.startswith(f"plug-in {tmp_path / 'my_outside_parts.py'}: registers {kind} "), (kind, said)
        assert "a built-in name" in said and "override=True" in said


def test_a_plugin_adds_a_gpu_row_that_plan_uses(tmp_path):
    """A table row kind (GPUs) is a registry like the others: a plug-in file adds one, and `plan --gpu` takes it
    although the plug-in is loaded after the command line is parsed."""
    (tmp_path / "my_gpus.py").write_text(textwrap.dedent('''
        from preschool.train.flops import GIB, GPU, GPUS

        GPUS.register("made-up-x9")(GPU("Made-up X9", 100e12, 64 * GIB, "a test row", device_words=("x9",)))
        '''))
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "gpu", "out": str(tmp_path / "run"), **MICRO, "corpora": {"sb": {"source": "storybook", "seed": 0}},
        "data": {"pt": {"corpus": "sb", "tokens": 2048, "val_tokens": 128}}, "model": {"preset": "micro"},
        "arms": [{"name": "a", "stages": [{"name": "pt", "data": "pt", "tokens": 256}]}]}))
    plan = preschool_cli(tmp_path, "plan", str(exp), "--gpu", "made-up-x9", "--plugins", "./my_gpus.py").stdout
    assert "on 8 x Made-up X9, MFU 0.35" in plan and "peak 100 TFLOP/s and 64 GiB per device (a test row)" in plan
    err = preschool_cli(tmp_path, "plan", str(exp), "--gpu", "made-up-x8", "--plugins", "./my_gpus.py", ok=False).stderr
    assert err.splitlines()[-1].startswith("preschool plan: error: --gpu: unknown GPU 'made-up-x8'; did you mean")
