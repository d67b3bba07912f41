"""How the trainer spreads a model over ranks: DDP replicas or FSDP2 shards, plus activation checkpointing.

``train.parallel`` picks the mode; the trainer talks to it only through :class:`Replicated`'s methods.

- ``ddp`` (default): every rank holds the whole model and optimizer; under
  ``torchrun`` the model is wrapped in ``DistributedDataParallel`` and
  gradients are all-reduced once per optimizer step (the micro-batches before
  the last run under ``no_sync``). One process: the bare model.
- ``fsdp``: FSDP2 (``torch.distributed.fsdp.fully_shard``) on every decoder
  block, then on the root (embeddings, final norm, LM head and anything a
  callback added at the top, e.g. the compartment embedding; tied embeddings
  stay one parameter in the root's group). Parameters, gradients and AdamW
  moments are sharded over ranks along dim 0 (DTensor ``Shard(0)``); a block
  is all-gathered for its forward and again for its backward and resharded
  after each. Gradients are reduce-scattered (averaged) after every
  micro-batch, so no rank ever holds a whole model's gradients. On CUDA with
  bf16 precision a ``MixedPrecisionPolicy`` computes in bf16 with fp32
  gradient reduction, and the optimizer steps the fp32 shards (the master
  weights); autocast is then off. On CPU it runs under gloo on a "cpu"
  device mesh, in fp32 (or bf16 autocast, as DDP). A single process gets a
  one-rank process group (``distributed.process_group(one_rank=True)``), so
  the same code and checkpoint format serve 1..N ranks.

``train.activation_checkpointing: blocks`` recomputes every decoder block's
activations in backward (``torch.distributed._composable.checkpoint``, the
hook-based form: parameter names, hence checkpoints, do not change), in both
modes. It trades one extra forward per block for not storing its activations.

Rules FSDP adds for callbacks: every forward through the model is a
collective (each block all-gathers its shards), so all ranks must make the
same sequence of forward calls; a callback that would skip a forward on some
ranks runs it on a stand-in input and weights the result 0 (see
:class:`~preschool.compartments.infonce.InfoNCECallback`). Parameters outside a
forward are sharded DTensors: read or write whole tensors with
:func:`full_tensor` / :func:`assign_full`.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import torch
from torch import nn

from .families import decoder_blocks


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def is_sharded(model: nn.Module) -> bool:
    """True if ``model`` is under FSDP2 (its forwards are collectives)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor: gathered from all ranks for a sharded DTensor (a collective), else ``t`` itself."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


@torch.no_grad()
def assign_full(t: torch.Tensor, value: torch.Tensor) -> None:
    """Copy a whole-tensor ``value`` (the same on every rank) into ``t``, keeping only this rank's shard."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(t, DTensor):
        t.copy_(distribute_tensor(value.to(t.dtype), t.device_mesh, t.placements, src_data_rank=None))
    else:
        t.copy_(value.to(t))


class Replicated:
    """``parallel: ddp``: the whole model on every rank (DDP under torchrun, the bare model alone)."""

    #: model and optimizer tensors are sharded (checkpoints go through DCP)
    sharded = False

    def __init__(self, cfg: Any, device: torch.device, world: int):
        self.cfg = cfg
        self.device = device
        self.world = world
        self.ddp: Any = None

    @property
    def amp_dtype(self) -> torch.dtype | None:
        """The autocast dtype: bf16 when asked (or ``auto`` on CUDA), else None (fp32)."""
        from .precision import autocast_dtype

        return autocast_dtype(self.cfg.precision, self.device)

    @property
    def compute_dtype(self) -> torch.dtype | None:
        """The dtype matmuls run in (bf16 via autocast, FSDP's policy or a bf16 model; None: fp32), e.g. for MFU."""
        from .precision import PURE_BF16

        return torch.bfloat16 if self.cfg.precision == PURE_BF16 else self.amp_dtype

    def prepare(self, model: nn.Module) -> None:
        """Before the optimizer exists: per-block activation checkpointing (and, under FSDP, sharding)."""
        if self.cfg.activation_checkpointing == "blocks":
            from torch.distributed._composable import checkpoint

            for block in decoder_blocks(model):
                checkpoint(block)

    def wrap(self, model: nn.Module) -> nn.Module:
        """After any checkpoint is loaded: the module the training forward calls."""
        if self.world > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.ddp = DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
            return self.ddp
        return model

    def no_sync(self, last_micro: bool):
        """Context for one micro-batch's backward: DDP all-reduces only on the last one."""
        if self.ddp is not None and not last_micro:
            return self.ddp.no_sync()
        return contextlib.nullcontext()

    def optimizer_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        """A detached copy of the optimizer state (to pause a group's schedule)."""
        return copy.deepcopy(optimizer.state_dict())

    def load_optimizer_state(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
        optimizer.load_state_dict(state)

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor] | None:
        """Weights for ``save_pretrained`` (None: the model's own ``state_dict``)."""
        return None


class Sharded(Replicated):
    """``parallel: fsdp``: FSDP2 on every decoder block and the root (see the module docstring)."""

    sharded = True

    @property
    def mixed_precision(self) -> bool:
        """bf16 parameters via FSDP's policy (CUDA + bf16) instead of autocast (a pure-bf16 model needs none)."""
        return self.device.type == "cuda" and self.cfg.precision in ("auto", "bf16")

    @property
    def amp_dtype(self) -> torch.dtype | None:
        return None if self.mixed_precision else super().amp_dtype

    @property
    def compute_dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.mixed_precision else super().compute_dtype

    def prepare(self, model: nn.Module) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        super().prepare(model)
        mesh = init_device_mesh(self.device.type, (self.world,))
        kw: dict[str, Any] = {"mesh": mesh}
        if self.mixed_precision:
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in decoder_blocks(model):
            fully_shard(block, **kw)
        fully_shard(model, **kw)

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def no_sync(self, last_micro: bool):
        # reduce-scatter after every micro-batch: skipping it would keep whole unsharded gradients alive
        return contextlib.nullcontext()

    def optimizer_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        # keyed by parameter name, values sharded DTensors: reloadable on another world size
        return copy.deepcopy(get_optimizer_state_dict(model, optimizer))

    def load_optimizer_state(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        set_optimizer_state_dict(model, optimizer, state)

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor] | None:
        """Every parameter gathered whole onto rank 0's CPU (other ranks get {}); tied names kept once."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        # save_pretrained writes a tied weight once (under its first name), as for an unsharded model
        seen: dict[int, str] = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            if id(p) in seen:
                full.pop(name, None)
            seen.setdefault(id(p), name)
        return full


PARALLEL_MODES = {"ddp": Replicated, "fsdp": Sharded}


def make_parallel(cfg: Any, device: torch.device, world: int) -> Replicated:
    """The strategy object for ``cfg.parallel``."""
    return PARALLEL_MODES[cfg.parallel](cfg, device, world)
