"""``preschool launch``: Slurm launch (preschool.launch.cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("launch")(Command("preschool.launch.cli", order=110))
