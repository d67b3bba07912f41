"""The compartment model as a trainer callback (an extension package's part; the trainer itself is not subclassed).

:class:`CompartmentModel` applies the compartment model options to the freshly
built model *before* the optimizer is created and any checkpoint is loaded (so
the compartment vectors are optimised and resumes find every saved key),
through the trainer's public ``on_model_built`` hook. With ``init_from`` the
fresh model is replaced by a trained c=1 checkpoint expanded to c compartments
(``compartments.model.expand_to_compartments``).

Log-spaced validation, which this module used to provide, is the trainer's
``eval_schedule: log`` (``evals_per_decade``).
"""

from __future__ import annotations

from pathlib import Path

from ..train.callbacks.base import Callback
from .model import CompartmentModelConfig, apply_compartment_options, expand_to_compartments, load_compartment_model


class CompartmentModel(Callback):
    """Gives the trainer's fresh model the compartment options (or a c=1 -> c expansion of ``init_from``)."""

    def __init__(self, n_compartments: int, base_vocab: int, model_options: CompartmentModelConfig,
                 init_from: str | Path | None = None):
        self.n_compartments = n_compartments
        self.base_vocab = base_vocab
        self.model_options = model_options
        self.init_from = Path(init_from) if init_from else None

    def on_model_built(self, trainer) -> None:
        c, V, opt = self.n_compartments, self.base_vocab, self.model_options
        if self.init_from is None:
            apply_compartment_options(trainer.model, c, V, opt, seed=trainer.cfg.seed)
            trainer.model.to(trainer.device)
            return
        model = load_compartment_model(self.init_from)
        model.config.__dict__.pop("preschool_compartments", None)
        if getattr(model, "compartment_embedding", None) is not None:
            del model.compartment_embedding  # a c=1 vector; expansion makes fresh copies
            inp = model.get_input_embeddings()
            inp._preschool_hook.remove()
            inp._preschool_hook = None
        expand_to_compartments(model, c, V, compartment_embedding=opt.compartment_embedding,
                               init_std=opt.init_std, seed=trainer.cfg.seed)
        trainer.model = model.to(trainer.device)
