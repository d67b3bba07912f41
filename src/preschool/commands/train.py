"""``preschool train``: one training run (preschool.train.cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("train")(Command("preschool.train.cli", order=50))
