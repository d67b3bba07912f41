"""Glue between compartment arms and the staged trainer (``preschool.train.trainer``).

- :class:`CompartmentTrainer`: the trainer, plus the compartment model options
  applied to the freshly built model *before* the optimizer is created and any
  checkpoint is loaded (so the compartment vectors are optimised and resumes
  find every saved key), through the trainer's ``on_model_built`` callback hook.
  With ``init_from`` the fresh model is replaced by a trained c=1 checkpoint
  expanded to c compartments (``compartments.model.expand_to_compartments``).
- :class:`LogSpacedValidation`: runs the trainer's own validation at the
  log-spaced steps ``round(10 ** (k / per_decade))`` (and the last step), the
  early resolution the slowdown metric needs, independent of ``eval_every``.
"""

from __future__ import annotations

from pathlib import Path

from ..train.callbacks.base import Callback
from ..train.schedules import log_spaced_steps
from ..train.trainer import Trainer
from .model import CompartmentModelConfig, apply_compartment_options, expand_to_compartments, load_compartment_model


class CompartmentTrainer(Trainer):
    """Trainer whose model gets the compartment options (or a c=1 -> c expansion) before optimisation."""

    def __init__(self, *args, n_compartments: int, base_vocab: int, model_options: CompartmentModelConfig,
                 init_from: str | Path | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_compartments = n_compartments
        self.base_vocab = base_vocab
        self.model_options = model_options
        self.init_from = Path(init_from) if init_from else None
        self.callbacks.append(_ApplyCompartments())

    def _prepare_compartment_model(self) -> None:
        c, V, opt = self.n_compartments, self.base_vocab, self.model_options
        if self.init_from is not None:
            model = load_compartment_model(self.init_from)
            model.config.__dict__.pop("preschool_compartments", None)
            if getattr(model, "compartment_embedding", None) is not None:
                del model.compartment_embedding  # a c=1 vector; expansion makes fresh copies
                inp = model.get_input_embeddings()
                inp._preschool_hook.remove()
                inp._preschool_hook = None
            expand_to_compartments(model, c, V, compartment_embedding=opt.compartment_embedding,
                                   init_std=opt.init_std, seed=self.cfg.seed)
            self.model = model.to(self.device)
            self.model.train()
        else:
            apply_compartment_options(self.model, c, V, opt, seed=self.cfg.seed)
            self.model.to(self.device)


class _ApplyCompartments(Callback):
    """Runs :meth:`CompartmentTrainer._prepare_compartment_model` once the fresh model exists."""

    def on_model_built(self, trainer: "CompartmentTrainer") -> None:
        trainer._prepare_compartment_model()


class LogSpacedValidation(Callback):
    """Validation at log-spaced steps (plus the final step), using the trainer's validation callback."""

    def __init__(self, per_decade: int = 4):
        self.per_decade = per_decade
        self.steps: set[int] = set()
        self._val = None

    def on_train_start(self, trainer) -> None:
        from ..train.callbacks.validation import ValidationCallback

        self.steps = log_spaced_steps(trainer.total_steps, self.per_decade) | {trainer.total_steps}
        self._val = next(cb for cb in trainer.callbacks if isinstance(cb, ValidationCallback))
        if trainer.step == 0:
            self._val._run(trainer)  # step 0: the untrained loss anchors every curve

    def on_step_end(self, trainer) -> None:
        if trainer.step in self.steps:
            self._val._run(trainer)
