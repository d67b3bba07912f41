"""The 14 L2T tasks, one module each (file stem = registry name); importing this package registers them all."""

from . import (  # noqa: F401
    char_count,
    deletion,
    fill_middle,
    half,
    last,
    masked_char,
    masked_word,
    one,
    random,
    reordering,
    shuffle,
    space,
    token_type,
    typo,
)
