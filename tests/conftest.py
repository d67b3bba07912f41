import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Property tests are reproducible by default: hypothesis derives its examples from each test's name
# (derandomize) and keeps no example database, so a run -- `make test`, `.ci/run` -- cannot fail by chance
# and a failure seen once is seen on every rerun. HYPOTHESIS_PROFILE=explore draws fresh random examples
# (and remembers failing ones in .hypothesis/) for hunting new bugs; pin what it finds with @example.
settings.register_profile("repro", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repro"))

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PRESCHOOL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real reference data (BLiMP, novels, verbatim lists), read by path; skip when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


# A shipped experiment shrunk to seconds on CPU: the micro model, seq_len 64, a few thousand tokens per
# dataset and 2,048 per stage, hub corpora swapped for the offline storybook, and the evaluators (checked
# for valid settings by ``check_evals``) replaced by a tiny local verbatim run. Everything else (arms,
# stages, schedules, groups, mixtures, derived datasets, callbacks, report sections) runs as shipped.
TINY_EVALS = ("evals=[{name: verbatim, params: {n_base_lists: 2, n_lists: 2, list_lengths: [3], "
              "intervening_words: [0], bootstrap_resamples: 10}}]")
STORYBOOK = "{source: storybook, seed: 0}"
MICRO_MODEL = ["model.preset=micro", "model.overrides={}", "seq_len=64"]
MICRO_BPE = ["tokenizer.vocab_size=300", "tokenizer.sample_documents=200"]


def micro_overrides(raw: dict, out: Path, per_stage: int = 2048, hf_tokenizer=None) -> list[str]:
    """``--set`` overrides that shrink the experiment ``raw`` (its YAML as a dict) to micro scale. A hub
    tokenizer (``kind: hf``) is swapped for a local one of its style (``hf_tokenizer``, the fixture; a
    Mistral one for a Mistral name, else Llama-3 / SmolLM3), keeping its special-token renames."""
    sets = [f"out={out}", "workers=1", *MICRO_MODEL, TINY_EVALS, "train.batch_size=8", "train.micro_batch_size=4",
            "train.checkpoint_every=2", "train.eval_every=2", "train.val_rows=4", "train.log_every=1"]
    tok = raw.get("tokenizer") or {}
    if tok.get("kind") == "hf":
        style = "mistral" if "mistral" in str(tok.get("name", "")).lower() else "llama3"
        sets += [f"tokenizer.name={hf_tokenizer(style)}", "tokenizer.vocab_size=null"]
    else:
        sets += MICRO_BPE
    sets += [f"corpora.{c}={STORYBOOK}" for c, spec in (raw.get("corpora") or {}).items()
             if spec.get("source") in ("hf", "datatrove_hf")]
    for name, d in raw["data"].items():
        if d.get("kind"):  # derived: built from its source, no budget of its own
            continue
        sets += [f"data.{name}.tokens=8000", f"data.{name}.val_tokens={1024 if d.get('val_tokens') else 0}"]
        if d.get("corpus"):  # a corpus is read in units of unit_tokens (2M by default): read what 9k tokens need
            sets.append(f"data.{name}.unit_tokens=4096")
        if d.get("exact_fill"):  # a 300-400 token BPE does not give every integer symbol the same token count
            sets.append(f"data.{name}.exact_fill=false")
    if "similarity" in ((raw.get("report") or {}).get("sections") or {}):
        sets.append("report.sections.similarity.rows=4")
    if raw.get("ladder"):  # every rung the micro model, its budgets the micro ones (x1, x1.5, ...)
        sets.append("ladder.tokens={rule: multiplier}")
        for k, _ in enumerate(raw["ladder"]["rungs"]):
            sets += [f"ladder.rungs.{k}.model={{preset: micro}}", f"ladder.rungs.{k}.train={{}}",
                     f"ladder.rungs.{k}.multiplier={1 + k / 2}", f"ladder.rungs.{k}.tokens=null"]
    return sets + [f"arms.{i}.stages.{j}.tokens={per_stage}"
                   for i, arm in enumerate(raw["arms"]) for j, _ in enumerate(arm["stages"])]


def check_evals(raw: dict, data_dir: Path) -> None:
    """The shipped evaluator settings are valid (``${data}`` resolved as the runner does), given the inputs a
    config asks the user to put in place: verbatim's ``verify_ppt`` preset gets one stimulus per published
    file in their layout (the real files are not in the repository)."""
    from preschool.evals import EVALUATORS
    from preschool.evals.runner import with_data_dir

    for i, e in enumerate(raw.get("evals") or []):
        params = with_data_dir(e.get("params") or {}, data_dir)
        if e["name"] == "verbatim" and params.get("preset") == "verify_ppt":
            write_armeni_inputs(Path(params["inputs_dir"]))
        EVALUATORS.build_config(e["name"], params, f"evals[{i}]")


def write_armeni_inputs(folder: Path) -> None:
    """Armeni et al.'s five ``categorized_lists_sce<k>_repeat`` files (text + per-word marker TSV), one stimulus each."""
    from preschool.evals.verbatim import VERIFY_PPT_SCENARIOS, VERIFY_PPT_STEM

    folder.mkdir(parents=True, exist_ok=True)
    line = "Tom made a list : cup , pan . Later he read it : cup , pan ."
    marks = [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3]
    for k in VERIFY_PPT_SCENARIOS:
        stem = folder / VERIFY_PPT_STEM.format(k)
        stem.with_suffix(".txt").write_text(line + "\n")
        Path(f"{stem}_markers.txt").write_text(f"stimid\tmarkers\tlist_len\tprompt_len\n0\t{marks}\t2\t1\n")


@pytest.fixture
def armeni_inputs():
    """:func:`write_armeni_inputs`, for tests that load a config reading the published verbatim inputs."""
    return write_armeni_inputs


def build_hf_tokenizer(folder: Path, style: str) -> Path:
    """A small byte-level BPE (trained on storybook text and integers) saved as an HF tokenizer folder
    whose special tokens are NOT id 0, as the papers' tokenizers:

    - ``llama3`` (SmolLM3 / Llama-3): specials appended after the vocabulary, ``<|begin_of_text|>``
      is BOS and prepended by the post-processor, ``<|im_end|>`` the chat EOS and PAD, and
      ``<|end_of_text|>`` (verify-ppt's document end) a special token that is not the EOS;
    - ``mistral`` (Mistral v0.3): ``<unk>`` = 0, ``<s>`` = 1 (BOS, prepended), ``</s>`` = 2 (EOS), no PAD.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from preschool.corpora import CorpusConfig, iter_documents

    texts = [d.text for _, d in zip(range(300), iter_documents(CorpusConfig(source="storybook", seed=0)))]
    texts += [" ".join(str(i) for i in range(k, k + 50)) for k in range(0, 1000, 50)]
    tok = Tokenizer(models.BPE(unk_token="<unk>" if style == "mistral" else None))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    front = ["<unk>", "<s>", "</s>"] if style == "mistral" else []
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=front, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if style == "llama3":
        tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|im_end|>"])
        bos, names = "<|begin_of_text|>", {"eos_token": "<|im_end|>", "pad_token": "<|im_end|>"}
    else:
        bos, names = "<s>", {"eos_token": "</s>", "unk_token": "<unk>"}
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, tok.token_to_id(bos))])
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, **names).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def hf_tokenizer(tmp_path_factory):
    """``hf_tokenizer(style)``: the folder of :func:`build_hf_tokenizer` ``style`` (built once per session)."""
    made: dict[str, Path] = {}

    def get(style: str) -> Path:
        if style not in made:
            made[style] = build_hf_tokenizer(tmp_path_factory.mktemp(f"tok-{style}"), style)
        return made[style]

    return get


@pytest.fixture
def micro_run(hf_tokenizer):
    """``micro_run(path, out, extra=(), command="run")``: run the experiment YAML at ``path`` shrunk by
    :func:`micro_overrides` (plus ``extra``) into ``out`` with ``preschool <command>``; returns the report
    once every arm x seed finished and it is written."""
    from preschool.cli import main
    from preschool.config import load_yaml

    def run(path: Path, out: Path, extra=(), command: str = "run") -> str:
        raw = load_yaml(path)
        sets = [*micro_overrides(raw, out, hf_tokenizer=hf_tokenizer), *extra]
        assert main([command, str(path), *[x for s in sets for x in ("--set", s)], "--no-progress"]) == 0
        check_evals(raw, out / "data")
        seeds = next((s.split("=", 1)[1] for s in extra if s.startswith("seeds=")), None)
        rungs = [out / "rungs" / r["name"] for r in (raw.get("ladder") or {}).get("rungs", [])] or [out]
        for root in rungs:
            for arm in raw["arms"]:
                for seed in (yaml.safe_load(seeds) if seeds else raw.get("seeds", [0])):
                    assert (root / "arms" / arm["name"] / f"seed{seed}" / "DONE").is_file(), (root, arm["name"], seed)
        report = (out / "report.md").read_text()
        assert "unfinished" not in report and "verbatim" in report
        return report

    return run


@pytest.fixture
def stop_at():
    """``stop_at(n)``: a callback that ends training after step ``n``, as a killed run would end there
    (its checkpoints and metrics are what a resume starts from)."""
    from preschool.train.callbacks.base import Callback

    class StopAt(Callback):
        def __init__(self, step):
            self.at = step

        def on_step_end(self, trainer):
            if trainer.step == self.at:
                trainer.should_stop = True

    return StopAt


@pytest.fixture
def die_at_unit(monkeypatch):
    """``die_at_unit(JobClass, k)``: ``JobClass.run`` raises KeyboardInterrupt when it starts unit ``k``, as a
    prepare killed while building that unit; returns a function that puts the real ``run`` back."""

    def arm(job_cls, k):
        real = job_cls.run

        def run(self, i, payload, out):
            if i == k:
                raise KeyboardInterrupt
            return real(self, i, payload, out)

        monkeypatch.setattr(job_cls, "run", run)
        return lambda: monkeypatch.setattr(job_cls, "run", real)

    return arm


@pytest.fixture
def file_reads(monkeypatch):
    """What the corpus file sources read from now on: ``.opened``, the paths of the files they open (Parquet
    included), and ``.starts``, ``(path, byte offset)`` where each line-by-line read of a file began."""
    import types

    import pyarrow.parquet as pq

    from preschool.corpora.sources import FileSource

    seen = types.SimpleNamespace(opened=[], starts=[])
    real_open, real_pf, real_lines = FileSource.open_binary, pq.ParquetFile, FileSource.raw_lines

    def open_binary(path):
        seen.opened.append(Path(path))
        return real_open(path)

    def parquet_file(path, *a, **kw):
        seen.opened.append(Path(path))
        return real_pf(path, *a, **kw)

    def raw_lines(self, path, offset=0, lineno=1):
        seen.starts.append((Path(path), offset))
        return real_lines(self, path, offset, lineno)

    monkeypatch.setattr(FileSource, "open_binary", staticmethod(open_binary))
    monkeypatch.setattr(pq, "ParquetFile", parquet_file)
    monkeypatch.setattr(FileSource, "raw_lines", raw_lines)
    return seen


@pytest.fixture
def spawn():
    """Factory: ``spawn(args, **popen_kwargs)`` starts ``args`` in a session of its own (a new process group)
    and returns the Popen. At teardown every group it started is stopped, pass or fail: SIGTERM, up to 40 s
    to exit (a Ray node drains for up to 30 s), then SIGKILL -- so daemons and their children never outlive
    the test, and only processes this test started are signalled."""
    import signal
    import subprocess
    import time

    procs: list[subprocess.Popen] = []

    def start(args, **kw):
        proc = subprocess.Popen([str(a) for a in args], start_new_session=True, **kw)
        procs.append(proc)
        return proc

    def signal_group(proc, sig):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the whole group has already exited
            pass

    yield start
    for proc in procs:
        signal_group(proc, signal.SIGTERM)
    end = time.monotonic() + 40
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        # the leader may be gone while its children (raylet, workers) still run: kill what is left
        signal_group(proc, signal.SIGKILL)
        proc.wait()


def _float_sum(rule: str):
    """``sum`` with one of the two float rules CPython has had: ``left_to_right`` (plain additions, up to 3.11)
    and ``compensated`` (3.12 on sums floats with compensation; here correctly rounded, ``math.fsum``).
    Anything that is not a sum of numbers with a float among them goes to the real ``sum``."""
    import builtins
    import math

    real = builtins.sum

    def patched(iterable, /, start=0):
        items = list(iterable)
        numbers = all(isinstance(x, (int, float)) for x in [start, *items])
        if not numbers or not any(isinstance(x, float) for x in [start, *items]):
            return real(items, start)
        if rule == "compensated":
            return math.fsum([start, *items])
        total = start
        for x in items:
            total = total + x
        return total

    return patched


@pytest.fixture(params=["left_to_right", "compensated"])
def builtin_float_sum(request, monkeypatch):
    """Run the test under each Python's rule for ``sum`` over floats (3.11 adds left to right, 3.12 on
    compensates), so a figure that went through ``sum`` shows up as a difference between Python versions."""
    import builtins

    monkeypatch.setattr(builtins, "sum", _float_sum(request.param))
    return request.param


def assert_same_checkpoint(a: Path, b: Path) -> None:
    """Two checkpoint folders hold the same files with the same bytes, except what cannot be written twice
    alike: ``trainer_state.pt`` (torch.save puts a serialization id drawn afresh into every file, and pickle
    shares a string between keys by object identity) is compared by content, tensor by tensor; an FSDP
    checkpoint's ``sharded/.metadata`` records the folder DCP wrote it in, so it is left out, and so are the
    hashes of both in ``checksums.json`` and ``sharded/manifest.json`` (the shards themselves are compared)."""
    import torch

    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()), (a, b)
    unique = {"trainer_state.pt", "sharded/.metadata", ".metadata", "sharded/manifest.json"}
    for rel in names:
        x, y = a / rel, b / rel
        if rel == "trainer_state.pt":
            _assert_same_tree(torch.load(x, weights_only=True), torch.load(y, weights_only=True), f"{b}/{rel}")
        elif rel in ("checksums.json", "sharded/manifest.json"):
            keep = lambda p: {k: v for k, v in json.loads(p.read_text())["files"].items() if k not in unique}
            assert keep(x) == keep(y), y
        elif rel != "sharded/.metadata":
            assert x.read_bytes() == y.read_bytes(), y


def _assert_same_tree(x, y, where: str) -> None:
    import torch

    assert type(x) is type(y), where
    if isinstance(x, dict):
        assert list(x) == list(y), where
        for k in x:
            _assert_same_tree(x[k], y[k], f"{where}.{k}")
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y)):
            _assert_same_tree(u, v, f"{where}[{i}]")
    elif isinstance(x, torch.Tensor):
        assert x.dtype == y.dtype and torch.equal(x, y), where
    else:
        assert x == y, where


@pytest.fixture(scope="session")
def same_checkpoint():
    """:func:`assert_same_checkpoint`: two checkpoint folders equal byte for byte (trainer state by content)."""
    return assert_same_checkpoint
