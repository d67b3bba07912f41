"""The ladder arithmetic: what an arm trains at one rung of a ``ladder:`` (its model, the baseline's
language tokens there, its stages' scaled budgets; :class:`~preschool.experiment.schema.LanguageRule`,
:class:`~preschool.experiment.schema.SyntheticRule`, docs/ladder.md).

``cfg`` is an experiment config (:class:`~preschool.experiment.schema.ExperimentConfig`, typed by
name only: the schema imports this module), ``arm`` one of its arms and ``rung`` the name of one of its
ladder's rungs; without a rung (None) every function gives what the YAML says."""

from __future__ import annotations

from dataclasses import replace

from ..config import check, overlay, validate
from ..data.tokenizer import DEFAULT_BPE_VOCAB
from ..errors import ConfigError
from ..train.configs import StageConfig, check_tokens
from ..train.model import ModelConfig, describe, embedding_rows


def language_tokens(arm) -> int:
    """The arm's language tokens in the YAML: its stages that count as PT."""
    return sum(st.tokens for st in arm.stages if st.counts_as_pt)


def rung_model(cfg, arm, rung: str | None) -> ModelConfig:
    """The arm's model at ``rung`` (shared, then the arm's, then the rung's overlay)."""
    model = overlay(cfg.model, arm.model)
    return overlay(model, cfg.ladder.rung(rung).model) if rung is not None else model


def rung_language_tokens(cfg, rung: str | None) -> int:
    """The baseline arm's language tokens at ``rung`` (the YAML's without a rung)."""
    base = cfg.baseline_arm()
    yaml_tokens = language_tokens(base)
    if rung is None:
        return yaml_tokens
    spec, rule = cfg.ladder.rung(rung), cfg.ladder.tokens
    at = f"ladder.rungs[{cfg.ladder.index(rung)}]"
    if rule.rule == "multiplier":
        t = spec.multiplier * yaml_tokens
        check_tokens(t, f"{at}.multiplier",
                     f"{spec.multiplier:g} x the baseline's {yaml_tokens:,} language tokens is ")
        return max(1, round(t))
    if rule.rule == "explicit":
        check_tokens(spec.tokens, f"{at}.tokens")
        return int(spec.tokens)
    model = rung_model(cfg, base, rung)
    try:
        validate(model)
    except ConfigError as e:
        k = cfg.ladder.index(rung)
        raise ConfigError(f"ladder.rungs[{k}].model.{e.field}", e.message) from None
    if rule.params == "total":
        vocab = cfg.tokenizer.vocab_size or (DEFAULT_BPE_VOCAB if cfg.tokenizer.kind == "train" else None)
        check(vocab is not None, "ladder.tokens.params",
              "'total' counts the embeddings at tokenizer.vocab_size: set it, or count non_embedding")
        n = describe(model, embedding_rows(model, vocab))["params_total"]
    else:
        n = describe(model, 2)["params_non_embedding"]  # no embedding: any vocabulary gives the same
    check_tokens(rule.ratio * n, "ladder.tokens.ratio", f"{rule.ratio:g} x the rung model's {n:,} parameters is ")
    return max(1, round(rule.ratio * n))


def rung_stages(cfg, arm, rung: str | None) -> list[StageConfig]:
    """The arm's stages with ``rung``'s budgets (the language rule, then the synthetic rule)."""
    if rung is None:
        return list(arm.stages)
    factor = rung_language_tokens(cfg, rung) / language_tokens(cfg.baseline_arm())
    lang = {j: max(1, round(st.tokens * factor)) for j, st in enumerate(arm.stages) if st.counts_as_pt}
    rule = cfg.ladder.synthetic
    synth = [j for j, st in enumerate(arm.stages) if not st.counts_as_pt]
    yaml_synth = sum(arm.stages[j].tokens for j in synth)
    if rule.rule == "fixed":
        total = yaml_synth
    elif rule.fraction is None:
        total = yaml_synth * factor
    else:
        total = rule.fraction * sum(lang.values())
    check_tokens(total, "ladder.synthetic.fraction", f"arm {arm.name}'s synthetic budget is ")
    out = dict(lang)
    for j in synth:
        out[j] = max(1, round(total * arm.stages[j].tokens / yaml_synth))
    return [replace(st, tokens=out[j]) for j, st in enumerate(arm.stages)]
