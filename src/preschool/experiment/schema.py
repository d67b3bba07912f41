"""The experiment YAML's schema: the config dataclasses, their validation, and reading a YAML (with its
``--set`` overrides and plug-ins) into a checked :class:`ExperimentConfig` (package docstring: the whole).

What only a resolved run can tell is checked where the runs are built (experiment/runs.py), which this
module does not import: the schema knows the config, not its records."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from .. import layout
from ..analysis.efficiency import check_crossing
from ..analysis.margins import EquivalenceSpec
from ..analysis.sections import build_section
from ..config import Partial, apply_overrides, check, from_dict, load_yaml, to_dict
from ..corpora import CorpusConfig
from ..data.prepare import DatasetSpec
from ..data.tokenizer import TokenizerConfig
from ..errors import ConfigError
from ..evals.runner import EvalSpec  # noqa: F401  (re-exported: experiment YAML schema)
from ..plugins import use
from ..seeds import check_seed
from ..synthetic.builder import GeneratorSpec
from ..train.callbacks.registry import callback_configs
from ..train.configs import StageConfig, TrainConfig  # not .trainer: validation needs no torch
from ..train.model import ModelConfig
from .ladder import language_tokens

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
    window: float = 0.5  # differences from the baseline over the last `window` fraction of each metric's axis
    # x axis per metric prefix ("val/depo", "depo", "minimal_pairs/acc"): "pt" (language tokens) or a
    # dataset name (that source's tokens); unlisted metrics follow analysis/compute.py metric_axes
    axes: dict[str, str] = field(default_factory=dict)
    efficiency: EfficiencySpec = field(default_factory=EfficiencySpec)
    # analysis sections (analysis/sections.py; e.g. slowdown, plateau, similarity, audit_gap): name -> config
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    compare: list[list[str]] = field(default_factory=list)  # [arm, reference] pairs the sections compare by seed
    # the margin of each metric's equivalence test ("equivalent within ±m"; analysis/margins.py)
    equivalence: EquivalenceSpec = field(default_factory=EquivalenceSpec)

    def validate(self) -> None:
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
    # before the rest of the config is read; relative paths are the working folder's, like every path in the
    # config (saved absolute)
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
        # the rung a view names exists
        rungs = [r.name for r in self.ladder.rungs] if self.ladder is not None else []
        check(self.rung is None or self.ladder is not None, "rung",
              f"{self.rung!r}, but the experiment has no `ladder:`")
        check(self.rung is None or self.rung in rungs, "rung",
              f"no rung named {self.rung!r}; the ladder has {rungs}")
        check(self.workers >= 1, "workers", f"must be >= 1, got {self.workers}")
        names = [a.name for a in self.arms]
        check(len(set(names)) == len(names), "arms", f"arm names must be unique, got {names}")
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
        """No key set twice by a rung and an arm, and budgets the rules can scale (each rung x arm resolves
        where the runs are built: experiment/runs.py)."""
        if self.ladder is None:
            return
        base = self.baseline_arm()
        check(language_tokens(base) > 0, "ladder.tokens",
              f"the baseline arm {base.name!r} has no stage that counts as PT: a ladder scales language budgets "
              "against the baseline's (report.baseline)")
        for k, r in enumerate(self.ladder.rungs):
            for i, arm in enumerate(self.arms):
                for key in ("model", "train"):
                    both = sorted(set(getattr(r, key)) & set(getattr(arm, key)))
                    check(not both, f"ladder.rungs[{k}].{key}.{both[0] if both else ''}",
                          f"arm {arm.name!r} sets it too (arms[{i}].{key}); set it on the rung or the arm, not both")
                sf = self.ladder.synthetic
                check(not (sf.rule == "fraction" and sf.fraction is not None and language_tokens(arm) == 0
                           and any(not st.counts_as_pt for st in arm.stages)), "ladder.synthetic.fraction",
                      f"arm {arm.name!r} trains no language tokens to take a fraction of")

    # ----------------------------------------------------------------------------- ladder rungs

    def baseline_arm(self) -> ArmSpec:
        """The arm the others are compared with (``report.baseline``, else the first)."""
        name = self.report.baseline or self.arms[0].name
        return next(a for a in self.arms if a.name == name)

    def at_rung(self, rung: str) -> "ExperimentConfig":
        """The view of one rung of the ladder: the same experiment with ``rung`` set, whose commands train,
        evaluate and report that rung's runs, in ``<out>/rungs/<rung>/`` (:attr:`runs_root`)."""
        if self.ladder is None:
            raise ConfigError("rung", f"{rung!r}, but the experiment has no `ladder:`")
        names = [r.name for r in self.ladder.rungs]
        if rung not in names:
            raise ConfigError("rung", f"no rung named {rung!r}; the ladder has {names}")
        return replace(self, rung=rung)

    @property
    def runs_root(self) -> Path:
        """The folder holding ``arms/``: ``out``, or a rung's ``<out>/rungs/<rung>``."""
        return layout.rung_dir(self.out_dir, self.rung)

    def _callback_configs(self, arm: ArmSpec, i: int) -> dict:
        return callback_configs(arm.callbacks, f"arms[{i}].callbacks")

    def arm_dependencies(self) -> dict[str, str]:
        """arm -> the earlier arm whose runs it starts from (a callback's ``arms_needed``), for job chaining."""
        out = {}
        for i, arm in enumerate(self.arms):
            for cb in self._callback_configs(arm, i).values():
                for dep in getattr(cb, "arms_needed", lambda: [])():
                    out[arm.name] = dep
        return out

    def renders_reserved(self) -> bool:
        """Whether a dataset renders symbols on reserved ids (what ``reserved_ids: auto`` reads the range of)."""
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


def read_config(path: str | Path, overrides: list[str] = ()) -> ExperimentConfig:
    """The experiment YAML at ``path`` (plus ``key=value`` overrides) as a validated config, once its
    ``plugins`` are imported (so the parts they register can be named in it); they are kept as imported (paths
    absolute). Its runs are resolved by :func:`~preschool.experiment.resolved.load_experiment`, which reads
    the YAML through this."""
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
    raw["plugins"] = [p.plugin for p in use(names)]  # relative: the working folder's, as every path
    return from_dict(ExperimentConfig, raw)
