"""Where everything lives on disk: the one owner of every experiment and run path.

An experiment folder (``preschool run``)::

    <out>/experiment.yaml                 the resolved config
    <out>/data/                           tokenizer/ + one folder per dataset (train/, val/, dataset.json)
                                          + manifest.json
    <out>/arms/<arm>/seed<k>/             one trainer run folder (below), one per arm x seed
    <out>/rungs/<rung>/arms/<arm>/seed<k>/  the same, per rung of a ``ladder:`` (experiment/)
    <out>/report.md, results.json, plots/
    <out>/slurm/                          ``preschool launch``: one <job>.sbatch per job, logs/,
                                          jobs.json (the ids it submitted), report.done, submit.sh

A run folder (written by the trainer, read by evaluators and the report)::

    <run>/config.yaml                     what the run was started with (train/run_dir.py)
    <run>/metrics.jsonl                   one JSON row per log event (read with :func:`read_metrics`)
    <run>/checkpoints/step-00000120/      HF folder (model.safetensors, config.json, tokenizer files)
                                          + meta.json; resumable ones also trainer_state.pt +
                                          checksums.json (+ sharded/ with its manifest.json under FSDP)
    <run>/evals/step-00000120/<label>/    summary.json (+ items.jsonl) per evaluator
    <run>/wandb_id.txt                    the W&B run id (with ``train.wandb``)
    <run>/DONE                            the trainer's summary, written when every stage is done

Nothing else in ``preschool`` spells one of these names, formats a step folder
name or parses ``metrics.jsonl``: import the names and helpers from here
(``tests/test_layout.py`` greps the package for the literals).
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import ConfigError, DataError
from .io import iter_jsonl

EXPERIMENT_CONFIG = "experiment.yaml"
DATA = "data"
ARMS = "arms"
RUNGS = "rungs"  # <out>/rungs/<rung>/: one ladder rung's arm x seed grid
REPORT = "report.md"
RESULTS = "results.json"
PLOTS = "plots"
TOKENIZER = "tokenizer"  # <out>/data/tokenizer/: the experiment's (and beside an exported or transformed dataset)
DATASET_RECORD = "dataset.json"  # <out>/data/<dataset>/dataset.json: how prepare built it
CHECKPOINTS = "checkpoints"
EVALS = "evals"
METRICS = "metrics.jsonl"
DONE = "DONE"
RUN_CONFIG = "config.yaml"
#: a folder's manifest: of a shard set (train/, val/), a dataset folder, a generated or transformed output,
#: the minimal pairs; the names below are the same file at their places
MANIFEST = "manifest.json"
DATA_MANIFEST = MANIFEST  # <out>/data/manifest.json: what prepare built
MINIMAL_PAIRS = "minimal_pairs"  # <out>/data/minimal_pairs/: the storybook minimal pairs
#: what prepare writes in <out>/data beside the datasets: a dataset of that name would replace it
DATA_RESERVED = (TOKENIZER, MINIMAL_PAIRS, DATA_MANIFEST)
WANDB_ID = "wandb_id.txt"
SLURM = "slurm"  # <out>/slurm/: what `preschool launch` writes
# inside a checkpoint folder (beside the HF files)
CKPT_META = "meta.json"  # position and token account of the step
CKPT_WEIGHTS = "model.safetensors"  # HF's name for the weights, which the trainer writes and reads
CKPT_STATE = "trainer_state.pt"  # optimizer, RNG, counters: what a resume needs beyond the weights
CKPT_CHECKSUMS = "checksums.json"  # sha256 of the files a resume reads
CKPT_SHARDED = "sharded"  # FSDP: the per-rank DCP folder of the training state
CKPT_SHARDED_MANIFEST = MANIFEST  # inside sharded/: its files and their checksums
# inside an evaluator's result folder
EVAL_SUMMARY = "summary.json"
EVAL_ITEMS = "items.jsonl"
STEP_DIR = re.compile(r"^step-(\d+)$")
# io.atomic_dir's temp folder beside a step folder while it is written: "." + name + "." + random + ".tmp"
STEP_TEMP_DIR = re.compile(r"^\.step-\d+\.[A-Za-z0-9_]+\.tmp$")


# ----------------------------------------------------------------------------- names that become folders

# a folder name is at most 255 bytes; atomic_dir's temp folder beside it adds 15 (".<name>.XXXXXXXX.tmp")
NAME_MAX_BYTES = 200


def check_name(name: object, field: str, what: str, reserved: tuple[str, ...] = ()) -> None:
    """ConfigError on ``field`` unless ``name`` (a dataset, arm or experiment name that becomes a folder)
    is one plain folder name: not empty, ``.`` or ``..``, no ``/``, ``\\``, NUL or other control
    character, not hidden (``.x``: our temp folders, ``.old`` folders and locks are hidden), at most
    :data:`NAME_MAX_BYTES` bytes of UTF-8 and none of ``reserved`` (names written beside it).

    Without this, ``data: {../../x: ...}`` would make prepare write (and replace) a folder outside
    ``--out``; the message shows the name with ``repr`` so a NUL or line break stays on one line.
    """
    bad = None
    if not isinstance(name, str) or not name:
        bad = "is empty"
    elif name in (".", ".."):
        bad = "is the folder itself or the one above it"
    elif any(c in "/\\" or ord(c) < 32 or ord(c) == 127 for c in name):
        bad = "holds a slash, backslash, NUL or other control character"
    elif name.startswith("."):
        bad = "is hidden (starts with '.'), as preschool's temp folders and locks are"
    elif len(name.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES:
        bad = f"is longer than {NAME_MAX_BYTES} bytes"
    elif name in reserved:
        bad = f"is taken by what is written beside it ({', '.join(reserved)})"
    if bad is not None:
        raise ConfigError(field, f"{what} name {name!r} {bad}: it becomes a folder name, so give one plain "
                          "name (letters, digits, '-', '_', '.' inside)")


def check_dataset_name(name: object) -> None:
    """:func:`check_name` for a dataset of ``data`` (a folder ``<out>/data/<name>``), on the field ``data``."""
    check_name(name, "data", "dataset", DATA_RESERVED)


# ----------------------------------------------------------------------------- experiment folder


def data_dir(out: str | Path) -> Path:
    """``<out>/data``: the tokenizer and the prepared datasets of an experiment."""
    return Path(out) / DATA


def rung_dir(out: str | Path, rung: str | None) -> Path:
    """``<out>/rungs/<rung>``: where one ladder rung's runs live; ``<out>`` itself without a rung."""
    return Path(out) if rung is None else Path(out) / RUNGS / rung


def run_dir(out: str | Path, arm: str, seed: int, rung: str | None = None) -> Path:
    """``<out>/arms/<arm>/seed<k>`` (at a ladder rung ``<out>/rungs/<rung>/arms/<arm>/seed<k>``): the trainer
    run folder of one arm and training seed."""
    return rung_dir(out, rung) / ARMS / arm / f"seed{seed}"


def experiment_config_path(out: str | Path) -> Path:
    """``<out>/experiment.yaml``: the resolved config a run wrote."""
    return Path(out) / EXPERIMENT_CONFIG


def report_path(out: str | Path) -> Path:
    return Path(out) / REPORT


def results_path(out: str | Path) -> Path:
    """``<out>/results.json``: every number of the report."""
    return Path(out) / RESULTS


def plots_dir(out: str | Path) -> Path:
    return Path(out) / PLOTS


def tokenizer_dir(folder: str | Path) -> Path:
    """``<folder>/tokenizer``: the tokenizer of the datasets in ``folder`` (an experiment's data folder, an
    export, an L2T transform's output)."""
    return Path(folder) / TOKENIZER


def dataset_record_path(dataset: str | Path) -> Path:
    """``<out>/data/<dataset>/dataset.json``: what the dataset was built from, present once it is built."""
    return Path(dataset) / DATASET_RECORD


def data_manifest_path(out: str | Path) -> Path:
    """``<out>/data/manifest.json``: what ``prepare`` built (datasets, tokenizer, content hashes)."""
    return data_dir(out) / DATA_MANIFEST


def slurm_dir(out: str | Path) -> Path:
    """``<out>/slurm``: the job scripts of ``preschool launch``, their logs (``logs/``), the job ids it
    submitted (``jobs.json``), the report job's ``report.done`` and a dry run's ``submit.sh``."""
    return Path(out) / SLURM


def arm_runs(out: str | Path, arms, seeds, rung: str | None = None) -> list:
    """``(arm, seed, run folder)`` for the arm x seed grid (of ladder rung ``rung``), arms in order (``arms``:
    objects with ``.name``)."""
    return [(arm, s, run_dir(out, arm.name, s, rung)) for arm in arms for s in seeds]


# ----------------------------------------------------------------------------- run folder


def step_dirname(step: int) -> str:
    """``step-00000120``: the folder name of a checkpoint (and of its eval results)."""
    return f"step-{int(step):08d}"


def checkpoints_dir(run: str | Path) -> Path:
    return Path(run) / CHECKPOINTS


def checkpoint_dir(run: str | Path, step: int) -> Path:
    """``<run>/checkpoints/step-XXXXXXXX``."""
    return checkpoints_dir(run) / step_dirname(step)


def evals_dir(run: str | Path, step: int | None = None) -> Path:
    """``<run>/evals`` or, given a step, ``<run>/evals/step-XXXXXXXX``."""
    root = Path(run) / EVALS
    return root if step is None else root / step_dirname(step)


def metrics_path(run: str | Path) -> Path:
    return Path(run) / METRICS


def run_config_path(run: str | Path) -> Path:
    """``<run>/config.yaml``: the config tree the run was started with."""
    return Path(run) / RUN_CONFIG


def done_path(run: str | Path) -> Path:
    """``<run>/DONE``: the trainer's summary, present once every stage is trained."""
    return Path(run) / DONE


def is_done(run: str | Path) -> bool:
    """True when the trainer finished every stage of this run (``DONE`` written)."""
    return done_path(run).is_file()


def step_of(folder: str | Path) -> int | None:
    """The step in a ``step-N`` folder name, None for any other name."""
    m = STEP_DIR.match(Path(folder).name)
    return int(m.group(1)) if m else None


def list_checkpoints(run: str | Path, required: bool = True) -> list[tuple[int, Path]]:
    """``(step, folder)`` of every ``<run>/checkpoints/step-N`` folder, by step.

    Hidden temp folders of an unfinished atomic write are ignored. With
    ``required`` a run without ``checkpoints/`` is a ``DataError``; otherwise ``[]``.
    """
    root = checkpoints_dir(run)
    if not root.is_dir():
        if required:
            raise DataError(f"{run}: not a run folder (no {CHECKPOINTS}/ inside)")
        return []
    out = [(s, d) for d in root.iterdir() if (s := step_of(d)) is not None and d.is_dir()]
    return sorted(out)


def checkpoint_temp_dirs(run: str | Path) -> list[Path]:
    """The hidden temp folders of checkpoint writes in ``<run>/checkpoints`` (named like
    ``io.atomic_dir``'s for a step folder; whose they are is for the caller to check), sorted."""
    root = checkpoints_dir(run)
    return sorted(d for d in root.iterdir() if STEP_TEMP_DIR.match(d.name) and d.is_dir()) if root.is_dir() else []


def final_checkpoint(run: str | Path) -> Path:
    """The checkpoint with the highest step; ``DataError`` when the run has none yet."""
    cks = list_checkpoints(run, required=False)
    if not cks:
        raise DataError(f"{run}: no checkpoints (train this run first)")
    return cks[-1][1]


# ----------------------------------------------------------------------------- metrics.jsonl


def read_metrics(run_or_file: str | Path, event: str | None = None, missing_ok: bool = True) -> list[dict]:
    """The rows of a run's ``metrics.jsonl`` in file order (``event`` keeps only rows of that event).

    A last line that is not valid JSON is a row cut off by a crash mid-write and
    is skipped (the trainer drops it on resume); an invalid line anywhere else
    is corruption and raises ``DataError`` naming the file and line. A missing
    file reads as no rows unless ``missing_ok`` is false.
    """
    return [row for _, row in metrics_lines(run_or_file, missing_ok) if event is None or row.get("event") == event]


def metrics_lines(run_or_file: str | Path, missing_ok: bool = True) -> list[tuple[int, dict]]:
    """:func:`read_metrics`'s rows with their line numbers, ``(line, row)``: for a reader that names the line
    of a value it cannot use."""
    path = Path(run_or_file)
    if path.is_dir() or path.name != METRICS:
        path = metrics_path(path)
    if not path.is_file():
        if missing_ok:
            return []
        raise DataError(f"{path}: no {METRICS}")
    return list(iter_jsonl(path, last_line_may_be_cut=True))
