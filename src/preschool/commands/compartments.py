"""``preschool compartments``: the compartmentalization plug-in's entry (preschool.compartments.cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("compartments")(Command("preschool.compartments.cli", order=80))
