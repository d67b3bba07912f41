"""The compartmentalization extension package (see ``preschool.plugins``): what ``compartments`` contributes to the core.

Its registry parts are found by the registries in their own modules:

- dataset kinds ``compartmented`` and ``shifted`` (``builders.py``), built by ``prepare``;
- callbacks ``compartment_model`` and ``infonce`` (``callbacks.py``), named per arm;
- report sections ``plateau``, ``slowdown``, ``similarity``, ``audit_gap`` (``sections.py``).

This module holds the rest: the checkpoint hook, so models loaded by the evaluators
get their compartment embedding back (``model.restore_compartments``; a plain
``from_pretrained`` drops it).
"""

from __future__ import annotations

from ..plugins import register_checkpoint_hook


@register_checkpoint_hook
def _restore_compartment_embedding(model, path):
    from .model import restore_compartments

    return restore_compartments(model, path)
