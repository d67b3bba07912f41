"""DEPO k-hop accuracy per hop count on held-out instances.

The evaluation of "Lasting Effects of Abstract Pretraining Beyond Perplexity"
(DEPO from Physics of LMs 4.1): for each hop count k, ``instances`` fresh
documents from :class:`preschool.synthetic.depo.Depo` with the training task
parameters but a held-out ``seed`` and every query fixed to k. ``nodes: max``
(default) scores graphs of exactly ``n_nodes`` nodes, as the reference's
evaluation mode does (training draws n from 3..n_nodes); ``nodes: train`` keeps
the training distribution of n. The hop counts scored default to the
reference's evaluation set, the powers of two up to ``max_hops`` (1, 2, 4, ...) and
``max_hops`` itself when it is not one (:func:`reference_hops`). A query is
correct when the model's greedy answer reproduces the whole target word.
Greedy decoding of a word equals "argmax at every answer position given the
correct prefix", so one teacher-forced forward pass per document scores all
its queries (answers earlier in a document are context for later ones, as in
training).

Documents are rendered exactly as the training data: ``text`` (integers under
the model's tokenizer) or ``reserved`` (symbol s -> ``reserved_offset + s``,
default the tokenizer's vocabulary size), starting as a training row starts: a
DEPO document padded to ``length`` plus the packer's EOS fills one row when
``seq_len = length`` (the studies' setup), so a training document starts its row
and is never preceded by EOS; ``prepend_eos: true`` puts the EOS in front, as a
concat stream of shorter rows does.

Metrics: ``acc/k<k>`` (exact-match rate), ``nll/k<k>`` (mean answer-token
NLL, nats, fp32 log-softmax: per query the mean over its answer tokens, then
the mean over queries), ``acc`` and ``nll`` (means over the hop counts scored).
A report headlines both: the NLL is exact match's continuous proxy, lower is
better, and falls long before a whole answer word comes out right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from ..config import check
from ..errors import ConfigError, DataError
from ..synthetic import GENERATORS, Item
from .base import EVALUATORS, EvalResult, Evaluator


@dataclass
class DepoEvalConfig:
    task: dict = field(default_factory=dict)  # DEPO generator parameters used in training (n_nodes, max_hops, ...)
    hops: list[int] = field(default_factory=list)  # hop counts to score; [] = powers of two up to max_hops (reference)
    instances: int = 64  # held-out documents per hop count
    nodes: Literal["max", "train"] = "max"  # max = every graph has task n_nodes nodes (reference eval); train = as trained
    seed: int = 2_000_029  # held-out seed; must differ from the training seed (and from prepare's val seed, +1_000_003)
    render: Literal["text", "reserved"] = "text"
    reserved_offset: int | None = None  # reserved: id of symbol 0 (default: tokenizer vocab size)
    prepend_eos: bool = False  # EOS before each document (a concat stream's separator); training rows start without
    batch_size: int = 16

    def validate(self) -> None:
        check(self.instances >= 1, "instances", f"must be >= 1, got {self.instances}")
        check(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        check(self.seed != int(self.task.get("seed", 0)), "seed",
              f"held-out seed {self.seed} equals the training seed; instances would repeat training data")
        check(self.reserved_offset is None or self.reserved_offset >= 0, "reserved_offset", "must be >= 0")
        check(self.nodes in ("max", "train"), "nodes", f"must be 'max' or 'train', got {self.nodes!r}")
        check("hops" not in self.task, "task.hops", "set the hop counts to score with `hops`, not task.hops")
        try:
            cfg = GENERATORS.build_config("depo", {**self.task, "seed": self.seed})
        except ConfigError as e:
            raise ConfigError(f"task.{e.field}", str(e).split(": ", 1)[-1]) from None
        for i, k in enumerate(self.hops):
            check(1 <= k <= cfg.max_hops, f"hops[{i}]", f"must be in [1, max_hops={cfg.max_hops}], got {k}")


def reference_hops(max_hops: int) -> list[int]:
    """The reference evaluation's hop counts: the powers of two up to ``max_hops`` (1, 2, 4, ...), then
    ``max_hops`` itself when it is not a power of two (the reference appends it)."""
    hops = [1 << i for i in range(max_hops.bit_length()) if 1 << i <= max_hops]
    return hops if hops[-1] == max_hops else hops + [max_hops]


@EVALUATORS.register("depo", config=DepoEvalConfig)
class DepoEval(Evaluator):
    """DEPO k-hop exact-match accuracy per hop count on held-out instances (Beyond Perplexity)."""

    # 2: default hop set = powers of two (was 1..max_hops); 3: nll headlined, nll mean; 4: + max_hops when not a
    # power of two, no EOS in front of a prompt (training rows start without one)
    version: ClassVar[str] = "4"
    headline_metrics: ClassVar[tuple[str, ...]] = ("acc", "acc/*", "nll", "nll/*")
    # the mean and each hop count's accuracy (Beyond Perplexity's acquisition curves are per k), each beside
    # its continuous proxy, the answer NLL: it moves while exact match is still 0 (issue #30, DataDecide)
    report_patterns: ClassVar[tuple[str, ...]] = ("acc", "acc/k*", "nll", "nll/k*")
    lower_is_better: ClassVar[tuple[str, ...]] = ("nll", "nll/*")
    higher_is_better: ClassVar[tuple[str, ...]] = ("acc", "acc/*")
    cfg: DepoEvalConfig

    @classmethod
    def chance_level(cls, metric: str, params: dict | None = None) -> float | None:
        """Exact match's chance: a guess of one of the graph's n nodes, 1/n (n the task's ``n_nodes`` under
        ``nodes: max``, the expectation of 1/n over the training distribution of n under ``nodes: train``); the
        answer NLL has none."""
        if metric != "acc" and not metric.startswith("acc/"):
            return None
        params = params or {}
        try:
            task = GENERATORS.build_config("depo", {**(params.get("task") or {}), "seed": 0})
        except ConfigError:  # params its config refuses: it says so when it runs; no chance level to read here
            return None
        if params.get("nodes", "max") == "max":
            return 1.0 / task.n_nodes
        ns, probs = task.node_count_probs()
        return float((probs / ns).sum())

    def generator(self, k: int):
        fixed = {"n_nodes_dist": "fixed"} if self.cfg.nodes == "max" else {}
        return GENERATORS.build("depo", {**self.cfg.task, "seed": self.cfg.seed, "hops": [k], **fixed})

    def encoder(self, tokenizer):
        from ..synthetic.write import SymbolEncoder  # the shard-writing stack: not needed to list evaluators

        if self.cfg.render == "reserved":
            off = self.cfg.reserved_offset
            if off is None:
                if tokenizer is None:
                    raise ConfigError("reserved_offset", "give reserved_offset when no tokenizer is passed")
                off = len(tokenizer)
            return SymbolEncoder("reserved", reserved_offset=off)
        if tokenizer is None:
            raise ConfigError("render", "render=text needs the model's tokenizer")
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        return SymbolEncoder("text", backend.to_str(), max_digits=0)

    def documents(self, tokenizer) -> list[dict]:
        """Encoded held-out documents: ids, and per query its k and answer token span."""
        enc = self.encoder(tokenizer)
        eos = getattr(tokenizer, "eos_token_id", None) if self.cfg.prepend_eos and tokenizer is not None else None
        cfg_hops = self.cfg.hops or reference_hops(self.generator(1).cfg.max_hops)
        docs = []
        for k in cfg_hops:
            gen = self.generator(k)
            for i, it in zip(range(self.cfg.instances), gen.items(0, self.cfg.instances)):
                end = it.meta["answer_spans"][-1][1]  # drop the trailing padding
                d = enc.encode(Item(it.symbols[:end], it.loss_mask[:end], it.meta))
                ids, mask = d.ids, np.asarray(d.loss_mask, np.uint8)
                if eos is not None:
                    ids, mask = np.concatenate([[eos], ids]), np.concatenate([[0], mask])
                # contiguous runs of answer tokens, one per query (queries are separated by non-answer tokens)
                edges = np.flatnonzero(np.diff(np.concatenate([[0], mask, [0]])))
                spans = list(zip(edges[::2].tolist(), edges[1::2].tolist()))
                if len(spans) != len(it.meta["queries"]):
                    raise DataError(f"depo instance {i}, k={k}: {len(spans)} answer spans after rendering, "
                                    f"expected {len(it.meta['queries'])}")
                docs.append({"k": k, "instance": i, "ids": ids, "spans": spans})
        return docs

    def evaluate(self, model, tokenizer) -> EvalResult:
        import torch

        docs = self.documents(tokenizer)
        vocab = getattr(getattr(model, "config", None), "vocab_size", None)
        top = max(int(d["ids"].max()) for d in docs)
        if vocab is not None and top >= vocab:
            raise DataError(f"depo: token id {top} >= model vocab_size {vocab} (render={self.cfg.render}; "
                            f"reserved ids need the model's vocabulary to include them)")
        try:
            device = next(model.parameters()).device
        except StopIteration:
            device = torch.device("cpu")
        rows = []
        with torch.inference_mode():
            for b in range(0, len(docs), self.cfg.batch_size):
                batch = docs[b: b + self.cfg.batch_size]
                L = max(len(d["ids"]) for d in batch)
                ids = np.zeros((len(batch), L), np.int64)
                att = np.zeros((len(batch), L), np.int64)
                for r, d in enumerate(batch):  # right padding: causal positions before it are unaffected
                    ids[r, : len(d["ids"])] = d["ids"]
                    att[r, : len(d["ids"])] = 1
                x = torch.as_tensor(ids, device=device)
                out = model(input_ids=x, attention_mask=torch.as_tensor(att, device=device))
                logits = (out.logits if hasattr(out, "logits") else out).float()
                logp = torch.log_softmax(logits, -1)
                pred = logits.argmax(-1).cpu().numpy()
                for r, d in enumerate(batch):
                    for q, (a, e) in enumerate(d["spans"]):
                        tgt = ids[r, a:e]
                        correct = bool(np.all(pred[r, a - 1: e - 1] == tgt))
                        nll = -logp[r, torch.arange(a - 1, e - 1), torch.as_tensor(tgt, device=device)]
                        rows.append({"k": d["k"], "instance": d["instance"], "query": q, "correct": correct,
                                     "answer_tokens": int(e - a), "nll": float(nll.double().mean())})
        metrics: dict[str, float] = {}
        ks = sorted({r["k"] for r in rows})
        for k in ks:
            sel = [r for r in rows if r["k"] == k]
            metrics[f"acc/k{k}"] = float(np.mean([r["correct"] for r in sel]))
            metrics[f"nll/k{k}"] = float(np.mean([r["nll"] for r in sel]))
            metrics[f"n/k{k}"] = float(len(sel))
        metrics["acc"] = float(np.mean([metrics[f"acc/k{k}"] for k in ks]))
        metrics["nll"] = float(np.mean([metrics[f"nll/k{k}"] for k in ks]))
        return EvalResult(metrics=metrics, items=rows, extra={"hops": ks, "render": self.cfg.render})
