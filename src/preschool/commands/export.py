"""``preschool export``: a prepared dataset in another format (preschool.data.export_cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("export")(Command("preschool.data.export_cli", order=20))
