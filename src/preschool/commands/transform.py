"""``preschool transform``: a corpus into training data, one kind per file of preschool/transforms/ (preschool.transform_cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("transform")(Command("preschool.transform_cli", order=40))
