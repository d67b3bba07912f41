"""``preschool transform l2t``: a corpus into L2T training shards (preschool.l2t.cli)."""

from ..cli import Command
from ..transform_cli import TRANSFORMS

TRANSFORMS.register("l2t")(Command("preschool.l2t.cli"))
