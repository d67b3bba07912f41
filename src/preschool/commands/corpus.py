"""``preschool corpus``: look at a corpus (preschool.corpora.cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("corpus")(Command("preschool.corpora.cli", order=90))
