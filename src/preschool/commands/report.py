"""``preschool report``: the report of an experiment (preschool.report_cli; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("report")(Command("preschool.report_cli", order=70))
