"""Evaluate checkpoints, many at a time, resumably; collect the results as rows.

A run folder (docs/interfaces.md) holds ``checkpoints/step-XXXXXXXX/``; each
evaluation of a checkpoint writes

    <run>/evals/step-XXXXXXXX/<label>/summary.json   (+ items.jsonl)

where ``label`` is the evaluator's name unless given (so one evaluator can run
under two configs, e.g. ``("minimal_pairs", {"bos": "none"}, "blimp_nobos")``).
A summary carries a ``cache`` block: the checkpoint fingerprint (meta.json,
config.json and the weight files' names, sizes and mtimes), the evaluator's
registry name and ``version``, the sha256 of its full resolved config and, for
evaluators defining ``data_fingerprint(cfg) -> str | None`` (a classmethod),
a fingerprint of the data they read. A
rerun skips every (checkpoint, evaluator) whose summary has the same block and
recomputes the rest, so an interrupted sweep resumes where it stopped and a
changed config or evaluator version is never served stale. The model is loaded
only when something is left to compute.

Usage::

    from preschool.evals.runner import evaluate_run, collect_results
    evaluate_run("runs/arm0", [("minimal_pairs", {"path": "blimp/", "max_pairs_per_paradigm": 100})], every=500)
    rows = collect_results("runs/arm0")   # [{step, tokens, pt_tokens, tokens_by_stage, tokens_by_source,
                                          #   evaluator, metric, value, version, setup}]
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import Partial, check, partial_from_dict, to_dict
from ..data.tokenizer import EOS, from_saved_files, refuse_custom_code
from ..errors import ConfigError, DataError
from ..io import UnreadableJSON, json_kind, quiet_unpickler, read_json
from ..layout import check_name
from ..device import resolve_device
from ..layout import CKPT_META, CKPT_STATE, EVAL_SUMMARY
from ..layout import checkpoint_dir, evals_dir, list_checkpoints, step_dirname, step_of  # noqa: F401 (re-exported)
from ..plugins import checkpoint_hooks
from . import EVALUATORS
from .base import Evaluator, recorded_direction

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
EvaluatorSpec = tuple  # (name, config dict) or (name, config dict, label)


def read_meta(ckpt: str | Path) -> dict:
    """``meta.json`` of a checkpoint ({} when absent, e.g. a plain HF folder)."""
    p = Path(ckpt) / CKPT_META
    if not p.is_file():
        return {}
    return read_json(p, expect=dict)  # a damaged one: UnreadableJSON, one line naming it


def checkpoint_step(ckpt: str | Path) -> int | None:
    """The step of a checkpoint: ``meta.json``'s ``step``, else the ``step-N`` folder name, else None."""
    meta = read_meta(ckpt)
    if "step" in meta:
        return int(meta["step"])
    return step_of(ckpt)


def require_checkpoint_dir(ckpt: Path) -> None:
    """DataError naming ``ckpt`` unless it is a folder (a missing path, a file given for a folder)."""
    if ckpt.is_dir():
        return
    if not ckpt.exists():
        raise DataError(f"{ckpt}: no such checkpoint folder (a run's are <run>/checkpoints/step-XXXXXXXX; "
                        "--checkpoints RUN_DIR evaluates them all)")
    raise DataError(f"{ckpt}: is a file, not a checkpoint folder (give the folder holding config.json "
                    "and the weights)")


def checkpoint_fingerprint(ckpt: str | Path) -> str:
    """Cheap identity of a checkpoint's contents: meta + config text and each weight file's name/size/mtime."""
    ckpt = Path(ckpt)
    h = hashlib.sha256()
    for name in (CKPT_META, "config.json"):
        p = ckpt / name
        h.update(name.encode() + b"\0" + (p.read_bytes() if p.is_file() else b"-") + b"\0")
    weights = sorted(p for p in ckpt.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.name != CKPT_STATE)
    if not weights:
        raise DataError(f"{ckpt}: no model weights (*.safetensors / *.bin) in this checkpoint")
    for p in weights:
        st = p.stat()
        h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def config_hash(cfg: Any) -> str:
    """sha256 of an evaluator config's canonical JSON (all fields, defaults included)."""
    canon = json.dumps(to_dict(cfg), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def check_weight_files(ckpt: Path) -> None:
    """DataError naming the first ``*.safetensors`` file of ``ckpt`` that is cut short or has a bad header
    (reads headers only; HF's own error on such a file names no path)."""
    from safetensors import safe_open

    for f in sorted(ckpt.glob("*.safetensors")):
        try:
            with safe_open(str(f), "pt"):
                pass
        except Exception as e:  # SafetensorError: truncated file, corrupt header
            raise DataError(f"{f}: damaged model weights ({str(e).splitlines()[0]}); re-create this checkpoint "
                            "(a training run rewrites it when resumed from an earlier one) or delete it") from None


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def check_model_config(ckpt: Path) -> None:
    """DataError naming ``config.json`` when it makes no model (``vocab_size: -1``, an unknown type) or one
    whose tensors differ in shape from those the ``*.safetensors`` files hold (a config of another size).

    The model is built on the meta device (no memory) and compared with the files' headers, so the error
    names the first tensor that differs; HF's own error says only to read the report it printed above."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    from ..train.checkpoint import quiet_hf_logging

    cfg_path = ckpt / "config.json"
    try:  # quiet: HF warns about what it is about to fail on (an EOS id outside vocab_size: -1)
        with quiet_hf_logging(), torch.device("meta"):
            config = AutoConfig.from_pretrained(str(ckpt), trust_remote_code=False)
            shapes = {k: list(v.shape) for k, v in
                      AutoModelForCausalLM.from_config(config, trust_remote_code=False).state_dict().items()}
    except Exception as e:  # a ValueError, a negative size's RuntimeError, a KeyError of a malformed field...
        raise DataError(f"{cfg_path}: makes no model ({_first_line(e)})") from None
    for f in sorted(ckpt.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            for k in fh.keys():
                have = list(fh.get_slice(k).get_shape())
                if k in shapes and shapes[k] != have:  # keys it lacks: a plug-in's hook attaches them later
                    raise DataError(f"{cfg_path}: makes {k} of shape {shapes[k]}, but {f.name} holds {have} "
                                    "(a config.json of another model size?)")


def load_checkpoint(path: str | Path, device: str = "cpu", plain: bool = False):
    """``(model, tokenizer)`` from an HF ``save_pretrained`` folder: fp32 weights, eval mode, on ``device``.
    DataError naming the file when the folder makes no model or tokenizer (never a traceback): weights cut
    short, a config that does not fit them, a pickle beyond tensors, a tokenizer.json that is not one.
    ``plain``: the plain-PyTorch model and tokenizer of :mod:`._plain_decoder` where it computes the folder
    exactly (no transformers import; for evaluators declaring ``plain_decoder``), else the HF ones."""
    p = Path(path)
    if not (p / "config.json").is_file():
        raise DataError(f"{p}: not a checkpoint (no config.json)")
    if plain:
        refuse_custom_code(p)
        from ._plain_decoder import load

        got = load(p, resolve_device(device))
        if got is not None:
            return got
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    check_weight_files(p)
    refuse_custom_code(p)
    check_model_config(p)
    # the tokenizer first: a file that is not one fails before the weights are read
    try:
        if (p / "tokenizer.json").is_file() and (p / "tokenizer_config.json").is_file():
            tok = from_saved_files(p)  # not AutoTokenizer: see from_saved_files
        else:
            tok = AutoTokenizer.from_pretrained(str(p), trust_remote_code=False)
    except Exception:  # OSError, ValueError, TypeError; KeyError of a malformed file: one more try below
        if not (p / "tokenizer.json").is_file():
            raise DataError(f"{p}: no tokenizer files in this checkpoint") from None

        # Our own tokenizer.json without HF side files: <|endoftext|> is EOS, BOS and PAD.
        try:
            tok = PreTrainedTokenizerFast(tokenizer_file=str(p / "tokenizer.json"), eos_token=EOS, bos_token=EOS,
                                          pad_token=EOS)
        except Exception as e:  # the tokenizers library raises plain Exception for a file it cannot parse
            raise DataError(f"{p / 'tokenizer.json'}: not a tokenizer this can read ({_first_line(e)})") from None
    try:
        with quiet_unpickler():  # a raw pickle's protocol warning would come before the one-line refusal
            model = AutoModelForCausalLM.from_pretrained(str(p), trust_remote_code=False)
    except pickle.UnpicklingError:  # torch's message suggests weights_only=False: the very thing not to do here
        names = ", ".join(f.name for f in sorted(p.glob("*.bin"))) or "its weights"
        raise DataError(f"{p}: {names} holds objects other than tensors and plain data (refused, since "
                        "unpickling them could run code)") from None
    except Exception as e:  # OSError, ValueError, a RuntimeError of torch's
        raise DataError(f"{p}: cannot load model ({_first_line(e)})") from None

    # Plug-ins re-attach what lives outside the HF architecture (e.g. a compartment embedding).
    for hook in checkpoint_hooks():
        model = hook(model, p)
    # .float() rather than a dtype argument: its name changed across transformers versions (torch_dtype -> dtype)
    model = model.float().to(resolve_device(device)).eval()
    return model, tok


def _normalise(evaluators: Sequence[EvaluatorSpec]) -> list[tuple[str, str, Any]]:
    """``[(label, name, built config)]``; configs are validated before any model is loaded."""
    if not evaluators:
        raise ConfigError("evaluators", "give at least one evaluator")
    out, labels = [], set()
    for i, spec in enumerate(evaluators):
        if isinstance(spec, str):
            spec = (spec, {})
        if not 2 <= len(spec) <= 3:
            raise ConfigError(f"evaluators[{i}]", f"expected (name, config) or (name, config, label), got {spec!r}")
        name, values = spec[0], spec[1] or {}
        label = spec[2] if len(spec) == 3 and spec[2] else name
        if label in labels:
            raise ConfigError(f"evaluators[{i}]", f"label {label!r} used twice; give each config its own label")
        check_name(label, f"evaluators[{i}]", "evaluator label")  # <step>/<label>/ holds its results
        labels.add(label)
        out.append((label, name, EVALUATORS.build_config(name, values, f"evaluators[{i}]")))
    return out


def _cache_block(fingerprint: str, name: str, cfg: Any) -> dict:
    cls = EVALUATORS.get(name).cls
    block = {"checkpoint": fingerprint, "evaluator": name, "version": cls.version, "config_hash": config_hash(cfg)}
    # Optional hook: an evaluator that reads data files can fingerprint them, so data edited in
    # place under the same path invalidates its results too.
    data_fp = getattr(cls, "data_fingerprint", None)
    if data_fp is not None:
        block["data"] = data_fp(cfg)
    return block


def _cached_summary(path: Path, cache: dict) -> dict | None:
    if not path.is_file():
        return None
    try:
        summary = read_json(path, expect=dict)
    except UnreadableJSON:
        return None  # unreadable: recompute and overwrite
    return summary if summary.get("cache") == cache else None


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def evaluate_checkpoint(
    ckpt_dir: str | Path,
    evaluators: Sequence[EvaluatorSpec],
    out_dir: str | Path,
    device: str = "cpu",
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Run ``evaluators`` on one checkpoint, writing ``<out_dir>/<label>/summary.json``; cached ones are reused.

    Returns ``{checkpoint, step, meta, out_dir, results: {label: summary}, cached: [labels]}``.
    """
    ckpt = Path(ckpt_dir)
    specs = _normalise(evaluators)
    require_checkpoint_dir(ckpt)
    fingerprint = checkpoint_fingerprint(ckpt)
    meta = read_meta(ckpt)
    step = checkpoint_step(ckpt)
    out = Path(out_dir)
    results, cached, todo = {}, [], []
    for label, name, cfg in specs:
        cache = _cache_block(fingerprint, name, cfg)
        hit = None if force else _cached_summary(out / label / EVAL_SUMMARY, cache)
        if hit is not None:
            results[label] = hit
            cached.append(label)
        else:
            todo.append((label, name, cfg, cache))
    if todo:
        plain = all(getattr(EVALUATORS.get(name).cls, "plain_decoder", False) for _, name, _, _ in todo)
        model, tok = load_checkpoint(ckpt, device, plain=plain)
        param = next(model.parameters())
        # where the numbers came from, for the report (collect_results adds it to the evaluator's setup)
        evaluated_on = {"device": param.device.type, "dtype": str(param.dtype).removeprefix("torch.")}
        for label, name, cfg, cache in todo:
            if log:
                log(f"{ckpt.name}: {label} on {evaluated_on['device']} ({evaluated_on['dtype']}) ...")
            ev = EVALUATORS.get(name).cls(cfg)
            results[label] = ev.run(model, tok, out_dir=out / label, checkpoint=str(ckpt), cache=cache,
                                    checkpoint_meta=meta, step=step, evaluated_on=evaluated_on)
        del model
    if log and cached:
        log(f"{ckpt.name}: cached {', '.join(cached)}")
    return {"checkpoint": str(ckpt), "step": step, "meta": meta, "out_dir": str(out),
            "results": {label: results[label] for label, _, _ in specs}, "cached": cached}


def select_checkpoints(run_dir: str | Path, every: int | None = None,
                       steps: Sequence[int] | None = None,
                       every_pt_tokens: int | None = None) -> list[tuple[int, Path]]:
    """Checkpoints to evaluate: all; or steps that are multiples of ``every``; or checkpoints whose
    PT-token count (``meta.json`` ``pt_tokens``) is a multiple of ``every_pt_tokens`` (the same PT points
    in an arm whose PT starts after a PPT stage); or ``steps``. ``every`` and ``every_pt_tokens`` also
    take the checkpoint that ends each stage (the trainer always writes one), so a report's value at the
    end of a stage is measured there and not at an earlier multiple; the last checkpoint is one of them.

    Given together, the union. A requested step that has no checkpoint is a ConfigError.
    """
    ckpts = list_checkpoints(run_dir)
    if every is not None and every < 1:
        raise ConfigError("every", f"must be >= 1, got {every}")
    if every_pt_tokens is not None and every_pt_tokens < 1:
        raise ConfigError("every_pt_tokens", f"must be >= 1, got {every_pt_tokens}")
    if every is None and steps is None and every_pt_tokens is None:
        return ckpts
    have = {s for s, _ in ckpts}
    wanted = set(int(s) for s in steps or ())
    missing = sorted(wanted - have)
    if missing:
        raise ConfigError("steps", f"no checkpoint for steps {missing} in {run_dir} (have {sorted(have)})")
    if every is not None:
        wanted |= {s for s in have if s % every == 0}
    if (every is not None or every_pt_tokens is not None) and ckpts:
        metas = [read_meta(p) for _, p in ckpts]  # each meta.json read once for both rules
        if every_pt_tokens is not None:
            wanted |= {s for (s, _), m in zip(ckpts, metas) if (pt := m.get("pt_tokens")) is not None
                       and pt % every_pt_tokens == 0}
        wanted |= _stage_end_steps(ckpts, metas)
    return [(s, p) for s, p in ckpts if s in wanted]


def _stage_end_steps(ckpts: list[tuple[int, Path]], metas: list[dict]) -> set[int]:
    """Steps of the checkpoints that end a stage: the last one (what token-efficiency curves end on) and
    each one whose successor is of a later stage (``meta.json`` ``stage_index``; without it, none)."""
    index = [m.get("stage_index") for m in metas]
    ends = {ckpts[-1][0]}
    for (step, _), here, after in zip(ckpts, index, index[1:]):
        if here is not None and after is not None and after != here:
            ends.add(step)
    return ends


def evaluate_run(
    run_dir: str | Path,
    evaluators: Sequence[EvaluatorSpec],
    every: int | None = None,
    steps: Sequence[int] | None = None,
    device: str = "cpu",
    force: bool = False,
    log: Callable[[str], None] | None = _stderr,
    every_pt_tokens: int | None = None,
) -> list[dict]:
    """Evaluate the selected checkpoints of a run (see :func:`select_checkpoints`), resumably, in step order."""
    _normalise(evaluators)  # fail on a bad config before touching any checkpoint
    run = Path(run_dir)
    out = []
    for step, ckpt in select_checkpoints(run, every, steps, every_pt_tokens):
        out.append(evaluate_checkpoint(ckpt, evaluators, evals_dir(run, step), device, force, log))
    return out


def collect_results(run_dir: str | Path) -> list[dict]:
    """One row per (step, evaluator label, metric) from ``<run>/evals``, sorted.

    ``tokens`` / ``pt_tokens`` / ``tokens_by_stage`` / ``tokens_by_source`` come
    from the checkpoint's meta.json (kept in the summary too, so rows survive
    checkpoint pruning); None when unknown (older checkpoints have no per-stage
    and per-source counts). ``setup`` names the evaluator's preset/stimuli.
    ``higher_is_better`` and ``reported`` are the metric's direction (True, False, or None
    when its evaluator declares none) and whether reports headline it, as the summary
    records them (summaries written before they did: the evaluator class's declarations,
    :class:`~preschool.evals.base.Evaluator`).
    """
    root = evals_dir(run_dir)
    if not root.is_dir():
        return []
    rows = []
    for sdir in sorted(root.iterdir()):
        step = step_of(sdir)
        if step is None or not sdir.is_dir():
            continue
        ckpt_meta = read_meta(checkpoint_dir(run_dir, step))
        for edir in sorted(sdir.iterdir()):
            spath = edir / EVAL_SUMMARY
            if edir.name.startswith(".") or not spath.is_file():
                continue
            summary = read_json(spath, expect=dict)  # a damaged one: UnreadableJSON, one line naming it
            if not isinstance(summary.get("metrics", {}), dict):
                raise DataError(f"{spath}: 'metrics' holds a JSON {json_kind(summary['metrics'])}, not an object "
                                "of metric names and values; rerun the evaluation (delete the file) to rewrite it")
            meta = ckpt_meta or summary.get("checkpoint_meta") or {}
            name = summary.get("evaluator")
            cls = EVALUATORS.get(name).cls if name in EVALUATORS else Evaluator
            hib = summary.get("higher_is_better") or {}
            reported = summary.get("reported")
            setup = summary.get("setup", "")
            where = summary.get("evaluated_on")  # absent from summaries written before it was recorded
            if where:
                setup = ", ".join(x for x in (setup, f"on {where['device']} in {where['dtype']}") if x)
            for metric, value in summary.get("metrics", {}).items():
                rows.append({"step": step, "tokens": meta.get("tokens"), "pt_tokens": meta.get("pt_tokens"),
                             "tokens_by_stage": meta.get("tokens_by_stage"),
                             "tokens_by_source": meta.get("tokens_by_source"),
                             "evaluator": edir.name, "metric": metric, "value": value,
                             "higher_is_better": recorded_direction(hib[metric] if metric in hib else cls.direction(metric)),
                             "reported": metric in reported if reported is not None else cls.reported(metric),
                             "version": summary.get("version"), "setup": setup})
    return rows


@dataclass
class EvalSpec:
    """An evaluator run on a run's checkpoints (the ``evals:`` list of an experiment YAML).

    ``params`` strings may use ``${data}`` (the experiment's data folder)."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    # checkpoints to score: steps that are multiples of `every`, and/or checkpoints whose PT-token count is a
    # multiple of `every_pt_tokens` (the same PT points in every arm); the last one always; neither: all
    every: int | None = None
    every_pt_tokens: int | None = None
    # the results' folder and metric prefix (default: name); one each to run an evaluator twice
    label: str | None = None
    # cpu | cuda | cuda:N; default (None): the arms' training device when that is CUDA, else cpu (eval_device)
    device: str | None = None

    @property
    def key(self) -> str:
        """What its results are filed under: ``label``, else ``name``."""
        return self.label or self.name

    def validate(self) -> None:
        entry = EVALUATORS.get(self.name, "name")
        # keys and types now, before any data or training; what the evaluator itself checks (a path under
        # ${data}, which exists once prepared) by check_eval_params before the first run trains
        if entry.config is None:
            check(not self.params, "params", f"evaluator {self.name!r} takes no parameters")
        else:
            partial_from_dict(Partial(entry.config), self.params, "params")
        if self.every is not None and self.every < 1:
            raise ConfigError("every", f"must be >= 1, got {self.every}")
        if self.every_pt_tokens is not None and self.every_pt_tokens < 1:
            raise ConfigError("every_pt_tokens", f"must be >= 1, got {self.every_pt_tokens}")
        if self.label is not None:
            check_name(self.label, "label", "evaluator label")
        if self.device is not None:
            check(self.device == "cpu" or self.device.startswith("cuda"), "device",
                  f"must be cpu or cuda[:N], got {self.device!r}")


def eval_device(explicit: str | None, train_device: str) -> str:
    """The device an experiment's evaluator runs on: ``explicit`` when given; else the training device
    when that is CUDA here (``auto`` on a GPU machine, ``cuda``, ``cuda:N``); else ``cpu``. A CUDA run
    evaluated where there is no GPU (a CPU report job) is scored on the CPU rather than refused, and a
    ``cuda:N`` run where GPU N is not there (launch's report job has one) on the first GPU."""
    if explicit is not None:
        return explicit
    import torch

    if train_device == "cpu" or not torch.cuda.is_available():
        return "cpu"
    if train_device == "auto":
        return "cuda"
    try:
        index = torch.device(train_device).index
    except RuntimeError:  # not a device name: resolve_device says so, naming the field
        return train_device
    return "cuda" if index is not None and index >= torch.cuda.device_count() else train_device


def with_data_dir(value: Any, data_dir: Path) -> Any:
    """``value`` (str, dict or list) with every ``${data}`` replaced by the data folder."""
    if isinstance(value, str):
        return value.replace("${data}", str(data_dir))
    if isinstance(value, dict):
        return {k: with_data_dir(v, data_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [with_data_dir(v, data_dir) for v in value]
    return value


def check_eval_params(specs: Sequence[EvalSpec], data_dir: str | Path) -> None:
    """Build every spec's evaluator config (its ``${data}`` paths resolved against ``data_dir``), so a value
    its evaluator refuses is a ConfigError named by its YAML key (``evals[i].params.<key>``) before any
    checkpoint is made, not after training."""
    for i, e in enumerate(specs):
        EVALUATORS.build_config(e.name, with_data_dir(e.params, Path(data_dir)), f"evals[{i}].params")


def evaluate_specs(run_dir: str | Path, specs: Sequence[EvalSpec], data_dir: str | Path,
                   train_device: str = "cpu") -> bool:
    """Every spec on the run's (every-th) checkpoints, cached, each on :func:`eval_device` of its ``device``
    and the run's ``train_device``; False (nothing done) when it has none yet."""
    if not list_checkpoints(run_dir, required=False):
        return False
    for e in specs:
        evaluate_run(run_dir, [(e.name, with_data_dir(e.params, Path(data_dir)), e.key)], every=e.every,
                     every_pt_tokens=e.every_pt_tokens, device=eval_device(e.device, train_device))
    return True
