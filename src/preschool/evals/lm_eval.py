"""Bridge to EleutherAI's lm-evaluation-harness: run its tasks on our checkpoints, offline.

Needs the optional extra: ``pip install 'preschool[lmeval]'`` (lm-eval plus
accelerate and peft, which its HF backend imports).

- :func:`run_lm_eval` runs any lm-eval task names (built-in, or YAML tasks in
  ``include_path``) on an in-memory HF model + tokenizer through lm-eval's
  ``HFLM`` backend, and restores the global Python/NumPy/torch RNG states that
  ``simple_evaluate`` reseeds.
- :func:`write_minimal_pair_task` turns BLiMP-format JSONL into a local lm-eval
  task (a YAML beside a JSONL copy of the selected pairs, both in a folder you
  give, e.g. a temp dir) that mirrors lm-eval's own BLiMP template: empty
  context, choices ``[sentence_good, sentence_bad]``, target 0, metric ``acc``,
  default target delimiter ``" "`` (so each sentence is scored with a leading
  space: ``minimal_pairs``' ``sentence_prefix=" "`` matches it exactly).
  It is how we check that our scorer's per-pair decisions equal lm-eval's
  (tests/evals/test_lm_eval.py, benchmarks/eval.py).
- The ``lm_eval`` evaluator runs lm-eval tasks from ``preschool eval`` and the
  runner, with metrics named ``<task>/<metric>``. ``num_fewshot`` is one count
  for every task or a per-task mapping (verify-ppt: arc_easy, openbookqa,
  social_iqa 5-shot, the rest 0-shot); tasks sharing a count run in one
  ``simple_evaluate`` call, and ``extra["n_shot"]`` records what each task ran with.
  Beside lm-eval's own metrics, each multiple-choice task gets the gold choice's
  log-likelihood, ``<task>/ll_correct`` and per character ``<task>/ll_correct_norm``
  (:func:`correct_choice_likelihoods`): accuracy's continuous proxy, which moves at
  scales where accuracy sits at chance (issue #30; DataDecide, Magnusson et al. 2025).

Known difference, kept on purpose: lm-eval's ``acc`` takes ``argmax`` over the
two log-likelihoods, so an exact tie counts as correct (index 0 wins);
``minimal_pairs`` gives ties 0.5. Pairs that are not ties get the same decision.
"""

from __future__ import annotations

import contextlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator

import numpy as np

from ..config import check
from ..errors import DataError, MissingDependency
from ..io import write_text
from .base import EVALUATORS, EvalResult, Evaluator
from .minimal_pairs import load_pairs


def require_lm_eval():
    """Import lm_eval (and its HF backend), or raise MissingDependency naming the extra."""
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM  # noqa: F401  (needs accelerate, peft)
    except ImportError as e:
        raise MissingDependency("lm-eval", extra="lmeval", purpose=f"running lm-eval-harness tasks ({e})") from None
    return lm_eval


@contextlib.contextmanager
def _preserve_rng() -> Iterator[None]:
    """simple_evaluate reseeds random/numpy/torch globally; put the caller's states back afterwards."""
    import torch

    py, npy, tt = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)
        torch.random.set_rng_state(tt)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def run_lm_eval(
    model,
    tokenizer,
    tasks: list[str],
    include_path: str | Path | None = None,
    batch_size: int = 32,
    limit: int | float | None = None,
    num_fewshot: int | None = None,
    log_samples: bool = False,
    include_defaults: bool = True,
) -> dict:
    """lm-eval's ``simple_evaluate`` results dict for ``tasks`` on an HF causal LM already in memory."""
    require_lm_eval()
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(include_path) if include_path else None, include_defaults=include_defaults)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    with _preserve_rng():
        res = simple_evaluate(model=lm, tasks=list(tasks), task_manager=tm, limit=limit, num_fewshot=num_fewshot,
                              log_samples=log_samples, bootstrap_iters=0, verbosity="ERROR")
    if res is None:  # non-zero ranks in distributed runs
        raise DataError("lm-eval returned no results")
    return res


def write_minimal_pair_task(
    pairs_path: str | Path,
    out_dir: str | Path,
    task: str = "preschool_minimal_pairs",
    max_pairs_per_paradigm: int | None = None,
    paradigms: list[str] | None = None,
    target_delimiter: str = " ",
) -> Path:
    """Write ``<out_dir>/<task>.yaml`` + ``<task>.jsonl`` (the selected pairs, in our order); returns the YAML path.

    Pair selection is :func:`minimal_pairs.load_pairs`'s, so doc ``i`` of the
    lm-eval task is row ``i`` of ``minimal_pairs``' items. ``target_delimiter``
    is lm-eval's default (``" "``, as in its BLiMP task), so the sentences are
    scored with a leading space; match it with ``sentence_prefix=" "`` on our side.
    """
    pairs, _ = load_pairs(pairs_path, paradigms, max_pairs_per_paradigm)
    out = Path(out_dir)
    data = out / f"{task}.jsonl"
    write_text(data, "".join(json.dumps({"sentence_good": p.good, "sentence_bad": p.bad, "UID": p.uid,
                                         "pairID": p.pair_id, "field": p.field,
                                         "linguistics_term": p.term}) + "\n" for p in pairs))
    # Same fields as lm-eval's tasks/blimp/_template_yaml, with a local JSON dataset instead of the hub.
    yaml = (
        f"task: {task}\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    train: {json.dumps(str(data.resolve()))}\n"
        "output_type: multiple_choice\n"
        "test_split: train\n"
        'doc_to_text: ""\n'
        "doc_to_target: 0\n"
        f"target_delimiter: {json.dumps(target_delimiter)}\n"
        'doc_to_choice: "{{[sentence_good, sentence_bad]}}"\n'
        "num_fewshot: 0\n"
        "metric_list:\n"
        "  - metric: acc\n"
        "    aggregation: mean\n"
        "    higher_is_better: true\n"
        "metadata:\n"
        "  version: 1.0\n"
    )
    ypath = out / f"{task}.yaml"
    write_text(ypath, yaml)
    return ypath


def pair_scores(results: dict, task: str) -> list[dict]:
    """Per-pair rows from a ``log_samples=True`` run of a minimal-pair task, in doc order.

    ``correct_lmeval`` is lm-eval's own decision (argmax; a tie picks index 0).
    """
    samples = (results.get("samples") or {}).get(task)
    if samples is None:
        raise DataError(f"no logged samples for task {task!r}; run with log_samples=True")
    rows = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        lls = [float(r[0]) for r in s["filtered_resps"]]
        doc = s["doc"]
        rows.append({"UID": doc.get("UID"), "pairID": doc.get("pairID"), "logp_good": lls[0], "logp_bad": lls[1],
                     "correct_lmeval": float(int(np.argmax(lls)) == int(s["target"]))})
    return rows


@dataclass
class LmEvalConfig:
    """lm-eval tasks to run on a checkpoint."""

    tasks: list[str] = field(default_factory=list)  # lm-eval task or group names
    include_path: str | None = None  # folder of extra task YAMLs (local data: offline)
    batch_size: int = 32
    limit: int | None = None  # first N docs per task (lm-eval's --limit); null = all
    # shots for every task, or {task: shots} (tasks not listed: their default); null = each task's default
    num_fewshot: int | dict[str, int] | None = None
    include_defaults: bool = True  # index lm-eval's built-in tasks too (slow); false = only include_path tasks

    def validate(self) -> None:
        check(len(self.tasks) > 0, "tasks", "give at least one lm-eval task name")
        shots = self.num_fewshot if isinstance(self.num_fewshot, dict) else {"": self.num_fewshot}
        for task, n in shots.items():
            at = f"num_fewshot.{task}" if task else "num_fewshot"
            check(not task or task in self.tasks, at, f"{task!r} is not one of tasks {self.tasks}")
            check(n is None or n >= 0, at, f"must be >= 0 or null, got {n}")
        check(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.limit is None or self.limit >= 1, "limit", f"must be >= 1 or null, got {self.limit}")
        check(self.include_defaults or self.include_path is not None, "include_defaults",
              "false needs an include_path holding the tasks")
        if self.include_path is not None:
            check(Path(self.include_path).is_dir(), "include_path", f"no such folder: {self.include_path}")

    def shot_groups(self) -> dict[int | None, list[str]]:
        """``{shots: [tasks]}`` in task order: the tasks each ``simple_evaluate`` call runs."""
        groups: dict[int | None, list[str]] = {}
        for t in self.tasks:
            n = self.num_fewshot.get(t) if isinstance(self.num_fewshot, dict) else self.num_fewshot
            groups.setdefault(n, []).append(t)
        return groups


def run_shot_groups(model, tokenizer, cfg: LmEvalConfig) -> dict:
    """lm-eval's results for every task of ``cfg``, one ``simple_evaluate`` per shot count, merged per task
    (``results``, ``versions``, ``n-samples``, ``n-shot``, ``higher_is_better``, and the per-document
    ``samples`` and task ``configs`` that :func:`correct_choice_likelihoods` reads)."""
    merged: dict[str, dict] = {k: {} for k in ("results", "versions", "n-samples", "n-shot", "higher_is_better",
                                               "samples", "configs")}
    for shots, tasks in cfg.shot_groups().items():
        res = run_lm_eval(model, tokenizer, tasks, cfg.include_path, cfg.batch_size, cfg.limit, shots,
                          log_samples=True, include_defaults=cfg.include_defaults)
        for key, part in merged.items():
            part.update(res.get(key) or {})
    return merged


def flatten_metrics(results: dict) -> dict[str, float]:
    """``{"<task>/<metric>": value}`` from lm-eval results; ``,none`` filter suffixes dropped, others kept as ``@``."""
    out = {}
    for task, entries in (results.get("results") or {}).items():
        for key, value in entries.items():
            if key == "alias" or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            name = key[:-len(",none")] if key.endswith(",none") else key.replace(",", "@")
            out[f"{task}/{name}"] = float(value)
    return out


def lm_eval_directions(results: dict, metrics: dict[str, float]) -> dict[str, bool]:
    """Of ``metrics`` (:func:`flatten_metrics` names), the direction lm-eval itself gives each one
    (``results["higher_is_better"][task][metric]``); metrics it says nothing about are left out."""
    out = {}
    for task, hib in (results.get("higher_is_better") or {}).items():
        for name, higher in (hib or {}).items():
            if not isinstance(higher, bool):
                continue
            for key in metrics:  # the metric itself and its filtered variants (``acc@strict``)
                if key == f"{task}/{name}" or key.startswith(f"{task}/{name}@"):
                    out[key] = higher
    return out


def correct_choice_likelihoods(results: dict) -> dict[str, float]:
    """The continuous proxy beside each multiple-choice task's ``acc``: ``<task>/ll_correct``, the gold
    choice's log-likelihood given the context (nats, mean over documents), and ``<task>/ll_correct_norm``,
    the same divided by the choice's length in characters (how ``acc_norm`` normalises), from a
    ``log_samples=True`` run's ``samples`` and ``configs``. Higher is better for both.

    Left out, rather than guessed: documents with several gold choices (a list target), tasks that put
    the choices in the context and score one continuation (``winogrande``'s partial scoring), other output
    types, and groups (a group's aggregate is lm-eval's to define; its subtasks each get the proxy).
    With ``acc_mutual_info`` the conditional log-likelihoods (the first half of the requests) are used.
    """
    out: dict[str, float] = {}
    for task, samples in (results.get("samples") or {}).items():
        conf = (results.get("configs") or {}).get(task) or {}
        if conf.get("output_type") != "multiple_choice" or not samples:
            continue
        delim = conf.get("target_delimiter") or ""
        mutual = any(isinstance(m, dict) and m.get("metric") == "acc_mutual_info" for m in conf.get("metric_list") or ())
        first_filter = samples[0].get("filter")
        lls, norms = [], []
        for smp in samples:
            if smp.get("filter") != first_filter:  # one row per document: the task's first filter
                continue
            args = [tuple(a) for a in smp["arguments"]]
            ll = [float(r[0]) for r in smp["filtered_resps"]]
            if mutual:
                args, ll = args[: len(args) // 2], ll[: len(ll) // 2]
            if len(args) > 1 and len({c for _, c in args}) == 1:  # choices in the context, one continuation
                continue
            choices = [c[len(delim):] if c.startswith(delim) else c for _, c in args]
            gold = smp.get("target")
            if isinstance(gold, str):
                gold = choices.index(gold) if gold in choices else None
            if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
                continue
            lls.append(ll[gold])
            norms.append(ll[gold] / max(len(choices[gold]), 1))
        if lls:
            out[f"{task}/ll_correct"] = float(np.mean(lls))
            out[f"{task}/ll_correct_norm"] = float(np.mean(norms))
    return out


@EVALUATORS.register("lm_eval", config=LmEvalConfig)
class LmEval(Evaluator):
    """Any lm-evaluation-harness task on our checkpoints via its HF backend (optional extra `lmeval`)."""

    version: ClassVar[str] = "2"  # 2: the correct choice's log-likelihood beside acc (ll_correct, ll_correct_norm)
    headline_metrics: ClassVar[tuple[str, ...]] = ("*/acc", "*/acc_norm", "*/f1", "*/em", "*/exact_match",
                                                   "*/word_perplexity")
    # every metric lm-eval returns for a configured task (ReCoRD's f1 and em, LAMBADA's perplexity, a filtered
    # exact_match@strict-match) is reportable, and so is each one's continuous proxy (issue #30: ll_correct,
    # ll_correct_norm move while accuracy is still at chance); standard errors are bookkeeping
    report_patterns: ClassVar[tuple[str, ...]] = ("*/*",)
    bookkeeping: ClassVar[tuple[str, ...]] = Evaluator.bookkeeping + ("*_stderr", "*_stderr@*")
    # lm-eval's own direction per metric is recorded with each result (lm_eval_directions); these patterns
    # serve the metrics it says nothing about (our ll_correct proxies) and summaries written before it did
    lower_is_better: ClassVar[tuple[str, ...]] = ("*/*perplexity*", "*/bits_per_byte*", "*/ter*")
    higher_is_better: ClassVar[tuple[str, ...]] = tuple(
        f"*/{m}{tail}" for m in ("acc", "acc_norm", "exact_match", "f1", "em", "mcc", "ll_correct", "ll_correct_norm")
        for tail in ("", "@*"))
    # accuracy of a uniform guess among each multiple-choice task's choices (a task not listed: none declared)
    chance: ClassVar[dict[str, float]] = {
        **{f"{t}/acc{tail}": 0.5 for t in ("piqa", "winogrande", "copa", "boolq", "blimp*")
           for tail in ("", "@*", "_norm", "_norm@*")},
        **{f"{t}/acc{tail}": 0.25 for t in ("hellaswag", "arc_easy", "arc_challenge", "openbookqa", "sciq", "race",
                                            "mmlu*") for tail in ("", "@*", "_norm", "_norm@*")},
        **{f"social_iqa/acc{tail}": 1 / 3 for tail in ("", "@*", "_norm", "_norm@*")}}

    def evaluate(self, model, tokenizer) -> EvalResult:
        lm_eval = require_lm_eval()
        cfg = self.cfg
        res = run_shot_groups(model, tokenizer, cfg)
        extra: dict[str, Any] = {"lm_eval_version": getattr(lm_eval, "__version__", None),
                                 "versions": res.get("versions"), "n_samples": res.get("n-samples"),
                                 "n_shot": res.get("n-shot"),
                                 # the token an empty context is conditioned on (lm-eval's rule: BOS, else EOS)
                                 "prefix_token_id": tokenizer.bos_token_id if tokenizer.bos_token_id is not None
                                 else tokenizer.eos_token_id}
        metrics = flatten_metrics(res)
        metrics.update(correct_choice_likelihoods(res))
        return EvalResult(metrics=metrics, extra=json.loads(json.dumps(extra, default=str)),
                          higher_is_better=lm_eval_directions(res, metrics))
