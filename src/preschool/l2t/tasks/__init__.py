"""The 14 L2T tasks, one module each; importing this package registers them all."""

from . import (  # noqa: F401
    char_count,
    deletion,
    fill_middle,
    half,
    last,
    masked_char,
    masked_word,
    one,
    random_word,
    reordering,
    shuffle,
    space,
    token_type,
    typo,
)
