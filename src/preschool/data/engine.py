"""One parallel engine for every kind of dataset: work units, worker processes, a manifest over their shards.

A dataset is cut into **work units**: consecutive documents of a corpus (closing
once they hold ``4 * unit_tokens`` characters) or consecutive item indices of a
generator (``unit_tokens`` tokens' worth). Unit ``k`` is a pure function of the
job's config and ``k``, never of the worker count. ``run_units`` hands units to
``workers`` processes; each worker tokenizes (and transforms, packs) its unit
and writes the unit's own shard sets into ``<work>/u<k>/`` atomically, with a
``unit.json`` of its counts. The parent takes the units' results in unit order
and stops once the job has enough rows; the final shard set is then a manifest
that lists the units' shard files in unit order (``link_shards``; only the last,
partly used file is copied, truncated). So:

- the bytes of the training stream and its ``data_sha256`` are the same for any
  ``workers`` (1, 2, 3... give identical files and manifests);
- a prepare killed mid-way keeps its finished units (the work folder is stable,
  named after the job's config hash) and a rerun reuses them, finishing with the
  same bytes it would have written uninterrupted;
- memory is one unit per worker plus at most ``2 * workers`` units in flight,
  whatever the corpus size.

A generator unit stops early once it alone holds the whole split (a small dataset
generates about the items it uses, not ``unit_tokens`` worth); its rows are the
ones the whole unit starts with, so the bytes are the same.

Rows never straddle units: a concatenating packer drops each unit's partial
last row (counted as ``dropped_tail_tokens``), at most ``row_len - 1`` tokens
per unit. The unit size is part of the dataset's spec (changing it changes
bytes); the worker count is not.

A job (``UnitJob``) says how to cut units (``units``, parent side, in order) and
how to build one (``run``, worker side). Corpus datasets (``data/builders/corpus.py``),
generators (``synthetic/write.py``) and L2T (``l2t/write.py``) are jobs; the two that read a corpus
share its resume bookkeeping (``DocumentJob``).
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import multiprocessing as mp
import os
import pickle
import re
import shutil
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ..errors import DataError, PreschoolError
from ..io import atomic_dir, read_json, sha256_file, write_json
from ..layout import MANIFEST
from .shards import ShardSet, shard_manifest, write_array

# A forked worker (the engine's, datatrove's local tasks) keeps what it inherits out of its garbage collector.
# The parent may hold garbage it has not collected yet, such as the process group of a failed run, whose
# destructor waits on threads fork does not copy: collected in the child, it hung the worker for ever.
os.register_at_fork(after_in_child=gc.freeze)

DEFAULT_UNIT_TOKENS = 1 << 21  # about 2M tokens per work unit: seconds of work, a few MB in memory
CHARS_PER_TOKEN = 4  # text units close at 4 characters per unit token (typical BPE English)


class UnitJob:
    """A dataset cut into work units. Subclasses are picklable (they travel to worker processes)."""

    def key(self) -> str:
        """Fingerprint of everything that decides the units' bytes (names the resumable work folder)."""
        raise NotImplementedError

    def units(self, start: tuple[int, dict] | None = None) -> Iterator[tuple[int, Any]]:
        """``(k, payload)`` for k = 0, 1, 2... in order (parent side; payloads are pickled to workers).

        ``start=(m, token)``, with a token :meth:`start_token` gave for unit ``m``: begin at
        unit ``m`` without reading what comes before it (a resumed prepare).
        """
        raise NotImplementedError

    def start_token(self, k: int) -> dict | None:
        """After ``units()`` yielded unit ``k``: a JSON-able token from which ``units(start=(k, token))``
        yields the same unit ``k`` and the rest, or None when this job cannot start there (it rereads)."""
        return None

    def resumed(self, token: dict) -> None:
        """Called when a rerun continues at a unit's start ``token`` (parent side): restore what the
        read before that point counted, even when the finished units already suffice."""

    def read_counts(self) -> dict | None:
        """Parent side: what the document read has counted so far (JSON-able), None when the job counts nothing.

        :func:`run_units` takes it as each unit is yielded and, stopping at a unit, sets it back
        (:meth:`restore_read`) to that unit's, so the counts are those of a one-worker read that
        stopped there, however far ahead of the builds several workers had the parent read.
        """
        return None

    def restore_read(self, counts: dict) -> None:
        """Set the parent's read counts to ``counts`` (a :meth:`read_counts`)."""

    def run(self, k: int, payload: Any, out: Path) -> dict:
        """Build unit ``k`` into folder ``out`` (worker side); return its counts (JSON-able)."""
        raise NotImplementedError

    def task_copy(self) -> "UnitJob | None":
        """A copy of this job as a task on another process or machine sees it (a pickle round trip:
        no parent-side state), whose ``units()`` yields the same units; None when there is none
        (e.g. its documents come from the caller's one-shot iterator)."""
        return pickle.loads(pickle.dumps(self))


class DocumentJob(UnitJob):
    """A job whose units are consecutive documents of a corpus read in the parent: the resume bookkeeping
    every such job shares. The parent's read counts (``read``, a ``corpora.ReadStats`` or None) and the
    units' start tokens stay in the parent (a pickled copy carries neither); a unit's start token is
    ``{"position": <its first document's iter_documents position>, ...}``, whose ``read`` counts a
    resumed read restores."""

    read: Any = None

    def init_reading(self, read: Any) -> None:
        """Call from ``__init__``: ``read`` is the ReadStats the parent's document read fills in (or None)."""
        self.read = read
        self._starts: dict[int, dict] = {}  # parent side: the start token of each unit yielded so far

    def __getstate__(self):  # a copy elsewhere reads its own documents: the parent's counts stay here
        return {**self.__dict__, "read": None, "_starts": {}}

    def document_units(self, docs, unit_tokens: int, first: int = 0) -> Iterator[tuple[int, list[tuple[str, str]]]]:
        """:func:`text_units` over ``(doc_id, text, position)``, noting ``{"position": position}`` as the start
        token of each unit whose first document has a position (a subclass may add to it as the unit is
        yielded; sources without positions are read again from their start)."""
        self._starts = {}
        positions: dict[int, Any] = {}
        for k, unit in text_units(docs, unit_tokens, first=first, starts=positions):
            pos = positions.pop(k, None)
            if pos is not None:
                self._starts[k] = {"position": pos}
            yield k, unit

    def start_token(self, k: int) -> dict | None:
        return self._starts.pop(k, None)

    def resumed(self, token: dict) -> None:
        if self.read is not None:
            self.read.restore(token["position"]["read"])

    def read_counts(self) -> dict | None:
        return self.read.as_dict() if self.read is not None else None

    def restore_read(self, counts: dict) -> None:
        self.read.restore(counts)


def job_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def text_units(docs, unit_tokens: int, first: int = 0,
               starts: dict[int, Any] | None = None) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """Group ``(doc_id, text)`` pairs into units of about ``CHARS_PER_TOKEN * unit_tokens`` characters.

    Units are numbered from ``first``. Items may be ``(doc_id, text, position)``: then
    ``starts[k]`` is set to the position of unit ``k``'s first document before the unit is
    yielded (``corpora.iter_documents`` positions, for resuming a stream there).
    """
    limit = max(1, CHARS_PER_TOKEN * unit_tokens)
    buf: list[tuple[str, str]] = []
    chars, k = 0, first
    for doc in docs:
        if not buf and starts is not None and len(doc) > 2:
            starts[k] = doc[2]
        buf.append((doc[0], doc[1]))
        chars += len(doc[1])
        if chars >= limit:
            yield k, buf
            buf, chars, k = [], 0, k + 1
    if buf:
        yield k, buf


_JOB: UnitJob | None = None


def _init(job: UnitJob) -> None:
    global _JOB
    _JOB = job
    # one tokenizer thread per worker process: the processes are the parallelism
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _build(job: UnitJob, k: int, payload: Any, path: Path) -> dict:
    with atomic_dir(path) as tmp:
        info = job.run(k, payload, tmp)
        write_json(tmp / "unit.json", {"unit": k, **info})
    return read_json(path / "unit.json")


def _run(args: tuple[int, Any, str]) -> dict | tuple:
    k, payload, path = args
    try:
        return _build(_JOB, k, payload, Path(path))  # type: ignore[arg-type]
    except PreschoolError as e:  # user-facing errors cross the process boundary whole, fields and all
        try:
            pickle.dumps(e)
        except Exception:  # an error class that cannot be rebuilt from a pickle: its message as a DataError
            e = DataError(str(e))
        return ("error", e)


def _raise(res: tuple) -> None:
    raise res[1]


def unit_path(work: Path, k: int) -> Path:
    return work / f"u{k:06d}"


def rows_so_far(infos: list[dict]) -> dict[str, int]:
    """Rows per split of the units in ``infos`` together."""
    return sum_counts([i["rows"] for i in infos])


def _enough(have: dict[str, int], need: dict[str, int] | None) -> bool:
    return need is not None and all(have.get(s, 0) >= n for s, n in need.items())


def run_units(job: UnitJob, work: str | Path, workers: int = 1, need: dict[str, int] | None = None,
              on_unit: Callable[[dict], None] | None = None) -> list[dict]:
    """Build ``job``'s units under ``work`` with ``workers`` processes; return their infos in unit order.

    Finished units already in ``work`` (``unit.json`` present) are reused. Stops after
    the first unit with which the units so far hold ``need[split]`` rows of every split
    (``need=None``: when ``units()`` ends). Inside :func:`distributed`, the units are first
    spread over the distributor's tasks (see there); this loop then only links and fills gaps.
    """
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    dist = _DISTRIBUTOR.get()
    if dist is not None:
        dist.prebuild(job, work, need)
    infos: list[dict] = []
    have: dict[str, int] = {}
    counts: dict[int, Any] = {}  # job.read_counts() as each unit was yielded, until the unit is taken

    def take(info: dict) -> bool:
        infos.append(info)
        for s, n in info["rows"].items():
            have[s] = have.get(s, 0) + int(n)
        if on_unit is not None:
            on_unit(info)
        read = counts.pop(int(info["unit"]), None)
        if not _enough(have, need):
            return False
        if read is not None:  # the parent may have read ahead for other workers: count as if it stopped here
            job.restore_read(read)
        return True

    # A rerun continues at the start token of the first unfinished unit m (or, when m was never reached,
    # of the last finished unit, read again but not rebuilt), so a source that keeps positions (files,
    # datatrove readers, a streamed hf dataset) is not read again from its beginning; without tokens it
    # reads from the start.
    m = 0
    while (unit_path(work, m) / "unit.json").is_file():
        m += 1
    j = m if (work / f"u{m:06d}.start.json").is_file() else m - 1
    if j > 0 and (work / f"u{j:06d}.start.json").is_file():
        token = read_json(work / f"u{j:06d}.start.json")
        job.resumed(token)
        for k in range(j):
            if take(read_json(unit_path(work, k) / "unit.json")):
                _read_unit_again(job, work, k)
                return infos
        units = _recording(job, work, job.units(start=(j, token)), counts)
    else:
        units = _recording(job, work, job.units(), counts)

    if workers <= 1:
        for k, payload in units:
            if take(build_unit(job, k, payload, work)):
                break
        return infos
    # concurrent.futures, not multiprocessing.Pool: when a worker dies (killed, out of memory,
    # a crash in native code) Pool silently replaces it and waits forever for the unit it held;
    # the executor marks itself broken and the wait below raises instead.
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=_init, initargs=(job,))
    pending: deque = deque()
    try:
        it = units
        exhausted = False
        while True:
            while not exhausted and len(pending) < 2 * workers:
                nxt = next(it, None)
                if nxt is None:
                    exhausted = True
                    break
                k, payload = nxt
                done = unit_path(work, k) / "unit.json"
                pending.append((k, read_json(done) if done.is_file()
                                else pool.submit(_run, (k, payload, str(unit_path(work, k))))))
            if not pending:
                break
            res = pending[0][1]
            res = res if isinstance(res, dict) else res.result()
            pending.popleft()
            if isinstance(res, tuple):
                _raise(res)
            if take(res):
                break
    except BrokenProcessPool as e:
        flying = [k for k, r in pending if not isinstance(r, dict)]
        raise DataError(
            f"a prepare worker process died (killed, out of memory or crashed) while units "
            f"{flying[0]}..{flying[-1]} were being built in {work}; finished units are kept there, so "
            f"running the same command again resumes") from e
    finally:
        # units still in flight are not needed (or an error stopped us): their workers are
        # killed, and the temp folders they leave are removed with the work folder
        _kill(pool)
    return infos


def _kill(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now, running units included (the executor's public shutdown waits for them)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    # A unit's payload may still be on its way into the call queue's pipe when its reader is killed. CPython
    # 3.11.2 (Debian 12's python3.11; 3.11.7 does not) then waits for that write forever while the executor
    # winds down (its manager thread joins the queue's feeder thread): so the queue is told not to wait for it.
    call_queue = getattr(pool, "_call_queue", None)
    if call_queue is not None:
        call_queue.cancel_join_thread()
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    pool.shutdown(wait=True, cancel_futures=True)


def _read_unit_again(job: UnitJob, work: Path, k: int) -> None:
    """A rerun whose finished units suffice at unit ``k``, before the unit it resumed at: read unit ``k``
    again from its start token (nothing is built), so the job's read counts are the ones a read that
    stopped after unit ``k`` has."""
    start = work / f"u{k:06d}.start.json"
    if job.read_counts() is not None and start.is_file():
        token = read_json(start)
        job.resumed(token)
        next(iter(job.units(start=(k, token))), None)


def _recording(job: UnitJob, work: Path, units: Iterator[tuple[int, Any]],
               counts: dict[int, Any] | None = None) -> Iterator[tuple[int, Any]]:
    """``units``, writing each unfinished unit's start token to ``work/u<k>.start.json`` before it is built
    and putting the job's read counts as the unit is yielded into ``counts[k]``."""
    for k, payload in units:
        if counts is not None:
            counts[k] = job.read_counts()
        if not (unit_path(work, k) / "unit.json").is_file():
            token = job.start_token(k)
            if token is not None:
                write_json(work / f"u{k:06d}.start.json", token)
        yield k, payload


def build_unit(job: UnitJob, k: int, payload: Any, work: Path) -> dict:
    """Unit ``k``'s info: read from ``work`` when it is finished there, else built now (in this process)."""
    done = unit_path(work, k) / "unit.json"
    return read_json(done) if done.is_file() else _build(job, k, payload, unit_path(work, k))


def units_for(infos: list[dict], need: dict[str, int] | None, slack: float = 0.05) -> int | None:
    """How many units like ``infos`` (a sample from the start) hold ``need``: the plan of a distributed build.

    Each split with rows in the sample is extrapolated (plus ``slack``); the largest count
    wins. None when ``need`` is None (build until the source ends). A split the sample has no
    rows of is not estimated: the final in-order pass builds any units still missing.
    """
    if need is None:
        return None
    have = rows_so_far(infos)
    counts = [math.ceil(n * len(infos) / have[s] * (1 + slack)) for s, n in need.items() if n > 0 and have.get(s)]
    return max(counts, default=len(infos))


class Distributor:
    """Builds a job's units somewhere else before :func:`run_units` links them (``data/distributed.py``)."""

    def prebuild(self, job: UnitJob, work: Path, need: dict[str, int] | None) -> None:
        raise NotImplementedError


_DISTRIBUTOR: ContextVar[Distributor | None] = ContextVar("preschool_distributor", default=None)


@contextmanager
def distributed(dist: Distributor | None) -> Iterator[None]:
    """Within this block, every :func:`run_units` first hands its units to ``dist`` (None: no-op).

    Only where the units are built changes: they are the same units, written to the same
    work folder, so the output is byte-identical to the local engine's.
    """
    token = _DISTRIBUTOR.set(dist)
    try:
        yield
    finally:
        _DISTRIBUTOR.reset(token)


def rows_in_order(infos: list[dict], split: str, need: int | None) -> list[tuple[int, int]]:
    """``(unit, rows taken)`` of the units that supply the first ``need`` rows of ``split`` (all if None)."""
    out, have = [], 0
    for info in infos:
        n = int(info["rows"].get(split, 0))
        if need is not None:
            n = min(n, need - have)
        if n > 0:
            out.append((int(info["unit"]), n))
            have += n
        if need is not None and have >= need:
            break
    return out


def link_shards(out: str | Path, sets: list[tuple[Path, int]], **manifest_extra: Any) -> dict:
    """Write ``out/manifest.json``: a shard set made of the first ``rows`` rows of each set in ``sets``, in order.

    Whole shard files are listed by their path relative to ``out`` (no copy); a file
    used in part is copied, truncated, into ``out``. The result opens with ``ShardSet``
    and hashes (``content_sha256``) the same whoever wrote the parts.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files: list[dict] = []
    first: ShardSet | None = None
    for path, rows in sets:
        ss = ShardSet(path, verify="size")
        if first is None:
            first = ss
        elif (ss.row_len, ss.dtype, ss.array_names) != (first.row_len, first.dtype, first.array_names):
            raise ValueError(f"{path}: shard layout differs from {first.path}")
        left = rows
        for entry in ss.manifest["shards"]:
            if left <= 0:
                break
            take = min(left, int(entry["rows"]))
            new: dict[str, Any] = {"rows": take, "files": {}}
            for name, info in entry["files"].items():
                src = ss.path / info["name"]
                if take == entry["rows"]:
                    new["files"][name] = {**info, "name": os.path.relpath(src, out)}
                else:
                    fname = f"{name}-{len(files):05d}.bin"
                    arr = np.memmap(src, dtype=ss.dtype if name == "tokens" else np.dtype(_array_dtype(name)),
                                    mode="r", shape=(entry["rows"], ss.row_len))
                    head = np.asarray(arr[:take])
                    write_array(out / fname, head)
                    new["files"][name] = {"name": fname, "bytes": (out / fname).stat().st_size,
                                          "sha256": sha256_file(out / fname)}
                    if name == "tokens":
                        new["files"][name]["max_id"] = int(head.max())
            files.append(new)
            left -= take
    if first is None:
        raise ValueError(f"{out}: no rows to link")
    manifest = shard_manifest(first.row_len, first.dtype, first.vocab_size, first.array_names, files,
                              **manifest_extra)
    write_json(out / MANIFEST, manifest)
    return manifest


def _array_dtype(name: str):
    from .shards import OPTIONAL_ARRAYS

    return OPTIONAL_ARRAYS[name]


def adopt_units(work: Path, dest: Path, units: list[int]) -> None:
    """Move the used units from the resumable work folder into the output (``dest/u<k>``)."""
    dest.mkdir(parents=True, exist_ok=True)
    for k in units:
        os.replace(unit_path(work, k), unit_path(dest, k))


#: the record a work folder holds from its start: what it builds (``for``: the output's name; ``key``)
WORK_MARK = ".preschool-work.json"


def work_dir(final: Path, key: str) -> Path:
    """The resumable work folder of a job writing ``final`` (made, with its :data:`WORK_MARK`, if missing).

    Stale ones (other keys) are removed, but only those that are provably ours: named
    ``.<final>.work-<16 hex>`` and holding a WORK_MARK for ``final``. A folder of the user's named alike
    (``.pt.work-notes``), and one a version before the record left, are kept.
    """
    final = Path(final)
    ours = re.compile(rf"\.{re.escape(final.name)}\.work-[0-9a-f]{{16}}")
    for old in final.parent.glob(f".{final.name}.work-*"):
        if old.name == f".{final.name}.work-{key}" or not ours.fullmatch(old.name) or old.is_symlink():
            continue
        try:
            rec = json.loads((old / WORK_MARK).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("for") == final.name:
            shutil.rmtree(old, ignore_errors=True)
    work = final.parent / f".{final.name}.work-{key}"
    work.mkdir(parents=True, exist_ok=True)
    if not (work / WORK_MARK).is_file():
        (work / WORK_MARK).write_text(json.dumps({"for": final.name, "key": key}), encoding="utf-8")
    return work


def sum_counts(dicts: list[dict]) -> dict:
    """Key-wise sum of (nested) count dicts."""
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            if isinstance(v, dict):
                out[k] = sum_counts([out.get(k, {}), v])
            elif isinstance(v, (int, float)):
                out[k] = out.get(k, 0) + v
    return out
