"""``preschool prepare``: data only (preschool.prepare_cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("prepare")(Command("preschool.prepare_cli", order=10))
