"""preschool: what a language model should see before and beside pretraining.

Synthetic pre-pretraining generators, language-learning-task transforms,
compartmentalization probes, a staged trainer for small Hugging Face decoders,
and evaluators plus statistics that tell a real gain from noise.
"""

__version__ = "0.1.0"
