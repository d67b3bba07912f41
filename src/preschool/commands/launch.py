"""``preschool launch``: Slurm launch (preschool.launch; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("launch")(Command("preschool.launch", order=110))
