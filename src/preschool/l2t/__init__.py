"""Language Learning Tasks (Yamaguchi, Mi & Aletras, ACL 2026): 14 tasks, formatting, mixing, packing.

See docs/l2t.md. Entry points: :class:`~preschool.l2t.transform.L2TTransform`
(one document -> samples), :func:`~preschool.l2t.write.build_l2t` (corpus ->
shard sets), ``preschool transform l2t`` (CLI).
"""

from .base import L2T_TASKS, Chunk, Context, Pair, Skip, Task, TaskConfig  # noqa: F401
from .transform import ALL_TASKS, DocResult, L2TConfig, L2TTransform, Sample  # noqa: F401
