"""``preschool generate``: synthetic data from a generator (preschool.synthetic.cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("generate")(Command("preschool.synthetic.cli", order=30))
