"""Multi-hop QA after a short supervised fine-tune, scored by SQuAD token F1 and exact match.

Follows the QA evaluation of "Lasting Effects of Abstract Pretraining Beyond
Perplexity" (Shinnick et al.; spec stack_and_compartmentalization.md A.4):
each benchmark gets its own fine-tuning run of **one epoch** on its training
examples (examples longer than the context are dropped), then the model
answers the dev questions and is scored with SQuAD-style token F1 on a
0-100 scale. Contexts: MuSiQue (answerable questions only) uses the gold
supporting paragraphs, HotpotQA and 2WikiMultiHopQA all supplied paragraphs
(distractor setting); ``context: gold`` gives gold paragraphs for all three
(the paper's question-structure breakdown).

The fine-tune runs on a *copy* of the model, so the checkpoint being
evaluated is never modified. It is a run of the staged trainer
(:mod:`preschool.train.finetune`) in ``<out_dir>/finetune/``, with its
checkpoints and exact resume: an evaluation cut short resumes its fine-tune
when run again (docs/evaluation.md). Each example is ``prompt + " " + answer + EOS``
with the loss on the answer tokens (and EOS) only; answers are produced by
greedy decoding, cut at the first newline, and compared with every gold
answer/alias (the best score counts).

Departures: the prompt template is ours (the paper's is not public); eval
prompts that exceed the context are truncated from the left (the start of the
context goes, the question stays) rather than dropped, and counted.

Input files (``.json`` holding a list, or a dict with a ``data`` list, or
``.jsonl``); field names read:

- **MuSiQue** (``*.jsonl``): ``id``, ``question``, ``answer``, ``answer_aliases``,
  ``answerable``, ``paragraphs[{title, paragraph_text, is_supporting}]``; the
  question type is the ``id`` prefix before ``__`` (e.g. ``2hop``).
- **HotpotQA** / **2WikiMultiHopQA** (``*.json``): ``_id``, ``question``,
  ``answer``, ``type``, ``context`` as ``[[title, [sentences]], ...]`` (or the
  HF layout ``{title: [...], sentences: [[...]]}``) and ``supporting_facts`` as
  ``[[title, sentence_index], ...]`` (or ``{title: [...], sent_id: [...]}``).
- **plain** (any): ``question``, ``context`` (string or list of strings),
  ``answer`` or ``answers`` (string, list, or SQuAD ``{"text": [...]}``),
  optional ``id`` and ``type``.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import json
import re
import shutil
import string
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..config import check
from ..errors import DataError, TrainingError
from .base import EVALUATORS, EvalResult, Evaluator, max_positions
from ..io import iter_jsonl
from ..seeds import QA_FINETUNE
from ..train.finetune import FineTuneConfig

FORMATS = ("auto", "musique", "hotpotqa", "2wiki", "plain")
FINETUNE_DIR = "finetune"  # the fine-tune's run folder inside the evaluator's output folder

# ----------------------------------------------------------------------------- SQuAD scoring

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and the articles a/an/the, squeeze spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 (0-1) between normalised prediction and gold; two empty answers score 1."""
    p = normalize_answer(prediction).split()
    g = normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    same = sum((collections.Counter(p) & collections.Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def best_scores(prediction: str, golds: list[str]) -> tuple[float, float]:
    """(F1, EM), each the maximum over the gold answers/aliases (0-1 scale)."""
    if not golds:
        raise DataError("an example has no gold answer")
    return max(f1_score(prediction, g) for g in golds), max(exact_match(prediction, g) for g in golds)


# ----------------------------------------------------------------------------- loaders


@dataclass
class QAExample:
    qid: str
    question: str
    context: str
    answers: list[str]
    qtype: str = ""


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number or list index, record) from .jsonl, or .json holding a list / ``{"data": [...]}``."""
    if not path.is_file():
        raise DataError(f"{path}: QA file not found")
    if path.suffix == ".jsonl":
        yield from iter_jsonl(path)
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":  # JSON lines under another suffix
            yield from iter_jsonl(path)
            return
        raise DataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of examples (or {{'data': [...]}})")
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise DataError(f"{path}: item {i} is not an object")
        yield i, rec


def _detect(rec: dict) -> str:
    if "paragraphs" in rec:
        return "musique"
    ctx = rec.get("context")
    if isinstance(ctx, dict) and "sentences" in ctx or (isinstance(ctx, list) and ctx and isinstance(ctx[0], list)):
        return "2wiki" if ("evidences" in rec or rec.get("type") in ("compositional", "inference", "bridge_comparison")) else "hotpotqa"
    return "plain"


def _titled_paragraphs(ctx: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(ctx, dict):  # HF layout
        titles, sents = ctx.get("title", []), ctx.get("sentences", [])
        pairs = list(zip(titles, sents))
    else:
        pairs = [(p[0], p[1]) for p in ctx]
    out = []
    for title, sents in pairs:
        if isinstance(sents, str):
            sents = [sents]
        out.append((str(title), " ".join(str(s).strip() for s in sents if str(s).strip())))
    if not out:
        raise DataError(f"{where}: empty 'context'")
    return out


def _support_titles(sf: Any) -> set[str]:
    if isinstance(sf, dict):
        return {str(t) for t in sf.get("title", [])}
    return {str(x[0]) for x in sf or [] if isinstance(x, (list, tuple)) and x}


def _answers(rec: dict, where: str) -> list[str]:
    a = rec.get("answers", rec.get("answer"))
    if isinstance(a, dict):
        a = a.get("text", [])
    if isinstance(a, str):
        a = [a]
    if not isinstance(a, list):
        raise DataError(f"{where}: no 'answer'/'answers' field")
    out = [str(x) for x in a if str(x).strip()]
    out += [str(x) for x in rec.get("answer_aliases", []) or [] if str(x).strip()]
    if not out:
        raise DataError(f"{where}: empty answer")
    return list(dict.fromkeys(out))


def _format_paragraphs(paras: list[tuple[str, str]]) -> str:
    return "\n".join(f"{t}: {p}" if t else p for t, p in paras)


def parse_example(rec: dict, fmt: str, context: str, where: str) -> QAExample | None:
    """One record -> :class:`QAExample` (None for MuSiQue's unanswerable questions)."""
    if fmt == "auto":
        fmt = _detect(rec)
    if "question" not in rec:
        raise DataError(f"{where}: no 'question' field")
    if fmt == "musique":
        if rec.get("answerable") is False:
            return None
        paras = rec.get("paragraphs")
        if not isinstance(paras, list):
            raise DataError(f"{where}: 'paragraphs' must be a list")
        use_gold = context in ("gold", "auto")
        chosen = [p for p in paras if not use_gold or p.get("is_supporting")]
        if not chosen:
            raise DataError(f"{where}: no supporting paragraph")
        text = _format_paragraphs([(str(p.get("title", "")), str(p.get("paragraph_text", ""))) for p in chosen])
        qid = str(rec.get("id", where))
        qtype = qid.split("__")[0] if "__" in qid else ""
        return QAExample(qid, str(rec["question"]), text, _answers(rec, where), qtype)
    if fmt in ("hotpotqa", "2wiki"):
        if "context" not in rec:
            raise DataError(f"{where}: no 'context' field")
        paras = _titled_paragraphs(rec["context"], where)
        if context == "gold":
            titles = _support_titles(rec.get("supporting_facts"))
            paras = [p for p in paras if p[0] in titles]
            if not paras:
                raise DataError(f"{where}: no paragraph matches 'supporting_facts'")
        return QAExample(str(rec.get("_id", rec.get("id", where))), str(rec["question"]),
                         _format_paragraphs(paras), _answers(rec, where), str(rec.get("type", "")))
    ctx = rec.get("context", "")
    if isinstance(ctx, list):
        ctx = "\n".join(str(c) for c in ctx)
    return QAExample(str(rec.get("id", rec.get("_id", where))), str(rec["question"]), str(ctx),
                     _answers(rec, where), str(rec.get("type", "")))


def load_qa(path: str | Path, fmt: str = "auto", context: str = "auto", limit: int | None = None) -> list[QAExample]:
    """Read a QA file into examples (see the module docstring for the field names)."""
    p = Path(path)
    out = []
    for where, rec in _records(p):
        ex = parse_example(rec, fmt, context, f"{p}:{where}")
        if ex is not None:
            out.append(ex)
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise DataError(f"{p}: no usable QA examples")
    return out


# ----------------------------------------------------------------------------- evaluator


@dataclass
class QAConfig(FineTuneConfig):
    """Fine-tune-then-answer QA evaluation (see module docstring); the fine-tune's settings (``epochs``,
    ``lr``, ``batch_size``, ``weight_decay``, ``warmup_steps``, ``schedule``, ``grad_clip``, ``seed``,
    ``checkpoint_every``) are :class:`~preschool.train.finetune.FineTuneConfig`'s."""

    eval_path: str = ""  # dev file
    train_path: str | None = None  # training file; None = no fine-tuning (zero-shot)
    format: str = "auto"  # auto | musique | hotpotqa | 2wiki | plain
    context: str = "auto"  # auto (MuSiQue gold, others all paragraphs) | gold | all
    prompt: str = "{context}\n\nQuestion: {question}\nAnswer:"
    max_train_examples: int | None = 20000
    max_eval_examples: int | None = None
    max_length: int | None = None  # context limit in tokens (None: the model's max positions)
    max_new_tokens: int = 16
    eval_batch_size: int = 16

    def validate(self) -> None:
        super().validate()
        check(bool(self.eval_path), "eval_path", "required (the dev file)")
        check(self.format in FORMATS, "format", f"must be one of {list(FORMATS)}, got {self.format!r}")
        check(self.context in ("auto", "gold", "all"), "context", f"must be 'auto', 'gold' or 'all', got {self.context!r}")
        check("{question}" in self.prompt, "prompt", "must contain {question}")
        check(self.max_train_examples is None or self.max_train_examples >= 1, "max_train_examples", "must be >= 1 or null")
        check(self.max_eval_examples is None or self.max_eval_examples >= 1, "max_eval_examples", "must be >= 1 or null")
        check(self.max_length is None or self.max_length >= 16, "max_length", "must be >= 16 or null")
        check(self.max_new_tokens >= 1, "max_new_tokens", "must be >= 1")
        check(self.eval_batch_size >= 1, "eval_batch_size", "must be >= 1")


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def finetune_rows(tokenizer, examples: list[QAExample], prompt: str, max_length: int | None) -> tuple[list, int]:
    """``([(prompt ids, answer ids + EOS)], dropped)``: the training rows, without the examples longer
    than ``max_length`` (as in the paper); DataError when the tokenizer has no EOS or nothing fits."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise DataError("tokenizer has no EOS token (needed to end answers)")
    rows, dropped = [], 0
    for ex in examples:
        p = _ids(tokenizer, prompt.format(context=ex.context, question=ex.question))
        a = _ids(tokenizer, " " + ex.answers[0].strip()) + [eos]
        if max_length is not None and len(p) + len(a) > max_length:
            dropped += 1  # as in the paper: training examples over the context length are excluded
            continue
        rows.append((p, a))
    if not rows:
        raise DataError(f"no training example fits in {max_length} tokens")
    return rows, dropped


def generate_answers(model, tokenizer, prompts: list[str], cfg: QAConfig, max_length: int | None) -> tuple[list[str], int]:
    """Greedy answers (cut at the first newline) and the number of prompts truncated on the left."""
    import torch

    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    device = next(model.parameters()).device
    enc = [_ids(tokenizer, p) for p in prompts]
    truncated = 0
    if max_length is not None:
        room = max_length - cfg.max_new_tokens
        if room < 1:
            raise DataError(f"max_length {max_length} leaves no room for {cfg.max_new_tokens} new tokens")
        for i, e in enumerate(enc):
            if len(e) > room:
                enc[i] = e[-room:]
                truncated += 1
    out = [""] * len(prompts)
    order = sorted(range(len(enc)), key=lambda i: -len(enc[i]))  # similar lengths share a batch
    model.eval()
    with torch.inference_mode():
        for s in range(0, len(order), cfg.eval_batch_size):
            idx = order[s: s + cfg.eval_batch_size]
            L = max(len(enc[i]) for i in idx)
            ids = torch.full((len(idx), L), pad, dtype=torch.long)
            att = torch.zeros((len(idx), L), dtype=torch.long)
            for r, i in enumerate(idx):  # left padding so every prompt ends at the last column
                ids[r, L - len(enc[i]):] = torch.tensor(enc[i])
                att[r, L - len(enc[i]):] = 1
            gen = model.generate(input_ids=ids.to(device), attention_mask=att.to(device), do_sample=False,
                                 max_new_tokens=cfg.max_new_tokens, pad_token_id=pad, eos_token_id=eos)
            for r, i in enumerate(idx):
                new = gen[r, L:].tolist()
                if eos in new:
                    new = new[: new.index(eos)]
                text = tokenizer.decode(new, skip_special_tokens=True)
                out[i] = text.split("\n", 1)[0].strip()
    return out, truncated


@EVALUATORS.register("qa_f1", config=QAConfig)
class QAF1Evaluator(Evaluator):
    """Multi-hop QA (MuSiQue / HotpotQA / 2Wiki): one-epoch fine-tune, greedy answers, SQuAD F1 and EM."""

    version = "2"  # 2: fine-tunes with the trainer's fused AdamW recipe and schedule functions
    higher_is_better = ("f1", "f1/*", "em")
    lower_is_better = ("train_loss_*",)  # the fine-tune's own loss at its start and end
    chance = {"f1": 0.0, "f1/*": 0.0, "em": 0.0}  # the score of an empty answer
    #: the fine-tune's run folder (set by :meth:`run` from its ``out_dir``; None: a temporary folder)
    work_dir: Path | None = None

    def run(self, model, tokenizer, out_dir: str | Path | None = None, checkpoint: str | None = None,
            **prov: Any) -> dict:
        """:meth:`Evaluator.run`; with ``out_dir``, the fine-tune trains in ``out_dir/finetune/``, where a
        rerun after an interruption resumes it, and which is deleted once ``summary.json`` is written."""
        self.work_dir = Path(out_dir) / FINETUNE_DIR if out_dir is not None else None
        try:
            summary = super().run(model, tokenizer, out_dir=out_dir, checkpoint=checkpoint, **prov)
            if self.work_dir is not None and self.work_dir.exists():
                shutil.rmtree(self.work_dir)  # a fine-tuned model copy with its optimizer state: no longer needed
        finally:
            self.work_dir = None
        return summary

    def fine_tune(self, model, tokenizer, examples: list[QAExample], limit: int | None) -> tuple[Any, dict]:
        """A fine-tuned copy of ``model`` (the checkpoint under evaluation is never modified) and the
        fine-tune's summary (``losses``, ``steps``, ``n_train``, ``n_dropped``; the rows longer than
        ``limit`` tokens dropped), trained in :attr:`work_dir` (None: a temporary folder)."""
        from ..train.finetune import finetune

        cfg: QAConfig = self.cfg
        rows, dropped = finetune_rows(tokenizer, examples, cfg.prompt, limit)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        m = copy.deepcopy(model)
        with contextlib.ExitStack() as stack:
            work = self.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qa-finetune-")))
            # the folder is this evaluator's scratch: one left by another checkpoint or config starts over
            ft = finetune(m, rows, cfg, work, pad_id=pad, salt=QA_FINETUNE, restart_stale=True)
        if not ft["finished"]:  # never score a half-trained copy
            raise TrainingError(f"{work}: the QA fine-tune stopped at step {ft['steps']} of {ft['total_steps']}"
                                + ("; run the evaluation again to resume it" if self.work_dir else ""))
        return m, {**ft, "n_train": len(rows), "n_dropped": dropped}

    def evaluate(self, model, tokenizer) -> EvalResult:
        cfg: QAConfig = self.cfg
        dev = load_qa(cfg.eval_path, cfg.format, cfg.context, cfg.max_eval_examples)
        limit = cfg.max_length or max_positions(model)
        extra: dict[str, Any] = {}
        metrics: dict[str, float] = {}
        m = model
        if cfg.train_path:
            train = load_qa(cfg.train_path, cfg.format, cfg.context, cfg.max_train_examples)
            m, ft = self.fine_tune(model, tokenizer, train, limit)
            losses = ft["losses"]
            k = max(1, min(10, len(losses) // 4))
            metrics.update({"train_loss_first": float(np.mean(losses[:k])), "train_loss_last": float(np.mean(losses[-k:])),
                            "n_train": float(ft["n_train"]), "n_train_dropped": float(ft["n_dropped"])})
            stride = max(1, len(losses) // 200)
            extra["train_losses"] = losses[::stride]
            extra["train_loss_stride"] = stride
        prompts = [cfg.prompt.format(context=ex.context, question=ex.question) for ex in dev]
        preds, truncated = generate_answers(m, tokenizer, prompts, cfg, limit)
        items, by_type = [], collections.defaultdict(list)
        for ex, pred in zip(dev, preds):
            f1, em = best_scores(pred, ex.answers)
            items.append({"id": ex.qid, "type": ex.qtype, "question": ex.question, "prediction": pred,
                          "answers": ex.answers, "f1": 100 * f1, "em": 100 * em})
            by_type[ex.qtype].append((f1, em))
        metrics["f1"] = 100 * float(np.mean([r["f1"] / 100 for r in items]))
        metrics["em"] = 100 * float(np.mean([r["em"] / 100 for r in items]))
        for t, v in sorted(by_type.items()):
            if t:
                metrics[f"f1/type/{t}"] = 100 * float(np.mean([f for f, _ in v]))
        metrics["n_eval"] = float(len(items))
        metrics["n_eval_truncated"] = float(truncated)
        extra["examples"] = items[:5]
        return EvalResult(metrics=metrics, items=items, extra=extra)
