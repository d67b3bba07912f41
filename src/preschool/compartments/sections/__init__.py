"""The compartments extension package's report sections (analysis/sections.py), one module each: plateau.py, slowdown.py, similarity.py,
audit_gap.py (what they share: _common.py). The report's section registry walks this package, as it walks
``analysis/``.

Each is a :class:`~preschool.analysis.sections.GatheredSection`: ``gather`` reads the runs' files into
plain data, which ``results.json`` keeps as the section's ``inputs``, and ``render`` computes the rest
from it, so ``preschool report --from-results`` re-renders a compartments study without its run folders.
What is read: an arm's compartments come from the
``compartmented`` dataset its first stage trains on (its ``train/manifest.json``),
its curves from ``metrics.jsonl`` (``val/c<i>``, averaged over compartments:
the slowdown metric's loss), a fine-tune's source from the arm's
``callbacks.compartment_model.init_from``. With several training seeds every
number is computed per seed, then summarised as mean ± SD over seeds with the
seed-level verdict (the Student-t interval over the seeds, analysis/stats.py
``seed_interval``); ``report.compare`` pairs ``[arm, reference]``
are compared seed by seed (paired differences: both runs of a seed share its
initialisation and batch order, so part of the seed noise cancels).

- ``plateau``: final val loss per arm (mean over compartments, per compartment,
  translation rows' target half); plots ``loss_vs_step.png``, ``plateau_vs_c.png``.
- ``slowdown`` (``targets``, ``level``): steps of the arm / steps of the baseline at the same
  loss (compartments/slowdown.py; spec B.3); plot ``slowdown.png``. Of a ladder whose arms train
  several compartment counts, also per rung the growth of slowdown with c and whether that growth
  changes with size, with t intervals over the seeds (:func:`slowdown_across_ladder`; each rung's curves
  gathered from its runs, its size from the rung's record, ``ctx.ladder``).
- ``similarity`` (``rows``, ``layer``): cross-compartment cosine of the final
  checkpoint's trunk states (compartments/similarity.py; offset presentation, c >= 2).
- ``audit_gap`` (``reference``, ``arm``): per presentation, val loss of every arm
  minus the reference arm's at the steps both logged (spec B.6); plot ``audit_gap.png``.
"""
