"""The compartmentalization plug-in: what ``compartments`` contributes to the core (see ``preschool.plugins``).

- checkpoint hook: models loaded by the evaluators get their compartment
  embedding back (``model.restore_compartments``; a plain ``from_pretrained`` drops it).
"""

from __future__ import annotations

from ..plugins import register_checkpoint_hook


@register_checkpoint_hook
def _restore_compartment_embedding(model, path):
    from .model import restore_compartments

    return restore_compartments(model, path)
