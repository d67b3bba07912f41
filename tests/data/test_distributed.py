"""Distributed prepare on datatrove: the local executor on real novels writes the same bytes as our own
parallel engine; Slurm through a fake ``sbatch`` (what is submitted, and the recorded tasks run here give the
same bytes); Ray when it is installed; clear errors without datatrove or without the Slurm options."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from preschool.cli import main
from preschool.corpora.base import CorpusConfig
from preschool.data.builders.corpus import CorpusSpec
from preschool.data.engine import distributed
from preschool.data.prepare import prepare_data
from preschool.data.shards import ShardSet, content_sha256
from preschool.data.tokenizer import TokenizerConfig
from preschool.errors import ConfigError, DataError, MissingDependency
from preschool.l2t.builder import L2TSpec
from preschool.synthetic.builder import GeneratorSpec

pytest.importorskip("datatrove")

from preschool.data.distributed import DatatroveDistributor, ExecutorOptions, Submitted  # noqa: E402

SEQ = 256
ROW = SEQ + 1
NOVELS = ["Anon_Clara_1864.txt", "Barclay_Ladies_1917.txt", "Barclay_Postern_1911.txt"]
TOK = TokenizerConfig(vocab_size=400, sample_documents=100)
# small units: a few hundred novel paragraphs are cut into about ten units per dataset
DATASETS = {
    # separator pinned: `auto` follows the experiment (BOS when an L2T dataset is beside it), and some tests
    # build pt alone to compare it with this module's build of all three
    "pt": CorpusSpec(corpus="novels", tokens=60 * ROW, val_tokens=4 * ROW, separator="bos", unit_tokens=800),
    "l2t": L2TSpec(corpus="novels", tokens=20 * ROW, val_tokens=2 * ROW, val_fraction=0.1, unit_tokens=500,
                   l2t={"scenario": "disjoint"}),
    "dyck": GeneratorSpec(generator="shuffle_dyck", params={"length": 40}, tokens=40 * ROW, val_tokens=4 * ROW,
                          unit_tokens=500),
}


@pytest.fixture(scope="module")
def novels(shared_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("novels")
    for name in NOVELS:
        (folder / name).symlink_to(shared_data / "novels" / name)
    return {"novels": CorpusConfig(source="text", path=str(folder), split_documents="paragraphs", chunk_chars=2000)}


def _prepare(out, corpora, datasets=DATASETS, workers=1, dist=None):
    with distributed(dist):
        return prepare_data(out, TOK, corpora, datasets, seq_len=SEQ, seed=0, workers=workers, progress=False)


def _same_bytes(a: Path, b: Path, names) -> None:
    for name in names:
        assert content_sha256(a / name) == content_sha256(b / name) is not None, name
        for split in ("train", "val"):
            assert (a / name / split).exists() == (b / name / split).exists()
            if not (a / name / split).exists():
                continue
            ma, mb = (json.loads((d / name / split / "manifest.json").read_text()) for d in (a, b))
            ma.pop("code_version"), mb.pop("code_version")
            assert ma == mb, (name, split)
            n = ma["n_rows"]
            assert (ShardSet(a / name / split).rows(range(n)).tobytes()
                    == ShardSet(b / name / split).rows(range(n)).tobytes())


@pytest.fixture(scope="module")
def engine_out(novels, tmp_path_factory):
    out = tmp_path_factory.mktemp("engine")
    _prepare(out, novels, workers=2)  # our own parallel engine
    return out


def test_local_executor_on_novels_is_byte_identical_to_the_engine(novels, engine_out, tmp_path):
    dist = DatatroveDistributor(ExecutorOptions(kind="local", tasks=3))
    _prepare(tmp_path, novels, dist=dist)
    _same_bytes(engine_out, tmp_path, DATASETS)
    # every kind went through datatrove, spread over several units and tasks
    by_work = {Path(r["logs"]).parent.name.split(".work-")[0]: r for r in dist.runs}
    assert {".pt", ".l2t", ".dyck-train"} <= set(by_work)
    # the training splits span several units and all tasks; a small val split may fit in one or two units
    # (a generator unit stops once it holds the whole split), so in fewer tasks
    assert all(by_work[w]["units"] > 3 and by_work[w]["tasks"] == 3 for w in (".pt", ".l2t", ".dyck-train"))
    assert json.loads((tmp_path / "pt" / "train" / "manifest.json").read_text())["units"] > 3
    assert not list(tmp_path.glob(".*work-*"))  # the work folders (and datatrove's logs in them) are gone


def _fake_slurm(tmp_path: Path) -> tuple[Path, dict]:
    """``sbatch`` that records each submission (args + script) and answers a job id; ``srun``,
    ``scontrol`` and ``squeue`` enough for datatrove's task side."""
    bin_ = tmp_path / "fakebin"
    bin_.mkdir()
    rec = tmp_path / "submitted"
    scripts = {
        "sbatch": f"""#!/bin/bash
n=$(ls {rec} 2>/dev/null | wc -l); d={rec}/$n; mkdir -p $d
printf '%s\\n' "$@" > $d/args; cp "${{@: -1}}" $d/script.sh
echo "Submitted batch job $((4242 + n))"
""",
        "srun": """#!/bin/bash
while [[ "$1" == -* ]]; do case "$1" in -n|-N) shift 2;; *) shift;; esac; done
exec "$@"
""",
        "scontrol": """#!/bin/bash
[[ "$1 $2" == "show hostnames" ]] && echo node001
exit 0
""",
        "squeue": "#!/bin/bash\nexit 0\n",
    }
    for name, text in scripts.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod((bin_ / name).stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return rec, env


@pytest.mark.slow
def test_slurm_with_a_fake_sbatch_submits_an_array_whose_tasks_give_the_same_bytes(novels, engine_out, tmp_path,
                                                                                   monkeypatch):
    rec, env = _fake_slurm(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    opts = ExecutorOptions(kind="slurm", tasks=2, partition="cpu", time="1:00:00", cpus_per_task=2,
                           sbatch_args={"account": "proj"}, wait=False)
    out = tmp_path / "out"
    pt = {"pt": DATASETS["pt"]}
    with pytest.raises(Submitted, match="submitted Slurm job 4242"):
        _prepare(out, novels, pt, dist=DatatroveDistributor(opts))
    assert not (out / "pt").exists()
    subs = sorted(rec.iterdir(), key=lambda p: int(p.name))
    assert len(subs) == 2  # the task array, then datatrove's stats merge (after it)
    array, merge = ((s / "script.sh").read_text() for s in subs)
    for line in ("#SBATCH --array=0-1", "#SBATCH --partition=cpu", "#SBATCH --time=1:00:00",
                 "#SBATCH --cpus-per-task=2", "#SBATCH --account=proj", "#SBATCH --job-name=preschool-prepare"):
        assert line in array.splitlines()
    assert "launch_pickled_pipeline" in array and "executor.pik" in array
    assert "--export=ALL,RUN_OFFSET=0" in (subs[0] / "args").read_text()
    assert "#SBATCH --dependency=afterok:4242" in merge and "merge_stats" in merge

    # the cluster runs the array: each task is the recorded script under its SLURM_ARRAY_TASK_ID
    for task in range(2):
        subprocess.run(["bash", str(subs[0] / "script.sh")], check=True, capture_output=True, cwd=tmp_path,
                       env={**env, "SLURM_ARRAY_TASK_ID": str(task), "RUN_OFFSET": "0", "SLURM_NODELIST": "node001"})
    # the same command again: every task completed, so nothing is submitted; the units are linked
    _prepare(out, novels, pt, dist=DatatroveDistributor(opts))
    assert len(list(rec.iterdir())) == 2
    _same_bytes(engine_out, out, pt)


def test_ray_executor_gives_the_same_bytes(novels, engine_out, tmp_path):
    """... and leaves the machine's shared temp folder alone: datatrove's Ray tasks log to <temp dir>/ray_logs,
    which a second user of the machine could not write to (their tasks died on a PermissionError)."""
    import tempfile

    ray = pytest.importorskip("ray", reason="ray is not installed here (the `ray` extra)")
    shared = Path(tempfile.gettempdir()) / "ray_logs" / "logs" / "task_00000.log"
    before = shared.stat().st_mtime_ns if shared.exists() else None
    dist = DatatroveDistributor(ExecutorOptions(kind="ray", tasks=2))
    _prepare(tmp_path, novels, {"pt": DATASETS["pt"]}, dist=dist)
    _same_bytes(engine_out, tmp_path, ["pt"])
    assert not ray.is_initialized()  # the local Ray it started is gone with the prepare
    assert (shared.stat().st_mtime_ns if shared.exists() else None) == before


def test_without_datatrove_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datatrove", None)  # import datatrove -> ImportError
    with pytest.raises(MissingDependency, match=r"preschool\[datatrove\]"):
        DatatroveDistributor(ExecutorOptions(kind="local", tasks=2))


def test_without_ray_the_error_names_the_ray_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    dist = DatatroveDistributor(ExecutorOptions(kind="ray", tasks=2))
    with pytest.raises(MissingDependency, match=r"preschool\[ray\]"):
        dist._ray(None, 2, tmp_path)  # the import comes first: nothing is built


def test_slurm_needs_partition_and_time():
    with pytest.raises(ConfigError, match="--partition"):
        DatatroveDistributor(ExecutorOptions(kind="slurm", tasks=2, time="1:00:00"))
    with pytest.raises(ConfigError, match="--time"):
        DatatroveDistributor(ExecutorOptions(kind="slurm", tasks=2, partition="cpu"))


QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
MICRO = ["tokenizer.vocab_size=300", "tokenizer.sample_documents=200", "data.pt.tokens=20000",
         "data.pt.val_tokens=2048", "data.pt.unit_tokens=3000", "data.dyck.tokens=4000", "data.dyck.val_tokens=1024",
         "data.dyck.unit_tokens=600"]


def test_cli_executor_local_prepares_the_engine_bytes(tmp_path, capsys):
    sets = lambda out: [x for o in [f"out={out}", *MICRO] for x in ("--set", o)]  # noqa: E731
    assert main(["prepare", str(QUICKSTART), *sets(tmp_path / "a"), "--no-progress", "--workers", "1"]) == 0
    assert main(["prepare", str(QUICKSTART), *sets(tmp_path / "b"), "--no-progress", "--workers", "1",
                 "--executor", "local", "--tasks", "2"]) == 0
    assert "datatrove local:" in capsys.readouterr().out
    _same_bytes(tmp_path / "a" / "data", tmp_path / "b" / "data", ["pt", "dyck"])
    assert main(["prepare", str(QUICKSTART), *sets(tmp_path / "c"), "--executor", "ray"]) == 2
    assert "--tasks" in capsys.readouterr().err


def _storybook_parquet(folder: Path, parts: int = 2, n: int = 300) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from preschool.corpora.storybook import Storybook

    book = Storybook(seed=0)
    folder.mkdir(parents=True)
    for p in range(parts):
        pq.write_table(pa.Table.from_pylist([{"text": book.story(p * n + i)} for i in range(n)]),
                       folder / f"part-{p}.parquet")


def test_a_datatrove_reader_feeds_our_steps_with_the_same_bytes_on_any_executor(tmp_path):
    """source datatrove_parquet reads with datatrove's ParquetReader: the documents of our own Parquet
    reader (ids aside), and the engine and the local executor prepare the same bytes from it."""
    from preschool.corpora import ReadStats, iter_documents

    src = tmp_path / "src"
    _storybook_parquet(src)
    stats = ReadStats()
    ours = [d.text for d in iter_documents(CorpusConfig(source="parquet", path=str(src)))]
    theirs = list(iter_documents(CorpusConfig(source="datatrove_parquet", path=str(src)), stats))
    assert [d.text for d in theirs] == ours and theirs[0].id == "part-0.parquet/0" and stats.files == 2
    corpora = {"dt": CorpusConfig(source="datatrove_parquet", path=str(src))}
    spec = {"pt": CorpusSpec(corpus="dt", tokens=40 * ROW, unit_tokens=800)}
    _prepare(tmp_path / "engine", corpora, spec)
    dist = DatatroveDistributor(ExecutorOptions(kind="local", tasks=2))
    _prepare(tmp_path / "local", corpora, spec, dist=dist)
    assert dist.runs and dist.runs[0]["units"] > 2
    _same_bytes(tmp_path / "engine", tmp_path / "local", spec)


def test_datatrove_jsonl_reads_the_documents_of_our_jsonl_reader(tmp_path):
    """source datatrove_jsonl (datatrove's JsonlReader, with orjson from the datatrove extra): the same
    texts, in the same file order, as our own JSON Lines reader, ids from the id field."""
    from preschool.corpora import iter_documents
    from preschool.corpora.storybook import Storybook

    book = Storybook(seed=0)
    src = tmp_path / "src"
    src.mkdir()
    for p in range(2):
        rows = [{"id": f"d{p}-{i}", "text": book.story(p * 50 + i)} for i in range(50)]
        (src / f"part-{p}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ours = list(iter_documents(CorpusConfig(source="jsonl", path=str(src))))
    theirs = list(iter_documents(CorpusConfig(source="datatrove_jsonl", path=str(src))))
    assert [d.text for d in theirs] == [d.text for d in ours] and len(theirs) == 100
    assert theirs[0].id.endswith("d0-0") and theirs[-1].id.endswith("d1-49")


def test_a_datatrove_read_continues_at_any_document_position(tmp_path, monkeypatch):
    """datatrove sources keep positions (file, document in it): a read continued there gives the documents and
    counts of an uninterrupted read, starts with the position's file (none before it is read), and a file
    changed since is refused with an error naming it."""
    from datatrove.pipeline.readers import JsonlReader

    from preschool.corpora import ReadStats, iter_documents
    from preschool.corpora.storybook import Storybook

    book = Storybook(seed=0)
    src = tmp_path / "src"
    src.mkdir()
    for p in range(3):
        rows = [{"id": f"d{p}-{i}", "text": book.story(p * 40 + i) + "\n\n" + book.story(1000 + i)} for i in range(40)]
        (src / f"part-{p}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = CorpusConfig(source="datatrove_jsonl", path=str(src), split_documents="paragraphs", chunk_chars=200)
    whole = ReadStats()
    docs = list(iter_documents(c, whole))
    assert whole.files == 3 and any(d.meta["chunk"] > 0 for d in docs)
    read, real = [], JsonlReader.read_file

    def read_file(self, filepath):
        read.append(filepath)
        return real(self, filepath)

    monkeypatch.setattr(JsonlReader, "read_file", read_file)
    for i in (0, 1, len(docs) // 3, len(docs) // 2, len(docs) - 1):
        pos = json.loads(json.dumps(docs[i].meta["position"]))  # as a start.json file holds it
        read.clear()
        st = ReadStats()
        rest = list(iter_documents(c, st, start=pos))
        assert [(d.id, d.text) for d in rest] == [(d.id, d.text) for d in docs[i:]]
        assert st.as_dict() == whole.as_dict() and read[0] == pos["path"]
    pos = docs[len(docs) // 2].meta["position"]
    with (src / pos["path"]).open("a") as fh:
        fh.write(json.dumps({"id": "new", "text": "appended"}) + "\n")
    with pytest.raises(DataError, match=f"{src}/{pos['path']}: the file changed since the position was recorded "
                                        r"\(size \d+ -> \d+, version"):
        next(iter_documents(c, start=pos))


def test_a_datatrove_reader_without_its_dependency_says_what_to_install(tmp_path, monkeypatch):
    from datatrove.utils import _import_utils

    from preschool.corpora import iter_documents

    # datatrove asks importlib whether a reader's package is there (JsonlReader: orjson); say it is not
    monkeypatch.setattr(_import_utils, "_is_package_available", lambda name: name != "orjson")
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    with pytest.raises(MissingDependency, match="pip install orjson"):
        next(iter_documents(CorpusConfig(source="datatrove_jsonl", path=str(tmp_path))))


def test_slurm_wait_stops_with_the_log_folder_when_the_array_ends_incomplete(tmp_path, monkeypatch):
    """Waiting for the array: once squeue no longer lists the job and tasks are missing, the command stops
    naming the Slurm logs and how to go on (the fake cluster never runs the tasks)."""
    rec, env = _fake_slurm(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    corpora = {"sb": CorpusConfig(source="storybook", seed=0, max_documents=2000)}
    spec = {"pt": CorpusSpec(corpus="sb", tokens=40 * ROW, unit_tokens=800)}
    opts = ExecutorOptions(kind="slurm", tasks=2, partition="cpu", time="0:10:00", poll_s=0.01)
    with pytest.raises(DataError, match=r"Slurm job 4242 ended with 2 of 2 tasks incomplete.*slurm_logs.*rerun"):
        _prepare(tmp_path / "out", corpora, spec, dist=DatatroveDistributor(opts))
    assert len(list(rec.iterdir())) == 2  # the array and the stats merge were submitted


@pytest.mark.parametrize("source", ["hf", "parquet"])
def test_a_streamed_corpus_is_planned_once_and_each_task_reads_only_its_units(tmp_path, monkeypatch, source):
    """With a corpus that keeps positions (streamed hf, or files read directly) the parent reads it once,
    writing where each unit starts; a task then reads only its own units' records; the bytes are the engine's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import preschool.corpora
    from preschool.corpora.storybook import Storybook
    from preschool.data.builders.corpus import CorpusJob
    from preschool.data.distributed import UnitTasks, _plan

    src = tmp_path / "src"
    src.mkdir()
    book = Storybook(seed=0)
    for p in range(2):
        pq.write_table(pa.Table.from_pylist([{"text": book.story(p * 400 + i)} for i in range(400)]),
                       src / f"part-{p}.parquet", row_group_size=100)
    corpora = {"web": CorpusConfig(source="hf", hf_name="parquet", path=str(src), streaming=True)
               if source == "hf" else CorpusConfig(source="parquet", path=str(src))}
    spec = {"pt": CorpusSpec(corpus="web", tokens=40 * ROW, unit_tokens=800)}
    _prepare(tmp_path / "engine", corpora, spec)
    dist = DatatroveDistributor(ExecutorOptions(kind="local", tasks=2))
    _prepare(tmp_path / "local", corpora, spec, dist=dist)
    _same_bytes(tmp_path / "engine", tmp_path / "local", spec)
    planned = dist.runs[0]["units"]
    assert planned > 3

    # one task by hand, rank 1 of 2, on a plan like the one above: it reads only its units' records
    job = CorpusJob(corpora["web"], (tmp_path / "engine" / "tokenizer" / "tokenizer.json").read_text(), ROW, 0,
                    0.02, ["train"], 800)
    work = tmp_path / "work"
    work.mkdir()
    units = iter(job.units())
    next(units)
    (work / "u000000.start.json").write_text(json.dumps(job.start_token(0)))
    assert _plan(job, units, work, planned) == planned  # what the parent does before handing units out
    unit1 = json.loads((work / "u000001.start.json").read_text())["position"]
    job2 = CorpusJob(corpora["web"], job.tokenizer_json, ROW, 0, 0.02, ["train"], 800)

    def where(pos):  # (file, row) of a position: hf keeps one row count over its files
        return pos.get("file", 0), pos["row"] if "row" in pos else pos["at"]["row"]

    read, real = [], preschool.corpora.iter_documents

    def iter_documents(*a, **kw):
        for doc in real(*a, **kw):
            read.append(where(doc.meta["position"]))
            yield doc

    monkeypatch.setattr(preschool.corpora, "iter_documents", iter_documents)
    list(UnitTasks(job2, work, planned).run(None, rank=1, world_size=2))
    built = sorted(int(p.name[1:]) for p in work.glob("u??????") if (p / "unit.json").is_file())
    assert built == list(range(1, planned, 2))
    assert min(read) == where(unit1) > (0, 0)  # nothing before its first unit was read


# ----------------------------------------------------------------------------- a plug-in's part, prepared at scale

COUNT_PARTS = '''"""A user's generator, in a file outside the package and off every task's sys.path."""
from dataclasses import dataclass

import numpy as np

from preschool.synthetic.base import GENERATORS, Generator, GeneratorConfig, Item


@dataclass
class CountUpConfig(GeneratorConfig):
    length: int = 16


@GENERATORS.register("count_up", config=CountUpConfig)
class CountUp(Generator):
    """index, index + 1, ... modulo 7."""

    @property
    def vocab_size(self):
        return 7

    def item(self, index):
        s = (np.arange(self.cfg.length) + index) % 7
        return Item(s.astype(np.int64), np.ones(self.cfg.length, dtype=bool), {})
'''


def _plugin_experiment(root: Path) -> tuple[Path, Path]:
    """An experiment whose one dataset is a generator of the plug-in file ``root/lab/count_parts.py``."""
    import yaml

    (root / "lab").mkdir()
    (root / "lab" / "count_parts.py").write_text(COUNT_PARTS)
    exp = root / "exp.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "count", "seed": 0, "seq_len": 32, "plugins": ["./lab/count_parts.py"],
        "corpora": {"sb": {"source": "storybook", "seed": 0}},
        "tokenizer": {"kind": "train", "vocab_size": 300, "sample_documents": 200},
        "data": {"count": {"generator": "count_up", "params": {"length": 33}, "render": "text", "tokens": 6000,
                           "val_tokens": 0, "unit_tokens": 600}},
        "model": {"preset": "micro"},
        "arms": [{"name": "a", "stages": [{"name": "s", "data": "count", "tokens": 256}]}]}))
    return exp, root / "lab" / "count_parts.py"


def _cli(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``preschool ARGS`` in a fresh process (this checkout's package first on the path, no other plug-in)."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    return subprocess.run([sys.executable, "-c", "import sys; from preschool.cli import main; sys.exit(main())",
                           *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=900,
                          env={**env, "PYTHONPATH": src, "PRESCHOOL_PLUGINS": ""})


@pytest.mark.slow
def test_a_plugin_file_generator_prepares_on_slurm_tasks_which_refuse_a_changed_plugin(tmp_path):
    """The job records the plug-in file and its sha256; each task (a fresh process in another folder, the file
    off its path) imports that file before the job, and refuses it once it has changed, before running it."""
    rec, env = _fake_slurm(tmp_path)
    env.pop("SLURM_ARRAY_TASK_ID", None)
    exp, plugin = _plugin_experiment(tmp_path)
    from preschool.io import sha256_file

    engine = _cli(env, tmp_path, "prepare", exp, "--set", f"out={tmp_path / 'engine'}", "--no-progress")
    assert engine.returncode == 0, engine.stderr
    slurm = ["prepare", exp, "--set", f"out={tmp_path / 'slurm'}", "--no-progress", "--executor", "slurm",
             "--tasks", "2", "--partition", "cpu", "--time", "1:00:00"]
    res = _cli(env, tmp_path, *slurm, "--no-wait")
    assert res.returncode == 0 and "submitted Slurm job" in res.stdout + res.stderr, res.stderr
    assert f"plug-in {plugin} (sha256 {sha256_file(plugin)[:12]})" in res.stdout
    array = sorted(rec.iterdir(), key=lambda p: int(p.name))[0] / "script.sh"
    node = tmp_path / "node"
    node.mkdir()

    def task(rank: int) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(array)], cwd=node, capture_output=True, text=True, timeout=900,
                              env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
                                   "SLURM_ARRAY_TASK_ID": str(rank), "RUN_OFFSET": "0", "SLURM_NODELIST": "node001"})

    first = task(0)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    good = plugin.read_text()
    plugin.write_text(good + "\nraise SystemExit('the changed plug-in ran')\n")
    refused = task(1)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "changed since the job was made" in said and str(plugin) in said
    assert "the changed plug-in ran" not in said
    plugin.write_text(good)
    second = task(1)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    done = _cli(env, tmp_path, *slurm, "--no-wait")  # every task completed: nothing submitted, units linked
    assert done.returncode == 0, done.stderr
    _same_bytes(tmp_path / "engine" / "data", tmp_path / "slurm" / "data", ["count"])


@pytest.mark.slow
def test_a_plugin_file_generator_prepares_on_a_local_ray(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed here (the `ray` extra)")
    exp, _ = _plugin_experiment(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    engine = _cli(env, tmp_path, "prepare", exp, "--set", f"out={tmp_path / 'engine'}", "--no-progress")
    assert engine.returncode == 0, engine.stderr
    ray = _cli(env, tmp_path, "prepare", exp, "--set", f"out={tmp_path / 'ray'}", "--no-progress", "--executor", "ray",
               "--tasks", "2")
    assert ray.returncode == 0, ray.stdout[-3000:] + ray.stderr[-3000:]
    assert "datatrove ray:" in ray.stdout
    _same_bytes(tmp_path / "engine" / "data", tmp_path / "ray" / "data", ["count"])


def test_slurm_memory_is_written_as_sbatch_22_05_reads_it_and_a_refusal_says_what_helps(tmp_path, monkeypatch,
                                                                                         capfd):
    """Issue 48 item 9: --mem-per-cpu-gb 4 (docs/corpora.md's own example) wrote --mem-per-cpu=4.0G, which
    sbatch 22.05 refuses, and the error then said "rerun the same command", which fails the same way. The
    size is whole megabytes; a refusal by sbatch names the script and says that rerunning as it is cannot help."""
    rec, env = _fake_slurm(tmp_path)
    sbatch = tmp_path / "fakebin" / "sbatch"
    # sbatch 22.05 reads a memory size as an integer with an optional unit
    sbatch.write_text(sbatch.read_text().replace("#!/bin/bash\n", """#!/bin/bash
mem=$(sed -n 's/^#SBATCH --mem-per-cpu=//p' "${@: -1}")
if [ -n "$mem" ] && ! [[ "$mem" =~ ^[0-9]+[KMGT]?$ ]]; then
  echo "sbatch: error: Invalid --mem-per-cpu specification" >&2; exit 1; fi
""", 1))
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    corpora = {"sb": CorpusConfig(source="storybook", seed=0, max_documents=2000)}
    spec = {"pt": CorpusSpec(corpus="sb", tokens=40 * ROW, unit_tokens=800)}
    opts = ExecutorOptions(kind="slurm", tasks=2, partition="cpu", time="0:10:00", mem_per_cpu_gb=4.0, wait=False)
    with pytest.raises(Submitted):
        _prepare(tmp_path / "out", corpora, spec, dist=DatatroveDistributor(opts))
    array = (rec / "0" / "script.sh").read_text().splitlines()
    assert "#SBATCH --mem-per-cpu=4096M" in array
    opts.mem_per_cpu_gb = 1.5
    with pytest.raises(Submitted):
        _prepare(tmp_path / "out2", corpora, spec, dist=DatatroveDistributor(opts))
    assert "#SBATCH --mem-per-cpu=1536M" in (rec / "2" / "script.sh").read_text().splitlines()
    # sbatch refuses the array (here: any partition but cpu): the same command would be refused again
    sbatch.write_text(sbatch.read_text().replace("#!/bin/bash\n", """#!/bin/bash
grep -q '^#SBATCH --partition=cpu$' "${@: -1}" || { echo "sbatch: error: invalid partition specified: gpu" >&2; exit 1; }
""", 1))
    opts.partition = "gpu"
    with pytest.raises(DataError) as e:
        _prepare(tmp_path / "out3", corpora, spec, dist=DatatroveDistributor(opts))
    said = str(e.value)
    assert "sbatch refused" in said and "launch_script.slurm" in said and "--partition" in said
    assert "rerun the same command" not in said and "\n" not in said
    assert "invalid partition specified: gpu" in capfd.readouterr().err  # sbatch's own reason, just above it
    with pytest.raises(ConfigError, match="--mem-per-cpu-gb"):
        ExecutorOptions(kind="slurm", tasks=2, partition="cpu", time="0:10:00", mem_per_cpu_gb=0).validate()
