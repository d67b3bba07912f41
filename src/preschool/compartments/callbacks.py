"""The compartments callbacks an arm names (``arms[i].callbacks``), found by ``CALLBACKS`` in this extension package.

- ``compartment_model``: compartment embedding, init copies, c=1 -> c expansion with ``init_from``;
- ``infonce``: the contrastive remedy between the same span in two compartments.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import layout
from ..errors import ConfigError, DataError
from ..io import read_json
from ..train.callbacks.registry import CALLBACKS, CallbackContext
from .configs import CompartmentModelConfig, InfoNCEConfig


def stage_compartments(ctx: CallbackContext) -> tuple[int, int, Path, str]:
    """``(n_compartments, base vocabulary, source dataset folder, presentation mode)`` of the one compartmented dataset the
    arm's stages train on (read from its prepared manifest)."""
    found = []
    for name in dict.fromkeys(ctx.stage_datasets):
        folder = ctx.datasets[name]
        record = layout.dataset_record_path(folder)
        info = read_json(record) if record.is_file() else {}
        if (info.get("spec") or {}).get("kind") == "compartmented":
            pres = read_json(folder / "train" / layout.MANIFEST)["compartments"]["presentation"]
            found.append((int(pres["n_compartments"]), int(pres["base_vocab"]), ctx.data_dir / info["source"],
                          pres["mode"]))
    if len(found) != 1:
        raise ConfigError(ctx.field, f"arm {ctx.arm}: needs its stages to train on exactly one `compartmented` "
                          f"dataset, found {len(found)} among {sorted(set(ctx.stage_datasets))}")
    return found[0]


@dataclass
class CompartmentModelOptions(CompartmentModelConfig):
    """``compartment_model`` callback: the model options, and ``init_from`` (an earlier c=1 arm whose
    final checkpoint, same seed, is expanded to this arm's compartments)."""

    init_from: str | None = None

    def arms_needed(self) -> list[str]:
        return [self.init_from] if self.init_from else []

    def extra_params(self, hidden_size: int, kinds: list) -> int:
        """Parameters outside the HF model (for ``preschool plan``): one vector per compartment."""
        c = max((k.cfg.n_compartments for k in kinds if hasattr(k.cfg, "n_compartments")), default=1)
        return c * hidden_size if self.compartment_embedding else 0


@CALLBACKS.register("compartment_model", config=CompartmentModelOptions)
def compartment_model(cfg: CompartmentModelOptions, ctx: CallbackContext):
    """The compartment model options applied to the fresh model (compartments/model_callback.py)."""
    from .model_callback import CompartmentModel

    c, V, _, mode = stage_compartments(ctx)
    if mode != "offset" and cfg.compartment_embedding:
        raise ConfigError(f"{ctx.field}.compartment_embedding", f"arm {ctx.arm}: needs the offset presentation "
                          f"(compartments are read from ids); set false for {mode}")
    init = None
    if cfg.init_from:
        try:
            init = layout.final_checkpoint(ctx.run_dir_of(cfg.init_from))
        except DataError as e:
            raise ConfigError(f"{ctx.field}.init_from", f"{e} (train arm {cfg.init_from} first)") from None
    options = CompartmentModelConfig(**{k: getattr(cfg, k) for k in CompartmentModelConfig.__dataclass_fields__})
    return CompartmentModel(c, V, options, init)


@CALLBACKS.register("infonce", config=InfoNCEConfig)
def infonce(cfg: InfoNCEConfig, ctx: CallbackContext):
    """InfoNCE between the same span in two compartments (compartments/infonce.py); needs c >= 2."""
    from .infonce import InfoNCECallback

    c, V, source, mode = stage_compartments(ctx)
    if mode != "offset":
        raise ConfigError(ctx.field, f"arm {ctx.arm}: InfoNCE needs the offset presentation, got {mode}")
    if c < 2:
        raise ConfigError(ctx.field, f"arm {ctx.arm}: InfoNCE needs n_compartments >= 2, got {c}")
    return InfoNCECallback(cfg, c, V, train_shards=source / "train")
