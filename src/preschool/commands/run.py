"""``preschool run``: the experiment runner (preschool.experiment_cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("run")(Command("preschool.experiment_cli", order=0))
