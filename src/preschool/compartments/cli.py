"""``preschool compartments EXPERIMENT.yaml``: run a compartmentalization experiment or dataset audit."""

from .experiment import DESCRIPTION, HELP, add_arguments  # noqa: F401
from .experiment import run_cli as run  # noqa: F401
