"""``preschool plan``: compute and memory planner (preschool.plan; its ``HELP`` is the help line)."""

from ..cli import COMMANDS, Command

COMMANDS.register("plan")(Command("preschool.plan", order=100))
