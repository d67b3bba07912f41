"""``preschool eval``: evaluators on checkpoints (preschool.evals.cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("eval")(Command("preschool.evals.cli", order=60))
