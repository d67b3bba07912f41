"""Experiments: one YAML names the data, the model and the arms; one command runs it all.

``preschool run EXPERIMENT.yaml`` does, in order, skipping whatever is
already done (so an interrupted run resumes and ends with the same numbers):

1. validate the whole config (unknown keys, unknown presets/generators/
   evaluators, bad budgets, missing files) before any work;
2. ``prepare``: tokenizer + shard sets for every named dataset (data/prepare.py),
   plus the storybook minimal pairs when asked for;
   derived datasets (``kind:``, e.g. ``compartmented``; data/builders/derived.py) are built
   from the datasets they read;
3. train every arm x seed with the staged trainer (train/trainer.py), which
   resumes from its last checkpoint, with the callbacks the arm names
   (``callbacks: {name: config}``, train/callbacks/registry.py);
4. evaluate every checkpoint of every arm with the configured evaluators
   (results cached per checkpoint and evaluator version);
5. write ``report.md``, ``results.json`` and plots (analysis/report.py), with the
   analysis sections ``report.sections`` names (analysis/sections.py).

Ladders: ``ladder:`` runs the same arms at several *rungs* (model sizes); each rung sets the model
and scales every stage's token budget by the ladder's rule (:class:`LadderSpec`). Each rung x arm x
seed is an ordinary run in ``<out>/rungs/<rung>/arms/<arm>/seed<k>``; the data is shared. A config
with ``rung: <name>`` (``--rung``) is the view of one rung (:meth:`ExperimentConfig.at_rung`), which is
what every step below trains, evaluates and reports; docs/ladder.md.

Seeds: ``seed`` is the data seed, ``seeds`` the training seeds of the arm x seed
grid; what each changes is documented once, in ``preschool/seeds.py``.

Parts from outside the package (your own generators, evaluators, sections...)
come from ``plugins: [my_lab.tasks, ./my_tasks.py, ./my_tasks/]`` (paths relative
to the YAML's folder; ``preschool.plugins``), imported before the rest is read.

Layout under ``out``::

    experiment.yaml                 the resolved config (+ plugins_used: each plug-in's version, sha256)
    data/                           tokenizer + shard sets + manifest.json
    arms/<arm>/seed<k>/             one trainer run folder (docs/interfaces.md)
    rungs/<rung>/arms/<arm>/seed<k>/  the same, per rung of a ladder
    report.md, results.json, plots/
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from .config import Partial, check, from_dict, overlay, to_dict, validate
from .data.prepare import DatasetSpec
from .data.tokenizer import TokenizerConfig
from .errors import ConfigError
from .seeds import check_seed
from .evals.runner import EvalSpec  # noqa: F401  (re-exported: experiment YAML schema)
from .train.configs import StageConfig, TrainConfig  # not .trainer: validation needs no torch
from .train.model import ModelConfig
from . import layout

# What the `train:` sections (shared, and per arm) may set: TrainConfig fields, except those with their own key.
TRAIN_OVERLAY = Partial(TrainConfig, exclude={
    "model": "the model is set under `model:` (shared) or `arms[i].model`, not inside `train:`",
    "stages": "stages belong to an arm: `arms[i].stages`",
    "seed": "training seeds are the experiment's `seeds:` (the data seed is `seed:`)"})
TrainOverlay = Annotated[dict[str, Any], TRAIN_OVERLAY]
ModelOverlay = Annotated[dict[str, Any], Partial(ModelConfig)]


@dataclass
class ArmSpec:
    """One arm: a list of stages, overlays of the shared train and model settings (fields it sets
    differently; checked and typed on load), the registered callbacks it trains with, and dataset aliases."""

    name: str
    stages: list[StageConfig] = field(default_factory=list)
    train: TrainOverlay = field(default_factory=dict)
    model: ModelOverlay = field(default_factory=dict)
    callbacks: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> config (train/callbacks/registry.py)
    # names this arm's stages and val read under another dataset of `data`, e.g. {novels: novels_shifted}:
    # the arm trains on (and logs val/novels for) novels_shifted
    datasets: dict[str, str] = field(default_factory=dict)

    def validate(self) -> None:
        layout.check_name(self.name, "name", "arm")  # <out>/arms/<name>/
        check(len(self.stages) > 0, "stages", "an arm needs at least one stage")
        from .train.callbacks.registry import callback_configs

        callback_configs(self.callbacks)


@dataclass
class MinimalPairsSpec:
    """Storybook grammar minimal pairs to write under data/minimal_pairs/ (BLiMP JSONL)."""

    per_paradigm: int = 0  # 0 = none
    seed: int = 0


@dataclass
class DownstreamGroups:
    """Named groups of downstream metrics (``report.efficiency.downstream: {groups: ..., average: groups}``).

    Each group's per-checkpoint mean is the report metric ``downstream/<group>``; ``downstream/avg`` is the mean of
    the group means (``average: groups``, verify-ppt's average of its four category scores) or of every metric
    of every group (``average: tasks``, one weight per task)."""

    groups: dict[str, list[str]] = field(default_factory=dict)  # group name -> metrics (lm_eval/<task>/<metric>)
    average: Literal["groups", "tasks"] = "groups"

    def validate(self) -> None:
        check(len(self.groups) > 0, "groups", "name at least one group of metrics")
        seen: dict[str, str] = {}
        for g, metrics in self.groups.items():
            check(bool(g) and "/" not in g and g != "avg", f"groups.{g}",
                  "a group name is a plain word other than 'avg' (its report metric is downstream/<group>)")
            check(len(metrics) > 0, f"groups.{g}", "a group needs at least one metric")
            for m in metrics:
                check(m not in seen, f"groups.{g}", f"{m} is already in group {seen.get(m)!r}")
                seen[m] = g

    def metrics(self) -> list[str]:
        """Every metric of every group, in order."""
        return [m for ms in self.groups.values() for m in ms]


@dataclass
class EfficiencySpec:
    """Token efficiency as the papers report it (analysis/efficiency.py; docs/evaluation.md)."""

    # per metric: a value to reach, or "baseline@<step>" (the baseline's value at that checkpoint step);
    # metrics not listed aim at the baseline's final value
    targets: dict[str, float | str] = field(default_factory=dict)
    # metrics averaged per checkpoint into "downstream/avg" (verify-ppt measures tokens saved on it): a list
    # (one flat mean, e.g. [lm_eval/hellaswag/acc_norm, lm_eval/piqa/acc]) or named groups
    # ({groups: {rc: [...], lm: [...]}, average: groups}: downstream/<group> each, and the mean of the groups)
    downstream: list[str] | DownstreamGroups = field(default_factory=list)
    # when a curve reaches its target: "stays" (from the checkpoint after which it stays there: the efficiency
    # table cannot then contradict the stable-gain one) or "first" (its first checkpoint there; spec A.7's reading)
    crossing: str = "stays"

    def validate(self) -> None:
        from .analysis.efficiency import check_crossing

        check_crossing(self.crossing)
        for m, t in self.targets.items():
            if isinstance(t, str):
                ok = t.startswith("baseline@") and t[len("baseline@"):].isdigit()
                check(ok, f"targets.{m}", f"must be a number or 'baseline@<step>', got {t!r}")
            else:
                check(isinstance(t, (int, float)), f"targets.{m}", f"must be a number or 'baseline@<step>', got {t!r}")
        if isinstance(self.downstream, list):
            check(len(set(self.downstream)) == len(self.downstream), "downstream", "lists a metric twice")


@dataclass
class ReportSpec:
    baseline: str | None = None  # arm the others are compared with (default: the first arm)
    window: float = 0.5  # stable gain over the last `window` fraction of each metric's axis
    # x axis per metric prefix ("val/depo", "depo", "minimal_pairs/acc"): "pt" (language tokens) or a
    # dataset name (that source's tokens); unlisted metrics follow analysis/compute.py metric_axes
    axes: dict[str, str] = field(default_factory=dict)
    efficiency: EfficiencySpec = field(default_factory=EfficiencySpec)
    # analysis sections (analysis/sections.py; e.g. slowdown, plateau, similarity, audit_gap): name -> config
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    compare: list[list[str]] = field(default_factory=list)  # [arm, reference] pairs the sections compare by seed

    def validate(self) -> None:
        from .analysis.sections import build_section

        # a NaN window compares false with everything: every checkpoint fell outside and the verdict was NaN
        check(0 < self.window <= 1, "window", f"must be in (0, 1] (the last fraction of each axis), got {self.window}")
        for name, params in self.sections.items():
            build_section(name, params, "sections")


@dataclass
class LanguageRule:
    """How a ladder sets each rung's language budget (the stages with ``counts_as_pt``).

    Every rule fixes a target T for the *baseline* arm's language tokens at the rung (``report.baseline``,
    else the first arm); each arm's language stages are multiplied by T / (the baseline's language tokens
    in the YAML), so arms that train equal language budgets in the YAML still do at every rung.

    - ``per_param``: T = ``ratio`` x N, N the rung model's ``params`` (``non_embedding``: Kaplan's N,
      known from the shape alone; ``total``: with the embeddings at ``tokenizer.vocab_size``), e.g. 20
      (Chinchilla);
    - ``multiplier``: T = the rung's ``multiplier`` x the YAML's budget;
    - ``explicit``: T = the rung's ``tokens``.
    """

    rule: Literal["per_param", "multiplier", "explicit"] = "per_param"
    ratio: float = 20.0  # per_param: language tokens per parameter
    params: Literal["non_embedding", "total"] = "non_embedding"

    def validate(self) -> None:
        check(self.ratio > 0, "ratio", f"must be > 0, got {self.ratio}")


@dataclass
class SyntheticRule:
    """How a ladder sets the budgets of stages that do not count as PT (synthetic / PPT stages).

    - ``fraction``: the arm's synthetic tokens at the rung are ``fraction`` x its language tokens at the rung,
      shared among its synthetic stages as in the YAML (no ``fraction``: the arm's own ratio in the YAML, so
      the dose the YAML states holds at every rung);
    - ``fixed``: the YAML's tokens at every rung.
    """

    rule: Literal["fraction", "fixed"] = "fraction"
    fraction: float | None = None

    def validate(self) -> None:
        check(self.fraction is None or self.fraction > 0, "fraction", f"must be > 0, got {self.fraction}")
        check(self.fraction is None or self.rule == "fraction", "fraction", "only with rule: fraction")


@dataclass
class RungSpec:
    """One rung: its model (an overlay of the shared ``model:``: a ``preset``, or ``overrides`` for a
    shape), its own ``train:`` settings (say a lower lr at a larger size), and the value its ladder's
    language rule reads (``multiplier`` or ``tokens``)."""

    name: str
    model: ModelOverlay = field(default_factory=dict)
    train: TrainOverlay = field(default_factory=dict)
    multiplier: float | None = None  # tokens.rule: multiplier
    tokens: int | None = None  # tokens.rule: explicit: the baseline arm's language tokens at this rung

    def validate(self) -> None:
        layout.check_name(self.name, "name", "rung")  # <out>/rungs/<name>/
        check(self.multiplier is None or self.multiplier > 0, "multiplier", f"must be > 0, got {self.multiplier}")
        check(self.tokens is None or self.tokens > 0, "tokens", f"must be > 0, got {self.tokens}")


@dataclass
class LadderSpec:
    """The same arms at several rungs, listed from the smallest to the largest (docs/ladder.md)."""

    rungs: list[RungSpec] = field(default_factory=list)
    tokens: LanguageRule = field(default_factory=LanguageRule)
    synthetic: SyntheticRule = field(default_factory=SyntheticRule)

    def validate(self) -> None:
        check(len(self.rungs) > 0, "rungs", "a ladder needs at least one rung")
        names = [r.name for r in self.rungs]
        check(len(set(names)) == len(names), "rungs", f"rung names must be unique, got {names}")
        for k, r in enumerate(self.rungs):
            rule = self.tokens.rule
            check(rule == "multiplier" or r.multiplier is None, f"rungs[{k}].multiplier",
                  f"only with tokens.rule: multiplier (the rule is {rule})")
            check(rule == "explicit" or r.tokens is None, f"rungs[{k}].tokens",
                  f"only with tokens.rule: explicit (the rule is {rule})")
            check(rule != "multiplier" or r.multiplier is not None, f"rungs[{k}].multiplier",
                  "tokens.rule: multiplier needs each rung's multiplier")
            check(rule != "explicit" or r.tokens is not None, f"rungs[{k}].tokens",
                  "tokens.rule: explicit needs each rung's tokens (the baseline arm's language tokens)")

    def rung(self, name: str) -> RungSpec:
        return self.rungs[self.index(name)]

    def index(self, name: str) -> int:
        """The rung's position in ``rungs`` (what ``ladder.rungs[k]`` in an error names)."""
        return [r.name for r in self.rungs].index(name)


@dataclass
class ExperimentConfig:
    name: str
    out: str | None = None  # default: runs/<name>
    # plug-ins with parts from outside preschool: modules, .py files, folders (preschool/plugins.py), imported
    # before the rest of the config is read; relative paths are relative to the YAML's folder (saved absolute)
    plugins: list[str] = field(default_factory=list)
    seed: int = 0  # data seed
    seeds: list[int] = field(default_factory=lambda: [0])  # training seeds; each arm runs once per seed
    seq_len: int = 128
    workers: int = 1  # data-generation processes
    corpora: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> CorpusConfig fields
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    data: dict[str, DatasetSpec] = field(default_factory=dict)
    minimal_pairs: MinimalPairsSpec = field(default_factory=MinimalPairsSpec)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainOverlay = field(default_factory=dict)  # TrainConfig fields shared by all arms
    arms: list[ArmSpec] = field(default_factory=list)
    evals: list[EvalSpec] = field(default_factory=list)
    report: ReportSpec = field(default_factory=ReportSpec)
    ladder: LadderSpec | None = None  # the same arms at several model sizes (docs/ladder.md)
    # with a ladder: the one rung this config is a view of (``preschool run --rung``; at_rung); None: all
    rung: str | None = None

    def validate(self) -> None:
        layout.check_name(self.name, "name", "experiment")  # the default out is runs/<name>
        for dname in self.data:
            layout.check_dataset_name(dname)
        check(self.seq_len >= 8, "seq_len", f"must be >= 8, got {self.seq_len}")
        check(len(self.seeds) > 0, "seeds", "give at least one training seed")
        for i, s in enumerate(self.seeds):  # each one names a run folder, arms/<arm>/seed<k>
            check_seed(s, f"seeds[{i}]")
            check(s not in self.seeds[:i], f"seeds[{i}]", f"seed {s} is given twice; each seed runs once")
        check(len(self.arms) > 0, "arms", "an experiment needs at least one arm")
        # the rung a view names exists (every check below resolves the arms at it)
        rungs = [r.name for r in self.ladder.rungs] if self.ladder is not None else []
        check(self.rung is None or self.ladder is not None, "rung",
              f"{self.rung!r}, but the experiment has no `ladder:`")
        check(self.rung is None or self.rung in rungs, "rung",
              f"no rung named {self.rung!r}; the ladder has {rungs}")
        check(self.workers >= 1, "workers", f"must be >= 1, got {self.workers}")
        names = [a.name for a in self.arms]
        check(len(set(names)) == len(names), "arms", f"arm names must be unique, got {names}")
        from .corpora import CorpusConfig

        for cname, c in self.corpora.items():
            cfg = from_dict(CorpusConfig, c, f"corpora.{cname}")
            path = getattr(cfg, "path", None)
            if path is not None and not Path(path).exists():
                raise ConfigError(f"corpora.{cname}.path", f"file or folder not found: {path}")
        for dname, d in self.data.items():
            d.check_refs(dname, self)  # the corpora and datasets it names (each spec variant knows its own)
        for prefix, axis in self.report.axes.items():
            check(axis == "pt" or axis in self.data, f"report.axes.{prefix}",
                  f"must be 'pt' (language tokens) or a dataset name ({sorted(self.data)}), got {axis!r}")
        for i, arm in enumerate(self.arms):
            for alias, target in arm.datasets.items():
                check(target in self.data, f"arms[{i}].datasets.{alias}",
                      f"no dataset named {target!r}; have {sorted(self.data)}")
            readable = set(self.data) | set(arm.datasets)
            cfg = self.train_config(arm, self.seeds[0], f"arms[{i}]")
            for j, st in enumerate(cfg.stages):
                for s in st.datasets:
                    check(s in readable, f"arms[{i}].stages[{j}].data",
                          f"no dataset named {s!r}; have {sorted(readable)}")
            # the trainer resolves 'auto' from the prepared shards; with no dataset to read it from, say so now
            check(cfg.reserved_ids != "auto" or self.renders_reserved(), self.written_at(arm, f"arms[{i}]", "reserved_ids"),
                  f"'auto', but no dataset of `data` renders symbols on reserved ids ({', '.join(sorted(self.data))}); "
                  "give [lo, hi) or a dataset with render: reserved")
            known = set(self._arm_names(arm))
            where = self.written_at(arm, f"arms[{i}]", "val")
            for v in cfg.val or []:  # no val list: every stage dataset with a val/ split is scored
                check(v in known, where, f"no dataset or part named {v!r}; have {sorted(known)}")
                empty = self._without_val(arm.datasets.get(v, v))
                check(empty is None, where, f"{v!r} will have no val/ split to score: data.{empty}.val_tokens is 0; "
                      f"set data.{empty}.val_tokens > 0 or leave {v!r} out of val")
            for name, cb in self._callback_configs(arm, i).items():
                for dep in getattr(cb, "arms_needed", lambda: [])():
                    check(dep in names[:i], f"arms[{i}].callbacks.{name}",
                          f"needs arm {dep!r} trained first: it must name an earlier arm ({names[:i]})")
        if self.report.baseline is not None:
            check(self.report.baseline in names, "report.baseline", f"no arm named {self.report.baseline!r}")
        for i, pair in enumerate(self.report.compare):
            check(len(pair) == 2 and all(x in names for x in pair) and pair[0] != pair[1], f"report.compare[{i}]",
                  f"must be [arm, reference] naming two different arms, got {pair}")
        # each EvalSpec validated itself on load (evals[i].name / .every); two filed under one name would overwrite
        keys = [e.key for e in self.evals]
        for i, k in enumerate(keys):
            check(k not in keys[:i], f"evals[{i}].label", f"{k!r} already files evals[{keys.index(k)}]'s results; "
                  "give each evaluator run its own label")
        self._validate_ladder()

    def _validate_ladder(self) -> None:
        """Every rung x arm resolves (model, scaled budgets; an error names the rung); no key set twice."""
        if self.ladder is None:
            return
        base = self.baseline_arm()
        check(self._language_tokens(base) > 0, "ladder.tokens",
              f"the baseline arm {base.name!r} has no stage that counts as PT: a ladder scales language budgets "
              "against the baseline's (report.baseline)")
        for k, r in enumerate(self.ladder.rungs):
            for i, arm in enumerate(self.arms):
                for key in ("model", "train"):
                    both = sorted(set(getattr(r, key)) & set(getattr(arm, key)))
                    check(not both, f"ladder.rungs[{k}].{key}.{both[0] if both else ''}",
                          f"arm {arm.name!r} sets it too (arms[{i}].{key}); set it on the rung or the arm, not both")
                sf = self.ladder.synthetic
                check(not (sf.rule == "fraction" and sf.fraction is not None and self._language_tokens(arm) == 0
                           and any(not st.counts_as_pt for st in arm.stages)), "ladder.synthetic.fraction",
                      f"arm {arm.name!r} trains no language tokens to take a fraction of")
                self.at_rung(r.name).train_config(arm, self.seeds[0], f"arms[{i}]")

    # ----------------------------------------------------------------------------- ladder rungs

    def baseline_arm(self) -> ArmSpec:
        """The arm the others are compared with (``report.baseline``, else the first)."""
        name = self.report.baseline or self.arms[0].name
        return next(a for a in self.arms if a.name == name)

    @staticmethod
    def _language_tokens(arm: ArmSpec) -> int:
        return sum(st.tokens for st in arm.stages if st.counts_as_pt)

    def at_rung(self, rung: str) -> "ExperimentConfig":
        """The view of one rung of the ladder: the same experiment with ``rung`` set, whose arms train the
        rung's model and budgets (:meth:`train_config`) in ``<out>/rungs/<rung>/`` (:attr:`runs_root`)."""
        from dataclasses import replace

        if self.ladder is None:
            raise ConfigError("rung", f"{rung!r}, but the experiment has no `ladder:`")
        names = [r.name for r in self.ladder.rungs]
        if rung not in names:
            raise ConfigError("rung", f"no rung named {rung!r}; the ladder has {names}")
        return replace(self, rung=rung)

    def rung_views(self) -> list["ExperimentConfig"]:
        """What the runner trains, evaluates and checks: every rung's view of a ladder (in the ladder's
        order), or this config alone (no ladder, or already one rung's view)."""
        if self.ladder is None or self.rung is not None:
            return [self]
        return [self.at_rung(r.name) for r in self.ladder.rungs]

    def ladder_views(self) -> list["ExperimentConfig"]:
        """Every rung's view of the ladder (whichever rung this config is a view of), ladder order; [] without
        a ladder (what a report's ladder section reads: analysis/ladder.py)."""
        if self.ladder is None:
            return []
        from dataclasses import replace

        return replace(self, rung=None).rung_views()

    def report_view(self) -> "ExperimentConfig":
        """The config the standard report tables read: a ladder's largest (last) rung, unless a rung is set."""
        return self.rung_views()[-1]

    @property
    def runs_root(self) -> Path:
        """The folder holding ``arms/``: ``out``, or a rung's ``<out>/rungs/<rung>``."""
        return layout.rung_dir(self.out_dir, self.rung)

    def _rung_model(self, arm: ArmSpec) -> ModelConfig:
        """The arm's model at this config's rung (shared, then the arm's, then the rung's overlay)."""
        model = overlay(self.model, arm.model)
        return overlay(model, self.ladder.rung(self.rung).model) if self.rung is not None else model

    def rung_language_tokens(self) -> int:
        """The baseline arm's language tokens at this config's rung (the YAML's without a rung)."""
        base = self.baseline_arm()
        yaml_tokens = self._language_tokens(base)
        if self.rung is None:
            return yaml_tokens
        rung, rule = self.ladder.rung(self.rung), self.ladder.tokens
        if rule.rule == "multiplier":
            return max(1, round(rung.multiplier * yaml_tokens))
        if rule.rule == "explicit":
            return int(rung.tokens)
        from .train.model import describe, embedding_rows

        model = self._rung_model(base)
        try:
            validate(model)
        except ConfigError as e:
            k = self.ladder.index(self.rung)
            raise ConfigError(f"ladder.rungs[{k}].model.{e.field}", e.message) from None
        if rule.params == "total":
            from .data.tokenizer import DEFAULT_BPE_VOCAB

            vocab = self.tokenizer.vocab_size or (DEFAULT_BPE_VOCAB if self.tokenizer.kind == "train" else None)
            check(vocab is not None, "ladder.tokens.params",
                  "'total' counts the embeddings at tokenizer.vocab_size: set it, or count non_embedding")
            n = describe(model, embedding_rows(model, vocab))["params_total"]
        else:
            n = describe(model, 2)["params_non_embedding"]  # no embedding: any vocabulary gives the same
        return max(1, round(rule.ratio * n))

    def _rung_stages(self, arm: ArmSpec) -> list[StageConfig]:
        """The arm's stages with this rung's budgets (:class:`LanguageRule`, :class:`SyntheticRule`)."""
        from dataclasses import replace

        if self.rung is None:
            return arm.stages
        factor = self.rung_language_tokens() / self._language_tokens(self.baseline_arm())
        lang = {j: max(1, round(st.tokens * factor)) for j, st in enumerate(arm.stages) if st.counts_as_pt}
        rule = self.ladder.synthetic
        synth = [j for j, st in enumerate(arm.stages) if not st.counts_as_pt]
        yaml_synth = sum(arm.stages[j].tokens for j in synth)
        if rule.rule == "fixed":
            total = yaml_synth
        elif rule.fraction is None:
            total = yaml_synth * factor
        else:
            total = rule.fraction * sum(lang.values())
        out = dict(lang)
        for j in synth:
            out[j] = max(1, round(total * arm.stages[j].tokens / yaml_synth))
        return [replace(st, tokens=out[j]) for j, st in enumerate(arm.stages)]

    def _without_val(self, name: str) -> str | None:
        """The dataset with ``val_tokens: 0`` that leaves dataset ``name`` without a val/ split (itself,
        or the base dataset a derived one is built from), else None (parts and names outside ``data``)."""
        seen: set[str] = set()
        while name in self.data and name not in seen:
            seen.add(name)
            d = self.data[name]
            if d.source_dataset is None:
                return None if d.has_val else name
            name = d.source_dataset
        return None

    def _callback_configs(self, arm: ArmSpec, i: int) -> dict:
        from .train.callbacks.registry import callback_configs

        return callback_configs(arm.callbacks, f"arms[{i}].callbacks")

    def arm_dependencies(self) -> dict[str, str]:
        """arm -> the earlier arm whose runs it starts from (a callback's ``arms_needed``), for job chaining."""
        out = {}
        for i, arm in enumerate(self.arms):
            for cb in self._callback_configs(arm, i).values():
                for dep in getattr(cb, "arms_needed", lambda: [])():
                    out[arm.name] = dep
        return out

    @staticmethod
    def _stage_names(arm: ArmSpec) -> list[str]:
        """The names the arm's stages train on (a dataset or an alias), in order, once each."""
        return list(dict.fromkeys(n for st in arm.stages for n in st.datasets))

    def stage_datasets(self, arm: ArmSpec) -> list[str]:
        """The datasets of ``data`` the arm's stages train on (aliases resolved), in order."""
        return list(dict.fromkeys(arm.datasets.get(n, n) for n in self._stage_names(arm)))

    def _parts(self, arm: ArmSpec) -> list[str]:
        """The parts (per-compartment val sets, say) of the derived datasets the arm trains on."""
        from .data.builders.derived import dataset_parts

        return [p for t in self.stage_datasets(arm) if t in self.data for p in dataset_parts(self.data, t)]

    def _arm_names(self, arm: ArmSpec) -> list[str]:
        """Every name the arm's stages and val may read: base datasets, aliases, derived stage datasets, parts."""
        base = [n for n, d in self.data.items() if d.source_dataset is None]
        return list(dict.fromkeys(base + list(arm.datasets) + self.stage_datasets(arm) + self._parts(arm)))

    def arm_datasets(self, arm: ArmSpec) -> dict[str, Path]:
        """What the trainer gets for this arm: name -> dataset folder.

        Every base dataset (so every arm's model covers the same vocabulary), the derived
        datasets its stages train on, its aliases (``datasets:``) and the parts of its derived
        stage datasets (``<dataset>/<part>``, scored as ``val/<part>``). Another arm's derived
        datasets stay out: a c=8 presentation does not widen a c=1 arm's vocabulary.
        """
        from .data.builders.derived import dataset_parts

        data_dir = layout.data_dir(self.out_dir)
        out = {n: data_dir / n for n, d in self.data.items() if d.source_dataset is None}
        for t in self.stage_datasets(arm):
            if t in self.data:
                out.setdefault(t, data_dir / t)
        out.update({alias: data_dir / target for alias, target in arm.datasets.items()})
        for t in self.stage_datasets(arm):
            for part in dataset_parts(self.data, t) if t in self.data else []:
                if part in out and out[part] != data_dir / t / part:
                    raise ConfigError(f"arms[{arm.name}]", f"part {part!r} of dataset {t!r} clashes with another "
                                      "dataset or part of the same name")
                out[part] = data_dir / t / part
        return out

    def train_config(self, arm: ArmSpec, seed: int, path: str = "") -> TrainConfig:
        """The resolved TrainConfig of one arm and seed: the arm's stages and the seed, the shared
        ``model`` overlaid by the arm's, then the shared ``train`` settings overlaid by the arm's (the one
        merge of an experiment; :func:`preschool.config.overlay`), then the defaults the data implies:
        ``reserved_ids: auto`` when a dataset renders on reserved ids (the trainer reads the range from
        the prepared shards) and, for derived datasets with parts, the parts as ``val``. At a ladder rung
        (``rung`` set) the rung's model and ``train:`` overlay come last and the stages carry the rung's
        budgets (:meth:`_rung_stages`); an error names the rung.
        """
        path = path or f"arms[{next(i for i, a in enumerate(self.arms) if a is arm)}]"
        if self.rung is not None:  # name the rung in any error of its resolved config
            k = self.ladder.index(self.rung)
            try:
                return self._train_config(arm, seed, path)
            except ConfigError as e:
                raise ConfigError(e.field, f"at rung {self.rung!r} (ladder.rungs[{k}]): {e.message}") from None
        return self._train_config(arm, seed, path)

    def _train_config(self, arm: ArmSpec, seed: int, path: str) -> TrainConfig:
        model = self._rung_model(arm)
        rung_train = self.ladder.rung(self.rung).train if self.rung is not None else {}
        cfg = overlay(TrainConfig(model=model, stages=self._rung_stages(arm), seed=seed), self.train, arm.train,
                      rung_train)
        if cfg.val is None and self._parts(arm):
            # a derived dataset with parts has no val/ of its own: the arm scores its parts (and the
            # other stage datasets that have a val split, as the trainer's default would)
            from .data.builders.derived import dataset_parts

            val: list[str] = []
            for n in self._stage_names(arm):
                t = arm.datasets.get(n, n)
                spec = self.data.get(t)
                parts = dataset_parts(self.data, t) if spec is not None else []
                val += parts or ([n] if spec is not None and (spec.source_dataset or spec.has_val) else [])
            cfg = overlay(cfg, {"val": val})
        if cfg.reserved_ids is None and self.renders_reserved():
            cfg = overlay(cfg, {"reserved_ids": "auto"})
        # each overlay was checked field by field on load; what is left are checks across fields
        # (a model override the preset cannot take, 'mean' embeddings without reserved_ids): name the
        # YAML key that set the value, the arm's own or the shared one
        try:
            validate(model)
        except ConfigError as e:
            raise ConfigError(self.written_at(arm, path, f"model.{e.field}"), e.message) from None
        try:
            validate(cfg)
        except ConfigError as e:
            raise ConfigError(self.written_at(arm, path, e.field), e.message) from None
        return cfg

    def renders_reserved(self) -> bool:
        """Whether a dataset renders symbols on reserved ids (what ``reserved_ids: auto`` reads the range of)."""
        from .synthetic.builder import GeneratorSpec

        return any(isinstance(d, GeneratorSpec) and d.render == "reserved" for d in self.data.values())

    def written_at(self, arm: ArmSpec, path: str, field: str) -> str:
        """The YAML key that set ``field`` (dotted, of the arm's resolved TrainConfig) for ``arm`` at ``path``
        (``arms[i]``): the arm's stages, its ``model:`` or ``train:`` overlay where it sets the value, else
        the shared ``model:``, else the shared ``train:`` where it sets it, else the arm's ``train``."""
        top = field.split(".")[0].split("[")[0]
        if top == "stages":
            return f"{path}.{field}"
        if top == "model":
            sub = field[len("model."):]
            return f"{path}.model.{sub}" if sub and _sets(arm.model, sub) else f"model.{sub}".rstrip(".")
        return f"train.{field}" if _sets(self.train, field) and not _sets(arm.train, field) else f"{path}.train.{field}"

    @property
    def out_dir(self) -> Path:
        return Path(self.out or f"runs/{self.name}")


def _sets(over: dict[str, Any], field: str) -> bool:
    """Whether the overlay ``over`` sets the value at the dotted ``field`` (``wandb.project``), itself or
    a whole value above it (``wandb: null`` sets ``wandb.project`` too; ``wandb: {mode: x}`` does not)."""
    node: Any = over
    for part in field.split("."):
        if not isinstance(node, dict):
            return True
        if part not in node:
            return False
        node = node[part]
    return True


# top-level keys of the `preschool compartments` / audit schema that issue 13 retired
_OLD_COMPARTMENTS_KEYS = ("stage", "tokens", "val_per_decade", "presentations", "targets", "similarity_rows",
                          "similarity_layer", "compare", "monolingual", "weights", "kind")


# what experiment.yaml records beside the config of the plug-ins that ran (plugins.loaded); not read back
PLUGINS_USED = "plugins_used"


def load_experiment(path: str | Path, overrides: list[str] = ()) -> ExperimentConfig:
    """The experiment YAML at ``path`` (plus ``key=value`` overrides), validated, once its ``plugins`` are
    imported (so the parts they register can be named in it); they are kept as imported (paths absolute)."""
    from .config import apply_overrides, load_yaml
    from .plugins import use

    raw = load_yaml(path)
    old = [k for k in _OLD_COMPARTMENTS_KEYS if k in raw]
    if old:
        raise ConfigError(old[0], f"{path} uses the retired `preschool compartments` schema (keys {old}); "
                          "compartments experiments and audits are `preschool run` experiments now: derived "
                          "datasets (kind: compartmented / shifted), arm callbacks and report sections "
                          "(docs/compartments.md, 'Migrating an old YAML'; examples/compartments_*.yaml)")
    raw = apply_overrides(raw, list(overrides)) if overrides else raw
    raw.pop(PLUGINS_USED, None)  # what an earlier run recorded: this run records its own
    names = raw.get("plugins") or []
    check(isinstance(names, list) and all(isinstance(n, str) for n in names), "plugins",
          f"must be a list of modules, .py files or folders, got {names!r}")
    raw["plugins"] = [p.plugin for p in use(names, Path(path).resolve().parent)]
    return from_dict(ExperimentConfig, raw)


def _corpora(cfg: ExperimentConfig) -> dict:
    from .corpora import CorpusConfig

    return {n: from_dict(CorpusConfig, c, f"corpora.{n}") for n, c in cfg.corpora.items()}


def check_stale_data(cfg: ExperimentConfig, rebuild: bool = False) -> list:
    """What :func:`build_data` would replace, checked before anything is written: a dataset prepared from
    another spec is a DataError naming it and the field (``data.check_data``), unless ``rebuild``; and with
    ``rebuild``, an arm x seed run folder that trained on one of them is a DataError naming the run (its
    data would be gone: it could neither resume nor be reused). Returns the datasets to rebuild."""
    from .data.prepare import check_data
    from .errors import DataError

    stale = check_data(layout.data_dir(cfg.out_dir), cfg.tokenizer, _corpora(cfg), cfg.data, cfg.seq_len,
                       cfg.seed, rebuild)
    replaced = {s.path.resolve(): s for s in stale}
    for _, arm, seed, run_dir in all_runs(cfg) if replaced else []:
        if not layout.run_config_path(run_dir).is_file():
            continue
        datasets = cfg.arm_datasets(arm)
        for name in cfg.stage_datasets(arm):
            path = Path(datasets.get(name, layout.data_dir(cfg.out_dir) / name)).resolve()
            hit = next((st for p, st in replaced.items() if path == p or path.is_relative_to(p)), None)
            if hit is not None:
                raise DataError(f"{run_dir}: arm {arm.name} seed {seed} was trained on dataset {hit.dataset!r}, which "
                                f"--rebuild would replace ({hit.field}: {hit.detail}); nothing was changed: move that "
                                "run folder away (or give another --out) first")
    return stale


def build_data(cfg: ExperimentConfig, progress: bool = True, rebuild: bool = False) -> dict:
    """Step 2: tokenizer, shard sets and minimal pairs under ``<out>/data``; data prepared from another spec
    is refused before anything is written, or with ``rebuild`` replaced (:func:`check_stale_data`)."""
    from .data.prepare import prepare_data

    out = layout.data_dir(cfg.out_dir)
    check_stale_data(cfg, rebuild)
    manifest = prepare_data(out, cfg.tokenizer, _corpora(cfg), cfg.data, cfg.seq_len, cfg.seed, cfg.workers, progress,
                            rebuild=rebuild)
    if cfg.minimal_pairs.per_paradigm > 0:
        from .corpora.storybook import write_minimal_pairs

        mp = out / "minimal_pairs"
        if not layout.is_done(mp):
            write_minimal_pairs(mp, seed=cfg.minimal_pairs.seed, n_per_paradigm=cfg.minimal_pairs.per_paradigm)
            layout.done_path(mp).write_text("ok\n")
    return manifest


def arm_dirs(cfg: ExperimentConfig) -> list[tuple[ArmSpec, int, Path]]:
    """``(arm, seed, run folder)`` of one config's grid: the experiment's, or one rung's (``cfg.rung``)."""
    return layout.arm_runs(cfg.out_dir, cfg.arms, cfg.seeds, cfg.rung)


def all_runs(cfg: ExperimentConfig) -> list[tuple[ExperimentConfig, ArmSpec, int, Path]]:
    """``(view, arm, seed, run folder)`` of every run the config trains: each rung's grid of a ladder
    (``view``: that rung's config, which resolves the run's TrainConfig), else the one grid."""
    return [(view, arm, seed, d) for view in cfg.rung_views() for arm, seed, d in arm_dirs(view)]


def check_arm_run(cfg: ExperimentConfig, arm: ArmSpec, seed: int, run_dir: Path) -> tuple:
    """``(TrainConfig, datasets)`` of one arm x seed, once the run already in ``run_dir`` (if any) was trained
    with this config on these bytes (``check_run_dir``); else ConfigError named where the YAML sets the
    value (train.lr, arms[i].stages[j]...; a dataset by arm)."""
    from .train.trainer import check_run_dir

    i = cfg.arms.index(arm)
    datasets = cfg.arm_datasets(arm)
    tcfg = cfg.train_config(arm, seed, f"arms[{i}]")
    try:
        check_run_dir(tcfg, run_dir, datasets, layout.tokenizer_dir(layout.data_dir(cfg.out_dir)))
    except ConfigError as e:
        where = (cfg.written_at(arm, f"arms[{i}]", e.field[len("train."):]) if e.field.startswith("train.")
                 else f"arms[{i}].{e.field}")
        at = f" at rung {cfg.rung}" if cfg.rung is not None else ""
        raise ConfigError(where, f"arm {arm.name} seed {seed}{at}: {e.message}") from None
    return tcfg, datasets


def _slurm_job_alive(holder: dict) -> bool | None:
    """Whether the Slurm job a lock record names (``slurm_job``) is still queued or running (``squeue``);
    None when the record names none or squeue cannot say."""
    import shutil
    import subprocess

    job = holder.get("slurm_job")
    if not job or shutil.which("squeue") is None:
        return None
    res = subprocess.run(["squeue", "--noheader", "--format=%T", f"--jobs={job}"], capture_output=True, text=True)
    if res.returncode != 0:
        return False if "Invalid job id" in res.stderr else None
    # squeue -j may still list a job that ended (for MinJobAge): only a state before the end is alive
    ended = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
             "OUT_OF_MEMORY"}
    return any(state.strip() not in ended for state in res.stdout.split())


def run_lock(run_dir: Path, command: str):
    """The lock one arm x seed's trainer holds on its run folder (``<run>/.preschool.lock``, no key): a
    second trainer of the same run folder, a relaunched job or a ``preschool run`` beside a cluster job,
    stops with one line naming the holder instead of training it twice. Rank 0 takes it (every rank
    of a torchrun job trains the same folder); a holder on another node is stale once Slurm no longer
    runs its job."""
    import contextlib
    import os

    from .lock import output_lock as lock

    if os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    return lock(run_dir, command, holder_alive=_slurm_job_alive)


def train_arms(cfg: ExperimentConfig, progress: bool = True, only: tuple[str, int] | None = None,
               command: str = "preschool run") -> None:
    """Step 3: train every arm x seed (every rung's, of a ladder) of the prepared data (resuming; finished
    runs are skipped, so a rung added to a ladder trains only its own runs); ``only``: that (arm, seed).
    Each run trains under its :func:`run_lock` (``command``: what a second trainer of the folder is told
    is running)."""
    from .train.callbacks.registry import CallbackContext, build_callbacks
    from .train.trainer import train

    data_dir = layout.data_dir(cfg.out_dir)
    for view, arm, seed, run_dir in all_runs(cfg):
        if only is not None and (arm.name, seed) != only:
            continue
        i = view.arms.index(arm)
        tcfg, datasets = check_arm_run(view, arm, seed, run_dir)
        tcfg.progress = tcfg.progress and progress
        at = f" rung {view.rung}" if view.rung is not None else ""
        if layout.is_done(run_dir):
            print(f"[preschool]{at} arm {arm.name} seed {seed}: done, skipping")
            continue
        ctx = CallbackContext(arm.name, seed, datasets, [n for st in tcfg.stages for n in st.datasets], data_dir,
                              lambda other, s=seed, r=view.rung: layout.run_dir(cfg.out_dir, other, s, r))
        callbacks = build_callbacks(arm.callbacks, ctx, f"arms[{i}].callbacks")
        with run_lock(run_dir, command):
            if layout.is_done(run_dir):  # finished by another trainer since the check above
                continue
            print(f"[preschool]{at} arm {arm.name} seed {seed}: training -> {run_dir}")
            train(tcfg, run_dir, datasets, layout.tokenizer_dir(data_dir), callbacks)


def evaluate_arms(cfg: ExperimentConfig) -> None:
    """Step 4: every configured evaluator on every (every-th) checkpoint, cached."""
    from transformers.utils import logging as hf_logging

    from .evals.runner import evaluate_specs

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per checkpoint is noise
    for view, arm, seed, run_dir in all_runs(cfg):
        # a cluster report runs after every arm job, finished or not: evaluate what exists
        # evaluators default to the arm's training device when that is CUDA (evals.runner.eval_device)
        device = view.train_config(arm, seed).device
        if not evaluate_specs(run_dir, cfg.evals, layout.data_dir(cfg.out_dir), device):
            at = f" rung {view.rung}" if view.rung is not None else ""
            print(f"[preschool]{at} arm {arm.name} seed {seed}: no checkpoints yet, not evaluated")


def run_experiment(cfg: ExperimentConfig, progress: bool = True, stages: tuple[str, ...] = ("train", "eval", "report"),
                   rebuild: bool = False) -> Path:
    """Prepare the data (always: every step needs it), then the named ``stages`` in order.

    Nothing is written (``experiment.yaml`` included) until the data prepared from another spec is
    refused, or with ``rebuild`` cleared of trained runs (:func:`check_stale_data`), and every arm x seed
    folder that already holds a run on data kept as it is still matches the config (``check_arm_run``).
    """
    from dataclasses import replace

    from .io import write_text
    import yaml

    check_stale_data(cfg, rebuild)
    if "train" in stages:
        for view, arm, seed, run_dir in all_runs(cfg):
            # a run whose data is not all prepared yet is checked once it is (train_arms)
            if all(layout.dataset_record_path(p).is_file() for n, p in cfg.arm_datasets(arm).items()
                   if n in cfg.stage_datasets(arm)):
                check_arm_run(view, arm, seed, run_dir)
    from .plugins import loaded

    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    whole = replace(cfg, rung=None)  # the experiment, whichever of its rungs this command trains
    write_text(layout.experiment_config_path(cfg.out_dir),
               yaml.safe_dump({**to_dict(whole), PLUGINS_USED: loaded()}, sort_keys=False))
    build_data(cfg, progress, rebuild)
    if "train" in stages:
        train_arms(cfg, progress)
    if "eval" in stages and cfg.evals:
        print("[preschool] evaluating checkpoints")
        evaluate_arms(cfg)
    if "report" in stages:
        from .analysis.report import write_report

        path = write_report(cfg.report_view())  # a ladder: the largest rung's tables + the ladder section
        print(f"[preschool] report: {path}")
        return path
    return cfg.out_dir


# ----------------------------------------------------------------------------- the runner's commands
# `preschool run` (whole, or one --arm x --seed) and `preschool prepare` start here; the Slurm jobs that
# `preschool launch` writes run those same commands (launch.py holds only the scripts).


@dataclass
class ExperimentFile:
    """An experiment YAML, loaded, as the commands that run it see it (path and ``--set`` overrides kept
    to name the command a second process is told about, or the one to run first)."""

    path: Path
    overrides: list[str]
    cfg: ExperimentConfig
    arms: list[str]
    seeds: list[int]
    depends: dict[str, str] = field(default_factory=dict)  # arm -> arm whose final checkpoint it starts from

    @property
    def rungs(self) -> list[str | None]:
        """The rungs whose runs the config trains: a ladder's (or the one ``--rung`` names), else ``[None]``."""
        return [view.rung for view in self.cfg.rung_views()]

    @property
    def out_dir(self) -> Path:
        return self.cfg.out_dir


def load_experiment_file(path: str | Path, overrides: list[str] = ()) -> ExperimentFile:
    """The experiment YAML at ``path`` with its ``--set`` overrides, as ``preschool run``/``prepare``/``launch``
    see it (compartments experiments and audits included); the config alone is :func:`load_experiment`."""
    path = Path(path)
    cfg = load_experiment(path, list(overrides))
    return ExperimentFile(path, list(overrides), cfg, [a.name for a in cfg.arms], list(cfg.seeds),
                      cfg.arm_dependencies())


def output_lock(cfg: ExperimentConfig, command: str):
    """The one lock the runner takes: ``<out>/.preschool.lock`` keyed by the config (:mod:`preschool.lock`).

    ``preschool run`` holds it for every step, ``preschool prepare`` (:func:`prepare_experiment`) for the data;
    a second process of the same config waits, one of another config stops naming ``command``."""
    from .lock import config_key, output_lock as lock

    return lock(cfg.out_dir, command, key=config_key(cfg))


def prepare_experiment(exp: ExperimentFile, progress: bool = True, command: str | None = None,
                       rebuild: bool = False) -> dict:
    """Build the experiment's data once, holding the output lock; returns the data manifest.

    ``command`` is what a second process is told is running (default: the
    ``preschool prepare`` line of ``exp``). A second prepare of the same config
    waits and reuses the data; one of another config into the same ``out``
    raises :class:`DataError` (see :mod:`preschool.lock`). Data prepared from
    another spec is refused, or with ``rebuild`` replaced (:func:`check_stale_data`).
    """
    from .lock import command_line

    with output_lock(exp.cfg, command or command_line("prepare", str(exp.path), exp.overrides, None)):
        return build_data(exp.cfg, progress, rebuild)


def _not_prepared(exp: ExperimentFile, why: str):
    import shlex

    from .errors import DataError

    cmd = " ".join(["preschool", "prepare", shlex.quote(str(exp.path)),
                    *[f"--set {shlex.quote(o)}" for o in exp.overrides]])
    return DataError(f"{why}; prepare the data first: {cmd}")


def require_prepared(exp: ExperimentFile) -> dict:
    """The data manifest, if every dataset of the config is prepared with its current spec; else a
    DataError naming the dataset and the ``preschool prepare`` line to run."""
    from .io import read_json

    data = layout.data_dir(exp.out_dir)
    manifest_path = layout.data_manifest_path(exp.out_dir)
    if not manifest_path.is_file():
        raise _not_prepared(exp, f"no prepared data in {data}")
    manifest = read_json(manifest_path)
    for name, spec in exp.cfg.data.items():
        entry = manifest["datasets"].get(name)
        if entry is None or entry.get("spec") != spec.record() or manifest.get("seq_len") != exp.cfg.seq_len:
            raise _not_prepared(exp, f"dataset {name!r} in {data} is missing or was prepared from another spec")
        if not layout.dataset_record_path(data / name).is_file():
            raise _not_prepared(exp, f"dataset {name!r} has no {layout.dataset_record_path(data / name)}")
    return manifest


def allocated_cpus() -> tuple[int, str]:
    """The CPUs this process may use and where that number comes from.

    The fewer of the affinity mask (``os.sched_getaffinity``: what a confining
    Slurm, task/affinity or cgroups, binds the task to) and Slurm's
    ``SLURM_CPUS_PER_TASK`` (what the job was given, which a Slurm without CPU
    confinement, task/none, does not enforce: the mask is then the whole node).
    """
    import os

    mask = len(os.sched_getaffinity(0))
    given = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if given.isdigit() and 0 < int(given) < mask:
        return int(given), "SLURM_CPUS_PER_TASK"
    return mask, "affinity mask"


def rank_threads() -> int | None:
    """Set torch's intra-op threads to this process's CPU allocation divided among the node's ranks.

    The CPUs are :func:`allocated_cpus` (what Slurm's ``--cpus-per-task`` gave
    the node's task, shared by its torchrun processes, not the node's CPU count);
    ``LOCAL_WORLD_SIZE`` is the number of ranks on this node (1 outside torchrun).
    Ranks that each take every CPU oversubscribe the node (two ranks x two
    threads on two cores ran ~10x slower than one rank). Returns the count set,
    or None outside torchrun and Slurm (torch's default is kept).
    """
    import os

    local = os.environ.get("LOCAL_WORLD_SIZE")
    if not local and not os.environ.get("SLURM_CPUS_PER_TASK"):
        return None
    import torch

    cpus, source = allocated_cpus()
    ranks = max(1, int(local or 1))
    n = max(1, cpus // ranks)
    torch.set_num_threads(n)
    if os.environ.get("LOCAL_RANK", "0") == "0":  # once per node, in the job log
        print(f"[preschool] torch threads per rank: {n} ({cpus} CPUs ({source}) / {ranks} local ranks)", flush=True)
    return n


def run_arm(exp: ExperimentFile, arm: str, seed: int | None = None, progress: bool = True) -> Path:
    """Train one arm x seed of a prepared experiment (``preschool run EXP --arm A [--seed S]``); of a
    ladder, at the rung the config is a view of (``--rung R``; required).

    Refuses (``DataError`` naming the prepare command) when the data is not
    prepared, instead of preparing it from every rank of a multi-node job. Rank 0
    holds the run folder's lock (:func:`run_lock`): a second ``run --arm`` of the
    same arm x seed (a job submitted twice) stops naming the first.
    Under ``torchrun`` every rank calls this; the trainer forms the process group.
    """
    from .lock import command_line

    if arm not in exp.arms:
        raise ConfigError("--arm", f"no arm named {arm!r}; the experiment has {exp.arms}")
    if exp.cfg.ladder is not None and exp.cfg.rung is None:
        raise ConfigError("--rung", f"the experiment is a ladder: name the rung to train arm {arm} at "
                          f"(one of {[r.name for r in exp.cfg.ladder.rungs]})")
    seed = exp.seeds[0] if seed is None else int(seed)
    if seed not in exp.seeds:
        raise ConfigError("--seed", f"seed {seed} is not in the experiment's seeds {exp.seeds}")
    require_prepared(exp)
    rank_threads()
    command = command_line("run", str(exp.path), exp.overrides, None) + f" --arm {arm} --seed {seed}"
    train_arms(exp.cfg, progress, only=(arm, seed), command=command)  # the trainer forms the process group
    return layout.run_dir(exp.out_dir, arm, seed, exp.cfg.rung)
