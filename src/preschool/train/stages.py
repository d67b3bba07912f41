"""The stage plan of a run: what each stage reads, how long it runs and which tokens it counts.

:class:`StagePlan` is everything about the stages that is fixed before the first
step and does not depend on the weights: it is built from the train config, the
dataset folders and the model's vocabulary size, and the trainer reads its
position (stage index, step in the stage) against it. Building it opens every
stage's data, so an unknown dataset name, a missing or damaged shard set, or
shards whose tokens do not fit the vocabulary fail before any training.

A stage of a ``group`` whose data equals the group's first stage reads that
stage's sample stream (same order) and, in the trainer, continues it where the
group paused, so no row repeats; a group's LR schedule spans the summed steps
of its stages.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

from ..data.mixture import Mixture
from ..errors import ConfigError, DataError
from ..io import read_json
from .configs import StageConfig, TrainConfig
from ..layout import MANIFEST


def model_vocab_size(datasets: Mapping[str, Path], tokenizer_dir: Path | None) -> int:
    """The vocabulary the model needs: the largest of the tokenizer's and every dataset manifest's."""
    # reserved ids (synthetic symbols rendered as their own tokens) are appended after the tokenizer's
    # vocabulary, so a dataset's manifest can be larger than the tokenizer
    sizes = []
    if tokenizer_dir is not None:
        from ..data.tokenizer import load_tokenizer, tokenizer_size

        sizes.append(tokenizer_size(load_tokenizer(tokenizer_dir)))
    for path in datasets.values():
        mpath = path / "train" / MANIFEST
        if mpath.is_file():
            sizes.append(int(read_json(mpath)["vocab_size"]))
    if not sizes:
        raise DataError("no tokenizer given and no dataset manifest to read vocab_size from")
    return max(sizes)


def model_special_ids(tokenizer_dir: Path | None):
    """The BOS/EOS/PAD ids the model config records: the tokenizer folder's (``SpecialIds``), or None
    without one (id 0, our BPE's ``<|endoftext|>``)."""
    if tokenizer_dir is None:
        return None
    from ..data.tokenizer import load_special_ids

    return load_special_ids(tokenizer_dir)


def pt_sources(stage: StageConfig, mix: Mixture) -> set[str]:
    """The sources of ``stage`` whose tokens count as PT (language) tokens.

    Empty unless ``counts_as_pt``. ``pt_sources`` lists them explicitly; otherwise
    a single-source stage counts whole, and a mixture counts its language share:
    every source not written by a synthetic generator (its manifest's
    ``source.kind`` is not ``generator``), so a language + STACK mixture is
    compared with other arms at equal language tokens.
    """
    if not stage.counts_as_pt:
        return set()
    if stage.pt_sources is not None:
        return set(stage.pt_sources)
    if len(mix.names) == 1:
        return set(mix.names)
    return {n for n, sset in zip(mix.names, mix.sets)
            if (sset.manifest.get("source") or {}).get("kind") != "generator"}


class StagePlan:
    """The stages of ``cfg`` over ``datasets`` (name -> folder with ``train/``) for a model of ``vocab_size``.

    Per stage ``i``: ``mixtures[i]`` (its opened training data), ``steps[i]`` =
    ceil(tokens / (batch_size * seq_len)), ``continues_stream[i]`` (it continues
    its group's data stream, from ``stream_base[i]`` global batches in) and
    ``pt_names[i]`` (the sources whose tokens count as PT, see
    :func:`pt_sources`). :meth:`source_tokens` is what the stage's first steps
    took from each source (the mixture's cumulative counts, so a source's share
    of a batch need not be whole: its remainder is carried, and the stage's
    tokens per source match its weights to within a row, see
    :mod:`preschool.data.mixture`). ``group_steps`` maps each group to its summed steps,
    ``total_steps`` is the run's length. Raises ConfigError naming
    ``stages[i].data`` for an unknown dataset, DataError for shards whose
    vocabulary exceeds ``vocab_size``.
    """

    #: fingerprints of data that is no dataset folder (name -> sha256), which a plan with its own data sets
    #: (train/finetune.py); the run folder records them beside the datasets' (run_dir.py)
    data_sha256: dict[str, str] = {}

    def __init__(self, cfg: TrainConfig, datasets: Mapping[str, Path], vocab_size: int):
        self.cfg = cfg
        for i, s in enumerate(cfg.stages):
            for name in s.datasets:
                if name not in datasets:
                    raise ConfigError(f"stages[{i}].data", f"unknown dataset {name!r} "
                                      f"(known: {', '.join(sorted(datasets)) or 'none'})")
        self.mixtures: list[Mixture] = []
        self.continues_stream: list[bool] = []
        group_first: dict[str, int] = {}
        for i, s in enumerate(cfg.stages):
            stream = i  # the stage index the sample order is drawn from
            if s.group is not None:
                if s.group in group_first and cfg.stages[group_first[s.group]].data == s.data:
                    stream = group_first[s.group]
                group_first.setdefault(s.group, i)
            self.continues_stream.append(stream != i)
            m = Mixture.from_spec(s.data, datasets, "train", seed=cfg.seed, stage_index=stream,
                                  window=cfg.batch_size, field=f"stages[{i}].data", verify=cfg.verify)
            vmax = max(x.vocab_size for x in m.sets)
            if vmax > vocab_size:
                raise DataError(f"stage {s.name!r}: shards use vocab_size {vmax} > model vocab {vocab_size}")
            for sset in m.sets:
                sset.check_vocab(vocab_size)
            self.mixtures.append(m)
        self.steps = [math.ceil(s.tokens / (cfg.batch_size * m.seq_len)) for s, m in zip(cfg.stages, self.mixtures)]
        self.pt_names = [pt_sources(s, m) for s, m in zip(cfg.stages, self.mixtures)]
        # where a stage continuing its group's stream starts in it: the steps of the earlier stages reading it
        self.stream_base: list[int] = []
        for i, s in enumerate(cfg.stages):
            self.stream_base.append(sum(self.steps[j] for j in range(i) if cfg.stages[j].group == s.group
                                        and cfg.stages[j].data == s.data) if self.continues_stream[i] else 0)
        self.group_steps: dict[str, int] = {}
        for s, n in zip(cfg.stages, self.steps):
            if s.group is not None:
                self.group_steps[s.group] = self.group_steps.get(s.group, 0) + n
        self.total_steps = sum(self.steps)

    def step_tokens(self, i: int) -> int:
        """Tokens one step of stage ``i`` trains (the global batch)."""
        return self.cfg.batch_size * self.mixtures[i].seq_len

    def schedule_steps(self, i: int) -> int:
        """Length of the LR schedule stage ``i`` runs in: its group's summed steps, or its own."""
        s = self.cfg.stages[i]
        return self.group_steps[s.group] if s.group is not None else self.steps[i]

    def group_resumes_later(self, i: int) -> bool:
        """Whether a later stage continues the group of stage ``i`` (its state must be kept at its end)."""
        s = self.cfg.stages[i]
        return s.group is not None and any(t.group == s.group for t in self.cfg.stages[i + 1:])

    def source_tokens(self, i: int, steps: int) -> dict[str, int]:
        """Tokens the first ``steps`` steps of stage ``i`` take from each of its sources."""
        m, b = self.mixtures[i], self.cfg.batch_size
        end, start = m.rows_before((self.stream_base[i] + steps) * b), m.rows_before(self.stream_base[i] * b)
        return {n: (end[n] - start[n]) * m.seq_len for n in m.names}

    def pt_tokens(self, i: int, steps: int) -> int:
        """Of :meth:`source_tokens`, the tokens that count as PT (language) tokens."""
        return sum(t for n, t in self.source_tokens(i, steps).items() if n in self.pt_names[i])

    def step_pt_tokens(self, i: int, step: int) -> int:
        """PT tokens of step ``step`` (0-based) of stage ``i``."""
        return self.pt_tokens(i, step + 1) - self.pt_tokens(i, step)

    def token_account(self, stage_index: int, stage_step: int) -> dict[str, dict[str, int]]:
        """Tokens trained up to step ``stage_step`` of stage ``stage_index``, per stage name and per source."""
        by_stage: dict[str, int] = {}
        by_source: dict[str, int] = {}
        for i in range(stage_index + 1):
            per = self.source_tokens(i, self.steps[i] if i < stage_index else stage_step)
            by_stage[self.cfg.stages[i].name] = sum(per.values())
            for n, t in per.items():
                by_source[n] = by_source.get(n, 0) + t
        return {"tokens_by_stage": by_stage, "tokens_by_source": by_source}
